//! spectr-fake-agent: a scripted stand-in for a coding-agent CLI, for tests
//! and demos. It speaks Claude Code's stream-json (default) or plain text
//! (`--format text`), reads the prompt from stdin (or `--prompt-file F`), and
//! ignores every other argument, so it can be installed as `claude`.
//! Installed as `copilot`, `pi` or `qwen` it speaks that CLI's JSON lines
//! instead (see `speak.rs`, where every output format lives).
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
//! With no script: `mark:in_progress`, `say:…`, `mark:completed`, `complete`.
//! `--version` alone prints a version line and exits.

// Beside this file, in a folder of its own: a binary's root looks for
// modules in `src/bin/`, which holds only binaries.
#[path = "spectr-fake-agent/speak.rs"]
mod speak;

use serde_json::Value;
use speak::{Format, Invocation, Speaker};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
    let prompt = match read_prompt(&opts) {
        Ok(p) => p,
        Err(e) => fail_setup(&format!("cannot read the prompt: {e}")),
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
    let mut agent = Agent {
        out: Speaker::new(invocation, session),
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

/// Runs `spectr` (from PATH) as an agent would, with the agent's environment.
fn run_spectr(args: &[&str]) -> std::io::Result<String> {
    let out = Command::new("spectr")
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(std::io::Error::other(text))
    }
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

/// Steps that act on the world (files, git, spectr): refused, and skipped,
/// while tools are denied.
const ACTS: [&str; 11] = [
    "write",
    "delete",
    "chmod",
    "mark",
    "git_commit",
    "learn",
    "task_done",
    "edit_line",
    "copy",
    "touch",
    "tool_output",
];

/// Saves the arguments the agent was started with, one per line, as
/// `<state>/args/<task>-<n>.txt` (a test checks the command line spectr used).
fn record_args(state: &Path, task: &str, attempt: usize, args: &[String]) {
    let dir = state.join("args");
    let path = dir.join(format!("{}-{attempt}.txt", safe_name(task)));
    let text: String = args.iter().map(|a| format!("{a}\n")).collect();
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text)) {
        eprintln!("spectr-fake-agent: cannot write {}: {e}", path.display());
    }
}

fn safe_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Appends our pid to `<state>/agents.pid`, so a test can check that no
/// agent outlived its run.
fn record_pid(state: &Path) {
    let path = state.join("agents.pid");
    let saved = std::fs::create_dir_all(state).and_then(|()| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("{}\n", std::process::id()).as_bytes()))
    });
    if let Err(e) = saved {
        eprintln!("spectr-fake-agent: cannot write {}: {e}", path.display());
    }
}

/// Saves the prompt as the next attempt's file; returns the attempt number.
fn record_prompt(state: &Path, task: &str, prompt: &str) -> Result<usize, String> {
    save_numbered(state, "prompts", task, prompt)
}

/// Saves `text` as `<state>/<folder>/<task>-<n>.txt`, n the first free number.
fn save_numbered(state: &Path, folder: &str, task: &str, text: &str) -> Result<usize, String> {
    let dir = state.join(folder);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let name = safe_name(task);
    let mut n = 1;
    while dir.join(format!("{name}-{n}.txt")).exists() {
        n += 1;
    }
    let path = dir.join(format!("{name}-{n}.txt"));
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(n)
}

fn load_steps(path: &Path, task: &str, attempt: usize) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read script {}: {e}", path.display()))?;
    let script: Value = serde_json::from_str(&text)
        .map_err(|e| format!("script {} is not JSON: {e}", path.display()))?;
    let Some(entry) = script.get(task).or_else(|| script.get("default")) else {
        return Ok(default_steps());
    };
    let attempts: Vec<&Value> = match entry {
        Value::Array(items) if items.iter().any(Value::is_array) => items.iter().collect(),
        other => vec![other],
    };
    let chosen = attempts
        .get(attempt.saturating_sub(1))
        .or(attempts.last())
        .copied()
        .unwrap_or(&Value::Null);
    let steps = match chosen {
        Value::Array(items) => items
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>(),
        Value::String(s) => Some(vec![s.clone()]),
        _ => None,
    };
    steps.ok_or_else(|| {
        format!(
            "script {}: steps for '{task}' must be strings",
            path.display()
        )
    })
}

