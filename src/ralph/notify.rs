//! `--notify CMD` (`ralph: notify`): a command run with `sh -c` when the run
//! needs a person (the retry / skip / abort question, a rate-limit wait of
//! more than a minute, a merge conflict past `--max-conflicts` that no
//! question follows, the budget reached) and when it ends (the summary),
//! with the event on stdin as one JSON object, the schema `--json` prints.
//!
//! Calls run one after the other on a thread of their own, so a slow or
//! hanging command never holds up the loop; each is bounded
//! ([`NOTIFY_TIMEOUT`], then its process group is killed), its output and
//! how it ended go to `notify.log` in the run's transcript folder, and its
//! failure never stops the run. The calls still queued when the run ends
//! (the summary's at least) are made before spectr exits.

use crate::process::{AfterExit, Cmd, Collect, End, Sink};
use crate::ralph::event::LoopEvent;
use crossbeam_channel::{Sender, unbounded};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one call may take before its process group is killed.
pub const NOTIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// Tests shorten [`NOTIFY_TIMEOUT`] with this (milliseconds).
const TIMEOUT_ENV: &str = "SPECTR_TEST_NOTIFY_TIMEOUT_MS";

/// A rate-limit wait longer than this needs a person.
pub const LONG_WAIT_SECS: u64 = 60;

/// Whether `event` is one a person is called for.
pub fn calls_for(event: &LoopEvent) -> bool {
    match event {
        LoopEvent::Question { .. }
        | LoopEvent::BudgetReached { .. }
        | LoopEvent::Summary { .. } => true,
        LoopEvent::RateLimitWait { wait_secs, .. } => *wait_secs > LONG_WAIT_SECS,
        // When the person is asked, the question itself is the call.
        LoopEvent::ConflictLimit { then, .. } => then != "ask",
        _ => false,
    }
}

