//! spectr-fake-agent: a scripted stand-in for a coding-agent CLI, for tests
//! and demos. It speaks Claude Code's stream-json (default) or plain text
//! (`--format text`), reads the prompt from stdin (or `--prompt-file F`), and
//! ignores every other argument, so it can be installed as `claude`.
//! Installed as `copilot`, `pi` or `qwen` it speaks that CLI's JSON lines
//! instead (see `speak.rs`, where every output format lives). `script.rs`
//! reads the scenario below and keeps the state folder; `steps.rs` plays it.
//!
//! The prompt names the task (`Task ID: <id>`) and its tasks file
//! (`Tasks file: <path>`). What it does comes from a JSON script named by
//! `SPECTR_FAKE_SCRIPT`:
//!
//! ```json
//! {"default": ["say:hi", "complete"], "1.2": [["fail:no db"], ["complete"]]}
//! ```
//!
//! A task's entry is one list of steps for every attempt, or one list per
//! attempt (the last repeats). Attempts are counted per task in the folder
//! `SPECTR_FAKE_STATE` (each prompt is saved as `prompts/<task>-<n>.txt`, and
//! each agent's pid is appended to `agents.pid`);
//! without it every run is attempt 1. Steps are `verb` or `verb:arg`; `\n` in
//! an argument is a newline:
//!
//! `say:TEXT` `tool:NAME:INPUT` `tool_output:TEXT` `write:PATH=CONTENT`
//! `run:CMD` (a command it says it runs; over ACP it asks first)
//! `delete:PATH` `chmod:MODE:PATH` `mark:STATUS` `git_commit:MSG` `git:ARGS` (any git
//! command, arguments split on spaces) `complete` `fail:REASON`
//! `result:TEXT` `exit:N` `sleep:MS` `hang` `hang_after_result` `flood:MB`
//! `spawn_child` `echo_prompt` `rate_limit:SECS` `cost:USD` `stderr:TEXT`
//! `result_error:STATUS:TEXT` (the run failed on an API error)
//! `retry_429:SECS` (a 429 the agent retried itself, then went on)
//! `deny_tools` (from here on every tool call is refused and does nothing; as
//! the first step, qwen's header offers no write tools)
//! `learn:TEXT` (runs `spectr learn TEXT`) `task_done[:STATUS]` (runs `spectr
//! task done <task> [--status STATUS]`) `context` (runs `spectr context` and
//! saves what it printed as `context/<task>-<n>.txt` in the state folder);
//! all find `spectr` on PATH.
//! `edit_line:PATH:N=TEXT` replaces line N (from 1) of a file, the way an
//! agent edits one line and leaves the rest as it finds it.
//! `copy:SRC=DST` copies a file (what the agent read, kept where a test can
//! see it). `touch:PATH` creates an empty file (parents too); `wait_for:PATH[:SECS]`
//! waits until PATH exists, and after SECS (default 60) fails the attempt and
//! exits 1, so a test that never creates it fails instead of hanging. Two
//! agents that each touch a file and wait for the other's prove they ran at
//! the same time, without timing anything. Relative paths are from the
//! agent's working folder.
//!
//! `plant:MARKER` plants in the repository's git folder every command git
//! could run later (fsmonitor, hooks, filters, diff, merge and signature
//! programs), each appending its name to MARKER when run; `escape:REPORT`
//! tries to write `$HOME`, beside the repository, `/etc`, the git config and
//! hooks, the main tree and another lane (from a lane), spectr's session
//! and lock, a `commondir` in the git folder, and
//! writes to REPORT which attempts succeeded (see `escape.rs`).
//!
//! With no script: `mark:in_progress`, `say:…`, `mark:completed`, `complete`.
//! `--version` alone prints a version line and exits.

// Beside this file, in a folder of its own: a binary's root looks for
// modules in `src/bin/`, which holds only binaries.
#[path = "spectr-fake-agent/acp.rs"]
mod acp;
#[path = "spectr-fake-agent/escape.rs"]
mod escape;
#[path = "spectr-fake-agent/script.rs"]
mod script;
#[path = "spectr-fake-agent/speak.rs"]
mod speak;
#[path = "spectr-fake-agent/steps.rs"]
mod steps;

use script::{default_steps, load_steps, record_args, record_pid, record_prompt};
use speak::{Invocation, Speaker};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};
use steps::Agent;

