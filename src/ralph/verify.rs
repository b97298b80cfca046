//! `--verify CMD`: a command the loop itself runs after an agent reports a task
//! complete. It must pass before the task counts as completed.

use crate::process::{AfterExit, Cmd, Collect, End};
use crate::ralph::control::ActiveAgents;
use crate::ralph::sandbox::SandboxProfile;
use std::path::Path;
use std::time::Duration;

/// How many trailing lines of output become the failure reason.
const TAIL_LINES: usize = 40;
/// How much of each stream is kept (far more than 40 lines of any sane
/// output), so a flooding test suite costs bounded memory.
const TAIL_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyResult {
    Passed,
    /// The reason, with the tail of the command's output.
    Failed(String),
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    lines[start..].join("\n")
}

/// Runs `cmd` with `sh -c` in `cwd`. Stops early (as a failure) when a quit is
/// requested; its process group is registered so a force-quit kills it too.
pub fn run(
    cmd: &str,
    cwd: &Path,
    timeout: Duration,
    active: &ActiveAgents,
    sandbox: Option<&SandboxProfile>,
) -> VerifyResult {
    let sh = match sandbox {
        Some(sandbox) => sandbox.command("sh", cwd),
        None => Cmd::new("sh").work_in(cwd),
    };
    let child = match sh.arg("-c").arg(cmd).spawn() {
        Ok(c) => c,
        Err(e) => return VerifyResult::Failed(format!("`{cmd}` could not start: {}", e.into_io())),
    };
    let group_id = child.pid();
    active.add_group(group_id);
    let quit = || active.quit_requested();
    // Whatever it leaves behind is stopped once it exits: a background child
    // holding the pipes would keep the loop waiting forever.
    let how = Collect::new(timeout)
        .after_exit(AfterExit::StopTheRest)
        .cancel_when(&quit)
        .tail(TAIL_BYTES);
    let out = child.collect(&how);
    active.remove_group(group_id);
    let out = match out {
        Ok(out) => out,
        Err(e) => return VerifyResult::Failed(format!("`{cmd}` could not be run: {e}")),
    };
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match out.end {
        End::Exited(s) if s.success() => VerifyResult::Passed,
        End::Exited(s) => {
            VerifyResult::Failed(with_output(format!("`{cmd}` failed ({s})"), &output))
        }
        End::Cancelled => VerifyResult::Failed(format!("`{cmd}` stopped: quit requested")),
        End::TimedOut => VerifyResult::Failed(with_output(
            format!(
                "`{cmd}` timed out after {}",
                humantime::format_duration(timeout)
            ),
            &output,
        )),
    }
}

/// `what` and the end of the command's output, if it printed anything (a
/// silent command leaves no dangling `:`).
fn with_output(what: String, output: &str) -> String {
    let tail = tail(output);
    if tail.trim().is_empty() {
        what
    } else {
        format!("{what}:\n{tail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passing_and_failing_commands() {
        let dir = std::env::temp_dir();
        assert_eq!(
            run(
                "true",
                &dir,
                Duration::from_secs(30),
                &ActiveAgents::default(),
                None
            ),
            VerifyResult::Passed
        );
        match run(
            "echo boom; exit 3",
            &dir,
            Duration::from_secs(30),
            &ActiveAgents::default(),
            None,
        ) {
            VerifyResult::Failed(r) => assert!(r.contains("boom") && r.contains('3'), "{r}"),
            other => panic!("{other:?}"),
        }
        // Silent: the reason ends with the exit status.
        match run(
            "exit 3",
            &dir,
            Duration::from_secs(30),
            &ActiveAgents::default(),
            None,
        ) {
            VerifyResult::Failed(r) => assert_eq!(r, "`exit 3` failed (exit status: 3)"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_hanging_command_is_stopped() {
        let dir = std::env::temp_dir();
        match run(
            "sleep 30",
            &dir,
            Duration::from_millis(200),
            &ActiveAgents::default(),
            None,
        ) {
            VerifyResult::Failed(r) => assert!(r.contains("timed out"), "{r}"),
            other => panic!("{other:?}"),
        }
    }
}
