//! The fake agent's steps: what each verb of a script does (files, git,
//! `spectr` commands, waits, exits), spoken through `speak` in the CLI's
//! output format.

use crate::script::save_numbered;
use crate::speak::{Format, Speaker};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Steps that act on the world (files, git, spectr): refused, and skipped,
/// while tools are denied.
const ACTS: [&str; 16] = [
    "plant",
    "escape",
    "write",
    "append",
    "append_once",
    "resolve",
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

fn unescape(s: &str) -> String {
    s.replace("\\n", "\n").replace("\\t", "\t")
}

pub(crate) struct Agent {
    /// Everything the agent prints goes through it, in its CLI's format.
    pub(crate) out: Speaker,
    pub(crate) prompt: String,
    pub(crate) task: Option<String>,
    pub(crate) tasks_file: Option<PathBuf>,
    pub(crate) state: Option<PathBuf>,
    pub(crate) last_text: String,
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

    pub(crate) fn step(&mut self, step: &str) {
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
            // `run:CMD`: a command the agent would run (it runs nothing):
            // an ACP agent asks first.
            "run" => {
                let outcome = if self.out.may_run(arg) {
                    Ok(format!("(fake output of {arg})"))
                } else {
                    Err(std::io::Error::other("permission refused by the client"))
                };
                self.tool_outcome("Bash", arg, outcome);
            }
            "write" => {
                let (path, content) = arg.split_once('=').unwrap_or((arg, ""));
                let content = unescape(content);
                // An ACP agent asks first; refused, it writes nothing.
                if !self.out.may_write(path) {
                    self.tool_outcome(
                        "Write",
                        path,
                        Err(std::io::Error::other("permission refused by the client")),
                    );
                    return;
                }
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
            "append" | "append_once" => {
                // Adds a line (a newline after the text) at the file's end;
                // `append_once` not when the file already has it (a resolve
                // attempt finds its own line back with the other change's).
                let (path, text) = arg.split_once('=').unwrap_or((arg, ""));
                let line = unescape(text);
                let has = verb == "append_once"
                    && std::fs::read_to_string(path).is_ok_and(|t| t.lines().any(|l| l == line));
                let outcome = if has {
                    Ok("already there".to_string())
                } else {
                    let line = format!("{line}\n");
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)
                        .and_then(|mut f| f.write_all(line.as_bytes()))
                        .map(|()| format!("appended {} bytes", line.len()))
                };
                self.tool_outcome("Bash", &format!("echo >> {path}"), outcome);
            }
            "resolve" => {
                // Resolves conflict markers by keeping both sides' lines,
                // the project's first (a person resolving a changelog).
                let outcome = resolve_markers(Path::new(arg));
                self.tool_outcome(
                    "Edit",
                    arg,
                    outcome.map(|n| format!("resolved {n} conflicted hunks")),
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
            "plant" => {
                let outcome = crate::escape::plant(Path::new(arg));
                self.tool_outcome("Bash", &format!("plant {arg}"), outcome);
            }
            "escape" => {
                let change = self.tasks_file.as_deref().and_then(Path::parent);
                let outcome = crate::escape::escape(Path::new(arg), change);
                self.tool_outcome("Bash", &format!("escape {arg}"), outcome);
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
            // `spectr:ralph pause c`: any spectr command, arguments split
            // on spaces (an agent trying to steer its own run).
            "spectr" => {
                let args: Vec<&str> = arg.split_whitespace().collect();
                let outcome = run_spectr(&args);
                self.tool_outcome("Bash", &format!("spectr {arg}"), outcome);
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

    pub(crate) fn finish(&mut self) {
        let last = self.last_text.clone();
        let code = self.out.finish(&last);
        std::process::exit(code);
    }
}

/// Replaces line `line` (from 1) of the file at `path` with `text`.
/// Drops the marker lines of every conflicted hunk in `path` (keeping both
/// sides); how many hunks there were. A file without markers is left as is.
fn resolve_markers(path: &Path) -> std::io::Result<usize> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut out = String::with_capacity(text.len());
    let (mut hunks, mut inside) = (0, false);
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        if body.starts_with("<<<<<<< ") {
            inside = true;
            hunks += 1;
        } else if inside && (body == "=======" || body.starts_with("||||||| ")) {
        } else if inside && body.starts_with(">>>>>>> ") {
            inside = false;
        } else {
            out.push_str(line);
        }
    }
    if hunks > 0 {
        std::fs::write(path, out)?;
    }
    Ok(hunks)
}

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
        .env("SPECTR_FAKE_AGENT_GIT", "1")
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
            .env("SPECTR_FAKE_AGENT_GIT", "1")
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
}