fn default_steps() -> Vec<String> {
    [
        "mark:in_progress",
        "say:Working on the task.",
        "mark:completed",
        "complete",
    ]
    .map(String::from)
    .to_vec()
}

fn pseudo_session_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("fake-{:x}-{:x}", std::process::id(), nanos)
}

fn unescape(s: &str) -> String {
    s.replace("\\n", "\n").replace("\\t", "\t")
}

struct Agent {
    /// Everything the agent prints goes through it, in its CLI's format.
    out: Speaker,
    prompt: String,
    task: Option<String>,
    tasks_file: Option<PathBuf>,
    state: Option<PathBuf>,
    last_text: String,
}

impl Agent {
    fn flush(&mut self) {
        self.out.flush();
    }

    fn say(&mut self, text: &str) {
        self.last_text = text.to_string();
        self.out.say(text);
    }

    fn tool(&mut self, name: &str, input: &str, output: &str, is_error: bool) {
        self.out.tool(name, input, output, is_error);
    }

    fn result(&mut self, text: &str, is_error: bool, api_error_status: Option<u16>) {
        self.out.result(text, is_error, api_error_status);
    }

    fn step(&mut self, step: &str) {
        let (verb, arg) = step.split_once(':').unwrap_or((step, ""));
        if self.out.denied && ACTS.contains(&verb) {
            // Refused before it ran: nothing is written.
            let name = if matches!(verb, "write" | "touch") {
                "Write"
            } else {
                "Bash"
            };
            self.tool(name, arg, "", true);
            self.flush();
            return;
        }
        match verb {
            "say" => self.say(&unescape(arg)),
            "tool" => {
                let (name, input) = arg.split_once(':').unwrap_or((arg, ""));
                let output = format!("(fake output of {name})");
                self.tool(name, &unescape(input), &output, false);
            }
            "tool_output" => self.tool("Bash", "cat notes.txt", &unescape(arg), false),
            "write" => {
                let (path, content) = arg.split_once('=').unwrap_or((arg, ""));
                let content = unescape(content);
                let outcome = Path::new(path)
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| std::fs::write(path, &content));
                self.tool_outcome(
                    "Write",
                    path,
                    outcome.map(|()| format!("wrote {} bytes", content.len())),
                );
            }
            "delete" => {
                let p = Path::new(arg);
                let outcome = if p.is_dir() {
                    std::fs::remove_dir_all(p)
                } else {
                    std::fs::remove_file(p)
                };
                self.tool_outcome(
                    "Bash",
                    &format!("rm -rf {arg}"),
                    outcome.map(|()| String::new()),
                );
            }
            "mark" => {
                let outcome = self.mark(arg);
                let file = self
                    .tasks_file
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                self.tool_outcome("Edit", &file, outcome.map_err(std::io::Error::other));
            }
            "chmod" => {
                // `chmod:444:PATH`: the mode in octal, like chmod(1).
                let (mode, path) = arg.split_once(':').unwrap_or(("644", arg));
                let outcome = u32::from_str_radix(mode, 8)
                    .map_err(std::io::Error::other)
                    .and_then(|m| {
                        use std::os::unix::fs::PermissionsExt;
                        std::fs::set_permissions(path, std::fs::Permissions::from_mode(m))
                    });
                self.tool_outcome(
                    "Bash",
                    &format!("chmod {mode} {path}"),
                    outcome.map(|()| String::new()),
                );
            }
            "git" => {
                // `git:stash push -u`: any git command, arguments split on
                // spaces, with an identity so commits and stashes work.
                let outcome = git_run(arg);
                self.tool_outcome("Bash", &format!("git {arg}"), outcome);
            }
            "git_commit" => {
                let outcome = git_commit(arg);
                self.tool_outcome(
                    "Bash",
                    &format!("git add -A && git commit -m {arg:?}"),
                    outcome,
                );
            }
            "complete" => self.result(
                "The task is done and verified.\n<promise>COMPLETE</promise>",
                false,
                None,
            ),
            "fail" => self.result(
                &format!(
                    "I could not finish.\n<promise>FAILED: {}</promise>",
                    unescape(arg)
                ),
                false,
                None,
            ),
            "result" => self.result(&unescape(arg), false, None),
            "result_error" => {
                // `result_error:STATUS:TEXT`: the run failed on an API error.
                let (status, text) = arg.split_once(':').unwrap_or(("500", arg));
                self.result(&unescape(text), true, status.trim().parse().ok());
            }
            "exit" => {
                self.flush();
                std::process::exit(arg.trim().parse().unwrap_or(1));
            }
            "sleep" => {
                self.flush();
                std::thread::sleep(Duration::from_millis(arg.trim().parse().unwrap_or(0)));
            }
            "hang" => self.hang(),
            "hang_after_result" => {
                if !self.out.result_sent {
                    let text = if self.last_text.is_empty() {
                        "Done.".to_string()
                    } else {
                        self.last_text.clone()
                    };
                    self.result(&text, false, None);
                }
                self.hang();
            }
            "flood" => self.flood(arg.trim().parse().unwrap_or(1)),
            "spawn_child" => self.spawn_child(),
            "echo_prompt" => {
                let prompt = self.prompt.clone();
                if self.out.format != Format::Text {
                    self.out.say(&prompt);
                }
                for l in prompt.lines() {
                    self.out.println(l);
                }
                self.last_text = prompt;
            }
            "rate_limit" => {
                let secs: u64 = arg.trim().parse().unwrap_or(3600);
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                self.out.rate_limited(secs, now + secs);
            }
            "retry_429" => self.out.retried_429(arg.trim().parse().unwrap_or(1)),
            "deny_tools" => self.out.denied = true,
            "cost" => self.out.cost = arg.trim().parse().unwrap_or(self.out.cost),
            "learn" => {
                let text = unescape(arg);
                let outcome = run_spectr(&["learn", &text]);
                self.tool_outcome("Bash", &format!("spectr learn {text:?}"), outcome);
            }
            "task_done" => {
                let task = self.task.clone().unwrap_or_default();
                let mut args = vec!["task", "done", task.as_str()];
                if !arg.is_empty() {
                    args.extend(["--status", arg]);
                }
                let outcome = run_spectr(&args);
                self.tool_outcome("Bash", &format!("spectr {}", args.join(" ")), outcome);
            }
            "context" => {
                let task = self.task.clone().unwrap_or_default();
                let outcome = run_spectr(&["context"]).and_then(|text| match &self.state {
                    Some(state) => save_numbered(state, "context", &task, &text)
                        .map_err(std::io::Error::other)
                        .map(|_| text),
                    None => Ok(text),
                });
                self.tool_outcome("Bash", "spectr context", outcome.map(|_| String::new()));
            }
            "edit_line" => {
                let (target, text) = arg.split_once('=').unwrap_or((arg, ""));
                let (path, line) = target.rsplit_once(':').unwrap_or((target, "1"));
                let outcome = edit_line(Path::new(path), line, &unescape(text));
                self.tool_outcome("Edit", path, outcome);
            }
            "copy" => {
                let (from, to) = arg.split_once('=').unwrap_or((arg, ""));
                let outcome = Path::new(to)
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| std::fs::copy(from, to));
                self.tool_outcome(
                    "Bash",
                    &format!("cp {from} {to}"),
                    outcome.map(|n| format!("copied {n} bytes")),
                );
            }
            "touch" => {
                let path = Path::new(arg);
                let outcome = path
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| {
                        std::fs::OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(path)
                    });
                self.tool_outcome(
                    "Bash",
                    &format!("touch {arg}"),
                    outcome.map(|_| String::new()),
                );
            }
            "wait_for" => {
                let (path, secs) = wait_for_arg(arg);
                if !wait_for_file(Path::new(path), Duration::from_secs(secs)) {
                    self.result(
                        &format!(
                            "<promise>FAILED: {path} did not appear within {secs} s</promise>"
                        ),
                        false,
                        None,
                    );
                    self.flush();
                    eprintln!("spectr-fake-agent: {path} did not appear within {secs} s");
                    std::process::exit(1);
                }
            }
            "stderr" => {
                self.flush();
                eprintln!("{}", unescape(arg));
            }
            other => eprintln!("spectr-fake-agent: unknown step '{other}' ignored"),
        }
        self.flush();
    }

    fn tool_outcome(&mut self, name: &str, input: &str, outcome: std::io::Result<String>) {
        match outcome {
            Ok(out) => self.tool(name, input, &out, false),
            Err(e) => self.tool(name, input, &e.to_string(), true),
        }
    }

    fn hang(&mut self) -> ! {
        self.flush();
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }

    /// `mb` MiB of assistant text, in lines like a chatty agent's.
    fn flood(&mut self, mb: u64) {
        let target = mb * 1024 * 1024;
        let filler = "The quick brown fox jumps over the lazy dog while the tests keep running; ";
        let mut written = 0u64;
        let mut i = 0u64;
        while written < target {
            let text: String = (0..8)
                .map(|k| format!("flood {i}.{k}: {filler}{filler}\n"))
                .collect();
            written += text.len() as u64
                + if self.out.format == Format::Text {
                    0
                } else {
                    220
                };
            i += 1;
            self.out.flood_text(&text);
        }
        self.last_text = format!("flooded {mb} MiB");
    }

    /// A background child that ignores TERM and holds our stdout, like a
    /// stray language server: the supervisor must still get rid of it.
    fn spawn_child(&mut self) {
        self.flush();
        let child = Command::new("sh")
            .args(["-c", "trap '' TERM; sleep 1000; :"])
            .stdin(Stdio::null())
            .spawn();
        match child {
            Ok(child) => {
                if let Some(state) = &self.state {
                    let path = state.join("children.pid");
                    let line = format!("{}\n", child.id());
                    let saved = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&path)
                        .and_then(|mut f| f.write_all(line.as_bytes()));
                    if let Err(e) = saved {
                        eprintln!("spectr-fake-agent: cannot write {}: {e}", path.display());
                    }
                }
                // Not waited for: it is meant to outlive us.
                drop(child);
            }
            Err(e) => eprintln!("spectr-fake-agent: cannot spawn a child: {e}"),
        }
    }

    fn mark(&self, status: &str) -> Result<String, String> {
        let task = self
            .task
            .as_deref()
            .ok_or("no 'Task ID:' line in the prompt")?;
        let file = self
            .tasks_file
            .as_deref()
            .ok_or("no 'Tasks file:' line in the prompt")?;
        // The task may live in a split file next to the named one.
        let mut candidates = vec![file.to_path_buf()];
        if let Ok(entries) = std::fs::read_dir(
            file.parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new(".")),
        ) {
            let mut siblings: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("tasks") && n.ends_with(".jsonc"))
                })
                .filter(|p| p != file)
                .collect();
            siblings.sort();
            candidates.extend(siblings);
        }
        for path in candidates {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            if let Some(edited) = set_status(&text, task, status) {
                let tmp = path.with_extension("jsonc.fake-tmp");
                std::fs::write(&tmp, edited)
                    .and_then(|()| std::fs::rename(&tmp, &path))
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                return Ok(format!("task {task} -> {status} in {}", path.display()));
            }
        }
        Err(format!("task {task} not found in {}", file.display()))
    }

    fn finish(&mut self) {
        let last = self.last_text.clone();
        let code = self.out.finish(&last);
        std::process::exit(code);
    }
}