pub struct Notifier {
    /// The change's id, for the commands that answer a question.
    change: String,
    calls: Option<Sender<Vec<u8>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Notifier {
    /// Starts the thread that runs `cmd` in `dir`, logging to `log`. None
    /// when the thread cannot start (said in the log's place: stderr).
    pub fn start(change: String, cmd: String, dir: PathBuf, log: PathBuf) -> Option<Notifier> {
        let timeout = std::env::var(TIMEOUT_ENV)
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map_or(NOTIFY_TIMEOUT, Duration::from_millis);
        let (tx, rx) = unbounded::<Vec<u8>>();
        let thread = std::thread::Builder::new()
            .name("spectr-notify".into())
            .spawn(move || {
                for json in rx.iter() {
                    call(&cmd, &dir, &log, json, timeout);
                }
            })
            .ok()?;
        Some(Notifier {
            change,
            calls: Some(tx),
            thread: Some(thread),
        })
    }

    /// Queues a call for `event` when it is one a person is needed for.
    /// Never waits.
    pub fn notify(&self, event: &LoopEvent) {
        if !calls_for(event) {
            return;
        }
        if let (Some(tx), Ok(mut json)) = (&self.calls, serde_json::to_vec(event)) {
            if let LoopEvent::Question { task, .. } = event
                && let Ok(commands) = serde_json::to_vec(&answer_commands(&self.change, task))
            {
                crate::ralph::event::splice_field(&mut json, 0, "commands", &commands);
            }
            crate::ralph::event::splice_ts(&mut json, 0, std::time::SystemTime::now());
            let _ = tx.send(json);
        }
    }
}

/// The commands that answer the question about `task` from any shell in
/// the project (each word quoted for `sh`), and the one that stops the run.
fn answer_commands(change: &str, task: &crate::model::TaskId) -> serde_json::Value {
    let q = crate::ralph::prompt::shell_quote;
    let (change, task) = (q(change), q(task.as_str()));
    let answer = |what: &str| format!("spectr ralph answer {change} {what} --task {task}");
    serde_json::json!({
        "retry": answer("retry"),
        "skip": answer("skip"),
        "abort": answer("abort"),
        "stop": format!("spectr ralph stop {change}"),
    })
}

impl Drop for Notifier {
    /// The calls queued are made (each bounded) before the run returns.
    fn drop(&mut self) {
        drop(self.calls.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One call: `sh -c cmd` with `json` on stdin, its output appended to `log`.
fn call(cmd: &str, dir: &Path, log: &Path, mut json: Vec<u8>, timeout: Duration) {
    let event = serde_json::from_slice::<serde_json::Value>(&json)
        .ok()
        .and_then(|v| v.get("event").and_then(|e| e.as_str()).map(str::to_string))
        .unwrap_or_default();
    json.push(b'\n');
    let file = log
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
        });
    let mut file = match file {
        Ok(f) => f,
        Err(e) => {
            // Nowhere to log it: the command runs all the same.
            let _ = writeln!(
                std::io::stderr(),
                "spectr: --notify: cannot write {}: {e}",
                log.display()
            );
            run(cmd, dir, json, timeout, Sink::Null, Sink::Null);
            return;
        }
    };
    let _ = writeln!(
        file,
        "--- {} notify ({event}): {cmd}",
        crate::ralph::session::now_rfc3339()
    );
    let sinks = (file.try_clone(), file.try_clone());
    let said = match sinks {
        (Ok(out), Ok(err)) => run(cmd, dir, json, timeout, Sink::File(out), Sink::File(err)),
        _ => run(cmd, dir, json, timeout, Sink::Null, Sink::Null),
    };
    let _ = writeln!(file, "--- {said}");
}

/// Runs it to its end or its deadline; how it ended, in words.
fn run(cmd: &str, dir: &Path, json: Vec<u8>, timeout: Duration, out: Sink, err: Sink) -> String {
    let child = Cmd::new("sh")
        .work_in(dir)
        .arg("-c")
        .arg(cmd)
        .input(json)
        .stdout(out)
        .stderr(err)
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => return format!("could not start: {}", e.into_io()),
    };
    // What it leaves running once it exits is stopped too: a notify
    // command's daemon is no business of the run's.
    let how = Collect::new(timeout).after_exit(AfterExit::StopTheRest);
    match child.collect(&how) {
        Ok(o) => match o.end {
            End::Exited(s) if s.success() => "exited 0".to_string(),
            End::Exited(s) => format!("failed ({s})"),
            End::TimedOut => format!(
                "still running after {} ms: stopped with its process group",
                timeout.as_millis()
            ),
            End::Cancelled => "stopped".to_string(),
        },
        Err(e) => format!("could not run: {}", e.into_io()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TaskId;

    #[test]
    fn a_person_is_called_for_questions_long_waits_the_budget_and_the_end() {
        let wait = |wait_secs| LoopEvent::RateLimitWait {
            task: TaskId::from("1.1"),
            resets_at: None,
            wait_secs,
        };
        assert!(calls_for(&wait(61)));
        assert!(!calls_for(&wait(60)), "a minute's wait needs nobody");
        assert!(calls_for(&LoopEvent::Question {
            task: TaskId::from("1.1"),
            reason: "x".into(),
        }));
        assert!(calls_for(&LoopEvent::BudgetReached {
            budget: Default::default(),
            spent: Default::default(),
        }));
        assert!(!calls_for(&LoopEvent::Paused));
    }

    #[test]
    fn a_questions_call_names_the_commands_that_answer_it_quoted() {
        let commands = answer_commands("add auth", &TaskId::from("1.2"));
        assert_eq!(
            commands["skip"],
            "spectr ralph answer 'add auth' skip --task 1.2"
        );
        assert_eq!(commands["stop"], "spectr ralph stop 'add auth'");
        let mut json = br#"{"event":"question","task":"1.2"}"#.to_vec();
        let raw = serde_json::to_vec(&commands).unwrap();
        assert!(crate::ralph::event::splice_field(
            &mut json, 0, "commands", &raw
        ));
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(
            v["commands"]["retry"],
            "spectr ralph answer 'add auth' retry --task 1.2"
        );
        assert_eq!(v["event"], "question");
    }
}
