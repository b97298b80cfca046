//! The supervisor: runs one agent process in a session of its own, drains its
//! output, enforces timeouts and stops the whole process tree for sure.
//!
//! Threads per attempt: one writes the prompt to stdin and closes it; one
//! reads stdout (transcript + parse), one reads stderr (transcript + lines);
//! one waits for the direct child; one controller owns the clock, the
//! decisions and the public event channel. The controller sends
//! [`SupervisorEvent::Exited`] only once the direct child is reaped, no
//! process of its tree is alive and both output pipes reached end of file
//! (or, if a process that escaped the tree still holds them, after
//! [`PIPE_DRAIN_LIMIT`]); then the channel closes.
//!
//! A spawn failure (binary missing, bad working directory) is not an `Err`
//! from [`start`]: it arrives as the single `Exited` event, with
//! [`Ending::SpawnFailed`], so every attempt ends the same way and gets a
//! receipt. `start` returns `Err` only for our own trouble (transcript file,
//! threads).
//!
//! The agent is started by the process runner ([`crate::process`]); here
//! are the attempt's rules: `controller` its clock and stop decisions,
//! `reader` the output pipes, `report` what the exit report says.

mod controller;
mod reader;
mod report;

use crate::agent::parse::{parser_for, stderr_parser_for};
use crate::agent::{
    AgentError, AgentEvent, AgentKind, CommandSpec, CompletionSignal, FinalResult, RateLimit,
};
use crate::process::{self, Child, Cmd, ProcessError, ProcessTree};
use controller::Controller;
use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use nix::sys::signal::Signal;
use reader::{Msg, READ_CHUNK, STDERR_READ_CHUNK, Stream, read_stream, widen_pipe};
use report::Tally;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct SuperviseOptions {
    pub attempt_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    /// How long the agent may linger after its final `result` line.
    pub result_grace: Duration,
    /// Between TERM and KILL.
    pub kill_grace: Duration,
    pub transcript: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum Ending {
    Exited {
        code: i32,
    },
    Signaled {
        signal: i32,
    },
    AttemptTimeout,
    IdleTimeout,
    /// Stopped on request (completion seen, user key, shutdown), or by the
    /// supervisor when the agent lingered after its final result (reason
    /// [`REASON_AFTER_RESULT`]).
    Stopped {
        reason: String,
    },
    SpawnFailed {
        error: String,
    },
}

/// The `Stopped` reason when an agent was still running `result_grace` after
/// its final `result` line (a known Claude hang): its work is done.
pub const REASON_AFTER_RESULT: &str = "still running after its final result";

/// How long to keep reading after the whole process tree is gone, for a
/// process that escaped unseen (see [`ProcessTree`]) but holds our pipes.
pub const PIPE_DRAIN_LIMIT: Duration = process::PIPE_DRAIN_LIMIT;

#[derive(Debug, Clone)]
pub struct AgentExit {
    pub ending: Ending,
    pub duration: Duration,
    pub result: Option<FinalResult>,
    /// The agent's own final answer (where completion signals are read).
    pub final_answer: Option<String>,
    pub signal: Option<CompletionSignal>,
    /// A rejected rate limit seen during the attempt.
    pub rate_limited: Option<RateLimit>,
    /// The last lines of stderr (colour codes removed), for failures that
    /// need a cause shown.
    pub stderr_tail: String,
    /// The agent's session id as its first event named it (kept even when
    /// the agent is stopped before its final result).
    pub session_id: Option<String>,
    /// The model its first event named.
    pub model: Option<String>,
}

// One `Exited` per attempt among many small events: boxing it would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum SupervisorEvent {
    /// What the agent said since the last batch, in order: one read's worth,
    /// so a chatty agent costs one hand-over per read, not per line.
    Agents(Vec<AgentEvent>),
    Exited(AgentExit),
}

/// A handle that can stop the agent from any thread.
#[derive(Debug, Clone)]
pub struct AgentHandle {
    pid: u32,
    stop: Option<Sender<String>>,
    /// Shares what the supervisor observed, so a force-quit reaches the
    /// children that left the agent's session too.
    tree: Option<ProcessTree>,
}