fn main() {
    // Asked before a run (spectr's preflight): answer like a real CLI, do nothing else.
    if std::env::args().nth(1).as_deref() == Some("--version") {
        println!("spectr-fake-agent {}", env!("CARGO_PKG_VERSION"));
        return;
    }
    let opts = Opts::from_args();
    let argv: Vec<String> = std::env::args().collect();
    let invocation = Invocation::read(
        argv.first().map(String::as_str).unwrap_or_default(),
        argv.get(1..).unwrap_or_default(),
    );
    // An ACP agent's prompt comes in the conversation.
    let mut acp_io = None;
    let prompt = if invocation.format == speak::Format::Acp {
        match acp::handshake() {
            Ok((io, prompt)) => {
                acp_io = Some(io);
                prompt
            }
            Err(e) => fail_setup(&format!("cannot read the prompt over ACP: {e}")),
        }
    } else {
        match read_prompt(&opts) {
            Ok(p) => p,
            Err(e) => fail_setup(&format!("cannot read the prompt: {e}")),
        }
    };
    let task = field(&prompt, "Task ID:");
    let tasks_file = field(&prompt, "Tasks file:").map(PathBuf::from);
    let task_key = task.clone().unwrap_or_else(|| "default".to_string());
    let state = std::env::var_os("SPECTR_FAKE_STATE").map(PathBuf::from);
    let attempt = match &state {
        Some(dir) => {
            let n = record_prompt(dir, &task_key, &prompt).unwrap_or_else(|e| fail_setup(&e));
            record_args(dir, &task_key, n, argv.get(1..).unwrap_or_default());
            record_pid(dir);
            n
        }
        None => 1,
    };
    let steps = match std::env::var_os("SPECTR_FAKE_SCRIPT") {
        Some(path) => {
            load_steps(Path::new(&path), &task_key, attempt).unwrap_or_else(|e| fail_setup(&e))
        }
        None => default_steps(),
    };
    let session = opts.session_id.clone().unwrap_or_else(pseudo_session_id);
    let mut out = Speaker::new(invocation, session);
    out.acp = acp_io;
    let mut agent = Agent {
        out,
        prompt,
        task,
        tasks_file,
        state,
        last_text: String::new(),
    };
    // First, it refuses from the start: qwen's header then offers no write tools.
    if steps.first().is_some_and(|s| s == "deny_tools") {
        agent.out.denied = true;
    }
    let prompt = agent.prompt.clone();
    agent.out.init(&prompt);
    for step in &steps {
        agent.step(step);
    }
    agent.finish();
}

fn fail_setup(message: &str) -> ! {
    eprintln!("spectr-fake-agent: {message}");
    std::process::exit(2);
}

struct Opts {
    prompt_file: Option<PathBuf>,
    session_id: Option<String>,
}

impl Opts {
    fn from_args() -> Opts {
        let mut opts = Opts {
            prompt_file: None,
            session_id: None,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
                _ => (arg.clone(), None),
            };
            let value =
                |args: &mut dyn Iterator<Item = String>| inline.clone().or_else(|| args.next());
            match flag.as_str() {
                // Read by `Invocation` (which format to speak).
                "--format" | "--output-format" => {
                    let _ = value(&mut args);
                }
                "--prompt-file" => opts.prompt_file = value(&mut args).map(PathBuf::from),
                "--session-id" => opts.session_id = value(&mut args),
                // Everything else (Claude's -p, --verbose, permission flags…) is accepted and ignored.
                _ => {}
            }
        }
        opts
    }
}

fn read_prompt(opts: &Opts) -> std::io::Result<String> {
    match &opts.prompt_file {
        Some(path) => std::fs::read_to_string(path),
        None => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s)?;
            Ok(s)
        }
    }
}

/// The value of a `Name: value` line of the prompt.
fn field(prompt: &str, name: &str) -> Option<String> {
    prompt
        .lines()
        .find_map(|l| l.trim().strip_prefix(name).map(|v| v.trim().to_string()))
        .filter(|v| !v.is_empty())
}

fn pseudo_session_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("fake-{:x}-{:x}", std::process::id(), nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_fields() {
        let p = "intro\nTask ID: 2.3\n  Tasks file: spectr/changes/x/tasks.jsonc\n";
        assert_eq!(field(p, "Task ID:").as_deref(), Some("2.3"));
        assert_eq!(
            field(p, "Tasks file:").as_deref(),
            Some("spectr/changes/x/tasks.jsonc")
        );
        assert_eq!(field(p, "Nope:"), None);
    }
}
