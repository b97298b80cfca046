//! `--lane-setup CMD` (`ralph: lane_setup:`): a command run with `sh -c` in
//! each new lane before its first task (`npm ci`, `uv sync`), under the
//! agent's supervisor: its own process session, its output shown like an
//! agent's (tagged with the task it prepares for) and kept in a transcript,
//! a timeout, and stopped like an agent on a quit, restart or skip.
//!
//! Before it, the new lane gets what `.worktreeinclude` names (the
//! checkpoint layer copies; [`included_summary`] says what came).
//!
//! Its failure is spectr's own kind (it would fail again for every task of
//! the lane): it stops the run and is never counted as the agent's attempt.

use crate::agent::{AgentEvent, AgentKind, CommandSpec, Ending, SuperviseOptions, SupervisorEvent};
use crate::model::TaskId;
use crate::ralph::attempt::{AgentBatch, AttemptReport};
use crate::ralph::config::RunConfig;
use crate::ralph::control::{ActiveAgents, Control};
use crate::ralph::event::{LoopEvent, Outcome, StopAction};
use crossbeam_channel::{Receiver, select};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

/// How many of the command's last lines a failure carries.
const TAIL_LINES: usize = 20;

/// How the setup ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupEnd {
    Done,
    /// Stopped on request before it finished: the lane is not ready.
    Stopped(StopAction),
    /// Why, with the tail of its output.
    Failed(String),
}

/// What one run of the setup command needs.
pub struct Setup<'a> {
    pub cmd: &'a str,
    /// The lane's project root (where agents start).
    pub dir: &'a Path,
    pub lane: &'a str,
    /// Variables on top of spectr's own (the lane's, see `lanes::lane_env`).
    pub env: Vec<(String, String)>,
    /// The task it prepares for: its output is shown under that task.
    pub task: &'a TaskId,
    pub attempt: u32,
}

/// The setup's transcript: next to the attempts' of this run.
pub fn transcript_path(cfg: &RunConfig, lane: &str) -> PathBuf {
    cfg.transcripts_dir().join(format!("{lane}-setup.log"))
}

