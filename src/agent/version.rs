//! `<agent> --version`, asked once before a run so the run header can say
//! which version is in use. Bounded in time: an agent that does not answer
//! is stopped and the version is simply not shown.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How much of the answer is read (a version is one short line).
const MAX_ANSWER_BYTES: u64 = 4096;

/// The first line `program --version` prints (stdout or stderr), when it
/// exits 0 within `timeout`.
pub fn ask(program: &Path, cwd: &Path, timeout: Duration) -> Option<String> {
    // A file, not a pipe: a grandchild holding a pipe open could not make us wait.
    let answer = tempfile::tempfile().ok()?;
    let mut command = Command::new(program);
    crate::agent::process::work_in(&mut command, cwd);
    let mut child = command
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(answer.try_clone().ok()?)
        .stderr(answer.try_clone().ok()?)
        .process_group(0)
        .spawn()
        .ok()?;
    let deadline = Instant::now() + timeout;
    // Most agents answer within milliseconds: look often at first, then
    // less (every run waits for this once).
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            _ => break None,
        }
    };
    let Some(status) = status else {
        // Our own child, not reaped yet, leading the group it was started in:
        // that group id cannot belong to anyone else.
        if let Ok(pid) = i32::try_from(child.id())
            && pid > 1
        {
            let pgid = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        }
        let _ = child.wait();
        return None;
    };
    if !status.success() {
        return None;
    }
    let mut answer = answer;
    answer.seek(SeekFrom::Start(0)).ok()?;
    let mut bytes = Vec::new();
    answer.take(MAX_ANSWER_BYTES).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    text.lines()
        .map(|l| crate::ui::ansi::strip(l).trim().to_string())
        .find(|l| !l.is_empty())
        .map(|l| crate::agent::parse::one_line(&l, 80))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, body: &str) -> std::path::PathBuf {
        let p = dir.join("agent");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn first_line_of_the_answer() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(
            dir.path(),
            r#"[ "$1" = --version ] && printf '\n\033[1mcodex-cli 0.169.0\033[0m\nmore\n'"#,
        );
        assert_eq!(
            ask(&p, dir.path(), Duration::from_secs(60)).as_deref(),
            Some("codex-cli 0.169.0")
        );
    }

    #[test]
    fn failure_or_silence_is_no_version() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(dir.path(), "echo nope; exit 3");
        assert_eq!(ask(&p, dir.path(), Duration::from_secs(60)), None);
        // A program that never answers is stopped at the timeout.
        let p = script(dir.path(), "sleep 600");
        assert_eq!(ask(&p, dir.path(), Duration::from_millis(200)), None);
        assert_eq!(
            ask(
                Path::new("/no/such/program"),
                dir.path(),
                Duration::from_secs(1)
            ),
            None
        );
    }
}