impl AgentHandle {
    /// Stops the agent's whole process tree (TERM, then KILL after the kill
    /// grace). Idempotent and never blocks: the first reason is the one the
    /// exit reports; after the agent has ended it does nothing.
    pub fn stop(&self, reason: &str) {
        if let Some(tx) = &self.stop {
            let _ = tx.send(reason.to_string());
        }
    }

    /// The agent's process id (also its session and process-group id); 0 when
    /// it never started.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A handle that controls nothing (for a run that never started, and for
    /// tests of code that takes a handle).
    pub fn inert() -> AgentHandle {
        AgentHandle {
            pid: 0,
            stop: None,
            tree: None,
        }
    }

    /// The agent's start time (clock ticks after boot), with [`Self::pid`]
    /// its identity; `None` when it never started.
    pub fn start_time(&self) -> Option<u64> {
        self.tree.as_ref().and_then(ProcessTree::leader_start)
    }

    /// SIGKILL to the agent's whole tree at once, without waiting: the
    /// force-quit path. Does nothing once the tree is gone.
    pub fn kill_now(&self) {
        if let Some(tree) = &self.tree {
            tree.clone().signal(Signal::SIGKILL);
        }
    }
}

#[derive(Debug)]
pub struct RunningAgent {
    pub events: Receiver<SupervisorEvent>,
    pub handle: AgentHandle,
}

/// Batches (one read of the agent's output each, at most `READ_CHUNK` bytes)
/// waiting for the consumer; past this the supervisor stops reading the agent
/// (which then blocks on its own writes) instead of growing memory: at most
/// about (4 + 8) reads' worth wait, whatever the agent writes.
const PUBLIC_CAPACITY: usize = 4;
const INTERNAL_CAPACITY: usize = 8;