/// Replaces line `line` (from 1) of the file at `path` with `text`.
fn edit_line(path: &Path, line: &str, text: &str) -> std::io::Result<String> {
    let n: usize = line
        .trim()
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| std::io::Error::other(format!("not a line number: {line}")))?;
    let old = std::fs::read_to_string(path)?;
    let mut lines: Vec<&str> = old.split_inclusive('\n').collect();
    let Some(slot) = lines.get_mut(n - 1) else {
        return Err(std::io::Error::other(format!(
            "{} has no line {n}",
            path.display()
        )));
    };
    let ending = if slot.ends_with('\n') { "\n" } else { "" };
    let new_line = format!("{text}{ending}");
    *slot = &new_line;
    std::fs::write(path, lines.concat())?;
    Ok(format!("line {n} of {} replaced", path.display()))
}

/// `PATH[:SECS]` of a `wait_for` step (SECS defaults to 60).
fn wait_for_arg(arg: &str) -> (&str, u64) {
    match arg.rsplit_once(':') {
        Some((path, secs)) if !path.is_empty() => match secs.trim().parse() {
            Ok(n) => (path, n),
            Err(_) => (arg, 60),
        },
        _ => (arg, 60),
    }
}

/// Polls for `path`; false when `limit` passed first.
fn wait_for_file(path: &Path, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if path.exists() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `text` with the `"status"` value that follows the task's `"id"` replaced:
/// a plain text edit, the way an agent edits the file.
fn set_status(text: &str, task: &str, status: &str) -> Option<String> {
    let mut from = 0;
    while let Some(i) = text[from..].find("\"id\"") {
        let after_key = from + i + 4;
        from = after_key;
        let rest = text[after_key..].trim_start();
        let Some(rest) = rest.strip_prefix(':') else {
            continue;
        };
        let rest = rest.trim_start();
        let quoted = format!("\"{task}\"");
        if !rest.starts_with(&quoted) {
            continue;
        }
        let id_end = text.len() - rest.len() + quoted.len();
        let key = id_end + text[id_end..].find("\"status\"")? + "\"status\"".len();
        let value = text[key..].trim_start().strip_prefix(':')?.trim_start();
        let open = text.len() - value.len();
        if !value.starts_with('"') {
            return None;
        }
        let close = open + 1 + text[open + 1..].find('"')?;
        return Some(format!(
            "{}\"{status}\"{}",
            &text[..open],
            &text[close + 1..]
        ));
    }
    None
}

fn git_run(args: &str) -> std::io::Result<String> {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=spectr-fake-agent",
            "-c",
            "user.email=fake@spectr.invalid",
        ])
        .args(args.split(' ').filter(|a| !a.is_empty()))
        .stdin(Stdio::null())
        .output()?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(std::io::Error::other(format!(
            "git {args} failed: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

fn git_commit(message: &str) -> std::io::Result<String> {
    let run = |args: &[&str]| -> std::io::Result<()> {
        let status = Command::new("git")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other(format!(
                "git {} failed: {status}",
                args.join(" ")
            )))
        }
    };
    run(&["add", "-A"])?;
    run(&[
        "-c",
        "user.name=spectr-fake-agent",
        "-c",
        "user.email=fake@spectr.invalid",
        "commit",
        "-q",
        "-m",
        message,
    ])?;
    Ok(format!("committed: {message}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_status_edits_only_the_named_task() {
        let text = "{\n  // c\n  \"tasks\": [\n    {\"id\": \"1.1\", \"status\": \"pending\"},\n    {\n      \"id\" : \"1.2\",\n      \"description\": \"x\",\n      \"status\":\"pending\"\n    }\n  ]\n}";
        let edited = set_status(text, "1.2", "completed").unwrap();
        assert!(edited.contains("{\"id\": \"1.1\", \"status\": \"pending\"}"));
        assert!(edited.contains("\"status\":\"completed\""));
        assert_eq!(edited.len(), text.len() + 2);
        assert!(set_status(text, "1", "completed").is_none());
        assert!(set_status(text, "9.9", "completed").is_none());
    }

    #[test]
    fn edit_line_replaces_one_line_only() {
        let dir = std::env::temp_dir().join(format!("fake-edit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("f.txt");
        std::fs::write(&f, "a\nb\nc").unwrap();
        edit_line(&f, "2", "B").unwrap();
        edit_line(&f, "3", "C").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "a\nB\nC");
        assert!(edit_line(&f, "4", "x").is_err());
        assert!(edit_line(&f, "0", "x").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn wait_for_takes_an_optional_limit() {
        assert_eq!(wait_for_arg("/tmp/a"), ("/tmp/a", 60));
        assert_eq!(wait_for_arg("/tmp/a:5"), ("/tmp/a", 5));
        assert_eq!(wait_for_arg("dir/b.txt:x"), ("dir/b.txt:x", 60));
        let dir = std::env::temp_dir().join(format!("fake-wait-{}", std::process::id()));
        assert!(!wait_for_file(&dir.join("never"), Duration::ZERO));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("there"), "").unwrap();
        assert!(wait_for_file(&dir.join("there"), Duration::ZERO));
        let _ = std::fs::remove_dir_all(&dir);
    }

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