/// Runs the setup to its end (or until stopped).
pub fn run(
    setup: &Setup<'_>,
    cfg: &RunConfig,
    controls: &Receiver<Control>,
    active: &ActiveAgents,
    agent_batch: Option<&AgentBatch<'_>>,
    emit: &mut dyn FnMut(LoopEvent),
) -> SetupEnd {
    let mut spec = CommandSpec {
        program: PathBuf::from("sh"),
        args: vec!["-c".into(), setup.cmd.to_string()],
        env: setup.env.clone(),
        cwd: setup.dir.to_path_buf(),
        stdin: None,
        prompt: String::new(),
        session_id: None,
        usage_file: None,
    };
    if let Some(sandbox) = &cfg.sandbox {
        spec = sandbox.wrap(spec, &[]);
    }
    let opts = SuperviseOptions {
        attempt_timeout: Some(cfg.lane_setup_timeout),
        idle_timeout: None,
        result_grace: cfg.result_grace,
        kill_grace: cfg.kill_grace,
        transcript: transcript_path(cfg, setup.lane),
    };
    let what = format!("the lane setup `{}` in {}", setup.cmd, setup.lane);
    let running = match crate::agent::supervisor::start(spec, AgentKind::Custom, opts) {
        Ok(r) => r,
        Err(e) => return SetupEnd::Failed(format!("{what} could not start: {e}")),
    };
    let handle = running.handle.clone();
    active.add(handle.clone());
    let mut tail: VecDeque<String> = VecDeque::new();
    let mut stopped = None;
    let exit = loop {
        select! {
            recv(running.events) -> msg => match msg {
                Ok(SupervisorEvent::Agents(events)) => {
                    for e in &events {
                        if let AgentEvent::Raw { line } | AgentEvent::Stderr { line } = e {
                            if tail.len() == TAIL_LINES {
                                tail.pop_front();
                            }
                            tail.push_back(crate::text::strip(line).trim_end().to_string());
                        }
                    }
                    match agent_batch {
                        Some(batch) => batch(setup.task, setup.attempt, events),
                        None => {
                            for agent in events {
                                emit(LoopEvent::AgentEvent {
                                    task: setup.task.clone(),
                                    attempt: setup.attempt,
                                    agent,
                                });
                            }
                        }
                    }
                }
                Ok(SupervisorEvent::Exited(exit)) => break Some(exit),
                Err(_) => break None,
            },
            recv(controls) -> c => if let Ok(c) = c {
                let action = c.stop_action();
                if let Some(a) = action && stopped.is_none() {
                    stopped = Some(a);
                    handle.stop("stopped by request");
                }
            },
        }
    };
    active.remove(handle.pid());
    if let Some(action) = stopped {
        return SetupEnd::Stopped(action);
    }
    let Some(exit) = exit else {
        return SetupEnd::Failed(format!("{what}: its supervisor stopped without an exit"));
    };
    let why = match &exit.ending {
        Ending::Exited { code: 0 } => return SetupEnd::Done,
        Ending::Exited { code } => format!("{what} exited with code {code}"),
        Ending::Signaled { signal } => format!("{what} was killed by signal {signal}"),
        Ending::AttemptTimeout => format!(
            "{what} did not finish within --lane-setup-timeout {}",
            humantime::format_duration(cfg.lane_setup_timeout)
        ),
        Ending::IdleTimeout => format!("{what} went silent"),
        Ending::Stopped { reason } => format!("{what} was stopped: {reason}"),
        Ending::SpawnFailed { error } => format!("{what} could not start: {error}"),
    };
    let shown: Vec<&str> = tail.iter().map(String::as_str).collect();
    SetupEnd::Failed(if shown.iter().all(|l| l.trim().is_empty()) {
        format!("{why} (it printed nothing)")
    } else {
        format!("{why}; its last output:\n{}", shown.join("\n"))
    })
}

/// A lane that could not be prepared stops the run with `message`; no
/// attempt is counted (no agent started, the task is not burned).
pub fn stopped(task: &TaskId, message: String, emit: &mut dyn FnMut(LoopEvent)) -> AttemptReport {
    emit(LoopEvent::Error {
        task: Some(task.clone()),
        message: message.clone(),
    });
    AttemptReport {
        outcome: Outcome::Abnormal {
            detail: message.clone(),
        },
        fatal: Some(message),
    }
}

/// `brought .env, node_modules/ from .worktreeinclude (3 files, 1.2 KiB, copied) in 4ms`.
pub fn included_summary(
    brought: &crate::checkpoint::Included,
    took: std::time::Duration,
) -> String {
    let file = crate::checkpoint::INCLUDE_FILE;
    let mut text = if brought.entries.is_empty() {
        format!("{file} names nothing ignored in your tree: nothing brought")
    } else {
        const SHOWN: usize = 8;
        let mut names = brought
            .entries
            .iter()
            .take(SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if brought.entries.len() > SHOWN {
            names.push_str(&format!(" and {} more", brought.entries.len() - SHOWN));
        }
        let how = match (brought.cloned, brought.files) {
            (0, _) => "copied".to_string(),
            (c, f) if c == f => "cloned copy-on-write".to_string(),
            (c, _) => format!("{c} cloned copy-on-write, the rest copied"),
        };
        let links = match brought.symlinks {
            0 => String::new(),
            n => format!(", {n} symlink{}", if n == 1 { "" } else { "s" }),
        };
        format!(
            "brought {names} from {file} ({} file{}, {}{links}; {how}) in {}",
            brought.files,
            if brought.files == 1 { "" } else { "s" },
            size(brought.bytes),
            short_duration(took)
        )
    };
    if !brought.already_there.is_empty() {
        text.push_str(&format!(
            "; already in the lane, left as they were: {}",
            brought.already_there.join(", ")
        ));
    }
    text
}

fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

pub fn short_duration(d: std::time::Duration) -> String {
    if d < std::time::Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}