/// Starts `spec` under supervision. See the module docs for the guarantees.
pub fn start(
    spec: CommandSpec,
    kind: AgentKind,
    opts: SuperviseOptions,
) -> Result<RunningAgent, AgentError> {
    let transcript = open_transcript(&opts.transcript)?;
    let (public_tx, public_rx) = bounded(PUBLIC_CAPACITY);

    let mut cmd = Cmd::new(&spec.program)
        .args(&spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .work_in(&spec.cwd)
        // Ctrl+C reaches us, not the agent; its whole tree can be stopped.
        .own_session()
        // Called from the worker's long-lived thread (see `stop_with_spectr`).
        .stop_with_spectr();
    if kind.is_acp() {
        // A conversation: stdin stays open for the session (`crate::agent::acp`).
        cmd = cmd.stdin_pipe();
    } else if let Some(text) = &spec.stdin {
        cmd = cmd.input(text.clone().into_bytes());
    }
    let started = Instant::now();
    let child = match cmd.spawn() {
        Ok(child) => child,
        Err(ProcessError::Spawn { source, .. }) => {
            let error = spawn_error(&spec, &source);
            if let Ok(mut f) = transcript.lock() {
                let _ = writeln!(f, "spectr: {error}");
            }
            let exit = AgentExit {
                ending: Ending::SpawnFailed {
                    error: error.clone(),
                },
                duration: started.elapsed(),
                result: None,
                final_answer: None,
                signal: None,
                rate_limited: None,
                stderr_tail: error,
                session_id: None,
                model: None,
            };
            // The receiver is ours and the channel empty: this cannot block.
            let _ = public_tx.send(SupervisorEvent::Exited(exit));
            return Ok(RunningAgent {
                events: public_rx,
                handle: AgentHandle::inert(),
            });
        }
        Err(e) => {
            return Err(AgentError::Thread {
                what: "stdin writer",
                source: e.into_io(),
            });
        }
    };

    let pid = child.pid();
    let mut tree = child
        .tree()
        .clone()
        .saving_to(process::members_file(&opts.transcript));
    match spawn_threads(
        child,
        &spec,
        kind,
        &opts,
        transcript,
        public_tx,
        started,
        tree.clone(),
    ) {
        Ok(stop_tx) => Ok(RunningAgent {
            events: public_rx,
            handle: AgentHandle {
                pid,
                stop: Some(stop_tx),
                tree: Some(tree),
            },
        }),
        Err(e) => {
            // Whatever started must not outlive the failure (the child
            // itself was killed and reaped when its handle dropped).
            tree.signal(Signal::SIGKILL);
            Err(e)
        }
    }
}

fn open_transcript(path: &Path) -> Result<Arc<Mutex<File>>, AgentError> {
    let err = |source| AgentError::Transcript {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let file = File::create(path).map_err(err)?;
    Ok(Arc::new(Mutex::new(file)))
}

/// Why the agent could not start, naming what is missing.
fn spawn_error(spec: &CommandSpec, e: &std::io::Error) -> String {
    if !spec.cwd.is_dir() {
        return format!(
            "cannot start {}: working directory {} does not exist",
            spec.program.display(),
            spec.cwd.display()
        );
    }
    if e.kind() == std::io::ErrorKind::NotFound {
        return format!("cannot start {}: program not found", spec.program.display());
    }
    format!("cannot start {}: {e}", spec.program.display())
}

#[allow(clippy::too_many_arguments)]
fn spawn_threads(
    mut child: Child,
    spec: &CommandSpec,
    kind: AgentKind,
    opts: &SuperviseOptions,
    transcript: Arc<Mutex<File>>,
    public_tx: Sender<SupervisorEvent>,
    started: Instant,
    tree: ProcessTree,
) -> Result<Sender<String>, AgentError> {
    let thread_err = |what| move |source| AgentError::Thread { what, source };
    let (msg_tx, msg_rx) = bounded::<Msg>(INTERNAL_CAPACITY);
    let (stop_tx, stop_rx) = unbounded::<String>();
    let (stdout, stderr) = (child.take_stdout(), child.take_stderr());
    let acp = kind
        .is_acp()
        .then(|| crate::agent::acp::AcpLink::new(child.take_stdin()));

    // The waiter owns the Child: its pid cannot be reused before it is reaped.
    let tx = msg_tx.clone();
    std::thread::Builder::new()
        .name("agent-wait".into())
        .spawn(move || {
            let msg = match child.wait() {
                Ok(status) => Msg::Exited(status),
                Err(e) => Msg::WaitFailed(e.to_string()),
            };
            let _ = tx.send(msg);
        })
        .map_err(thread_err("process waiter"))?;
    if let Some(stdout) = stdout {
        widen_pipe(&stdout);
        let (tx, t) = (msg_tx.clone(), transcript.clone());
        let parser: Box<dyn crate::agent::parse::LineParser> = match &acp {
            Some(link) => Box::new(crate::agent::acp::AcpSession::start(
                link.clone(),
                spec.prompt.clone(),
                spec.cwd.clone(),
            )),
            None => parser_for(kind),
        };
        std::thread::Builder::new()
            .name("agent-stdout".into())
            .spawn(move || read_stream(stdout, Stream::Stdout, parser, &t, &tx, READ_CHUNK))
            .map_err(thread_err("stdout reader"))?;
    }
    if let Some(stderr) = stderr {
        let (tx, t) = (msg_tx, transcript);
        std::thread::Builder::new()
            .name("agent-stderr".into())
            .spawn(move || {
                let lines = stderr_parser_for(kind);
                read_stream(stderr, Stream::Stderr, lines, &t, &tx, STDERR_READ_CHUNK)
            })
            .map_err(thread_err("stderr reader"))?;
    }

    let controller = Controller::new(
        Tally::new(kind, spec.usage_file.clone()),
        opts.clone(),
        spec.prompt.clone(),
        started,
        tree,
        public_tx,
    )
    .cancelling_with(acp);
    std::thread::Builder::new()
        .name("agent-supervisor".into())
        .spawn(move || controller.run(msg_rx, stop_rx))
        .map_err(thread_err("controller"))?;
    Ok(stop_tx)
}
