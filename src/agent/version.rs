//! `<agent> --version`, asked once before a run so the run header can say
//! which version is in use. Bounded in time: an agent that does not answer
//! is stopped and the version is simply not shown.

use crate::process::{Cmd, Collect, Sink};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

/// How much of the answer is read (a version is one short line).
const MAX_ANSWER_BYTES: u64 = 4096;

/// How a program answered `--version`.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// It exited 0; the line naming its version, when one does.
    Version(Option<String>),
    /// It exited non-zero: how, and the first lines it printed.
    Failed(String),
    /// No answer: it did not start, or not end in time.
    None,
}

impl Answer {
    pub fn version(self) -> Option<String> {
        match self {
            Answer::Version(v) => v,
            Answer::Failed(_) | Answer::None => None,
        }
    }
}

/// The first line `program --version` prints (stdout or stderr), when it
/// exits 0 within `timeout`.
pub fn ask(program: &Path, cwd: &Path, timeout: Duration) -> Option<String> {
    answer(Cmd::new(program).work_in(cwd), timeout).version()
}

/// `cmd --version` (`cmd` runs the program, perhaps inside a sandbox),
/// within `timeout`.
pub fn answer(cmd: Cmd, timeout: Duration) -> Answer {
    let read = || -> Option<(crate::process::Output, Vec<u8>)> {
        // A file, not a pipe: a grandchild holding a pipe open could not make us wait.
        let mut answer = tempfile::tempfile().ok()?;
        let out = cmd
            .arg("--version")
            .stdout(Sink::File(answer.try_clone().ok()?))
            .stderr(Sink::File(answer.try_clone().ok()?))
            .spawn()
            .ok()?
            // One that does not answer in time is killed with its group.
            .collect(&Collect::new(timeout))
            .ok()?;
        answer.seek(SeekFrom::Start(0)).ok()?;
        let mut bytes = Vec::new();
        answer.take(MAX_ANSWER_BYTES).read_to_end(&mut bytes).ok()?;
        Some((out, bytes))
    };
    let Some((out, bytes)) = read() else {
        return Answer::None;
    };
    let text = String::from_utf8_lossy(&bytes);
    match out.status() {
        Some(status) if status.success() => Answer::Version(version_line(&text)),
        Some(status) => {
            let said: Vec<String> = text
                .lines()
                .map(|l| crate::text::strip(l).trim().to_string())
                .filter(|l| !l.is_empty())
                .take(3)
                .collect();
            let how = match status.code() {
                Some(code) => format!("exited with code {code}"),
                None => "was killed by a signal".to_string(),
            };
            Answer::Failed(if said.is_empty() {
                how
            } else {
                crate::agent::parse::one_line(&format!("{how}: {}", said.join(" / ")), 300)
            })
        }
        None => Answer::None,
    }
}

/// The line of an answer that names the version. An agent may print other
/// lines around it (codex with a fresh `CODEX_HOME` warns first, copilot
/// adds an update hint after): the first line holding a version number wins,
/// a warning only when nothing else holds one; an answer without any version
/// number shows nothing rather than a stray message.
fn version_line(text: &str) -> Option<String> {
    let lines: Vec<String> = text
        .lines()
        .map(|l| crate::text::strip(l).trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    let holds_version = |l: &&String| l.split_whitespace().any(is_version_word);
    lines
        .iter()
        .filter(|l| !is_diagnostic(l))
        .find(holds_version)
        .or_else(|| lines.iter().find(holds_version))
        .map(|l| crate::agent::parse::one_line(l, 80))
}

/// `1.2`, `v0.169.0`, `2025.09.18-7ae6800`, `0.0.1761854483-g9b7f2d`,
/// `1.2.3,` or `(1.2.3)`: digits, a dot, digits, then anything. A word
/// that only contains such digits (a path like `/node/v20.1.0/bin`) is not one.
fn is_version_word(word: &str) -> bool {
    let word = word.trim_matches(|c: char| matches!(c, '(' | ')' | '[' | ']' | ',' | ';' | ':'));
    let word = word.strip_prefix(['v', 'V']).unwrap_or(word);
    let digits = |s: &str| s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let major = digits(word);
    major > 0
        && word[major..]
            .strip_prefix('.')
            .is_some_and(|rest| digits(rest) > 0)
}

/// A line a CLI prints about its own state rather than its version.
fn is_diagnostic(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    ["warning", "warn", "error", "note", "hint", "deprecat"]
        .iter()
        .any(|w| lower.starts_with(w))
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
    fn the_line_that_holds_the_version() {
        // codex with a fresh CODEX_HOME warns before its version.
        assert_eq!(
            version_line(
                "WARNING: proceeding, even though we could not update PATH: \
                 Permission denied (os error 13) at /home/u/.codex/tmp/path2\n\
                 codex-cli 0.169.0\n"
            )
            .as_deref(),
            Some("codex-cli 0.169.0")
        );
        // copilot: the version, then an update hint.
        assert_eq!(
            version_line(
                "GitHub Copilot CLI 0.0.339.\nRun 'copilot update' to check for updates.\n"
            )
            .as_deref(),
            Some("GitHub Copilot CLI 0.0.339.")
        );
        // A warning naming a versioned path is still not the version.
        assert_eq!(
            version_line(
                "(node:41) Warning: /home/u/.nvm/versions/node/v20.1.0/lib is old\n0.61.0\n"
            )
            .as_deref(),
            Some("0.61.0")
        );
        // Other real answers.
        for (answer, want) in [
            ("2.0.14 (Claude Code)\n", "2.0.14 (Claude Code)"),
            ("1.18.33\n", "1.18.33"),
            (
                "0.0.1761854483-g9b7f2d (released 2025-10-30T18:01:23.000Z, 2h ago)\n",
                "0.0.1761854483-g9b7f2d (released 2025-10-30T18:01:23.000Z, 2h ago)",
            ),
            ("2025.09.18-7ae6800\n", "2025.09.18-7ae6800"),
            ("pi v0.5.2\n", "pi v0.5.2"),
        ] {
            assert_eq!(version_line(answer).as_deref(), Some(want), "{answer:?}");
        }
        // Only a warning that holds a version: better than nothing.
        assert_eq!(
            version_line("warning: config 1.2 is old\n").as_deref(),
            Some("warning: config 1.2 is old")
        );
        // No version anywhere: nothing shown, not the message.
        assert_eq!(version_line("WARNING: could not update PATH\n"), None);
        assert_eq!(version_line(""), None);
    }

    #[test]
    fn a_version_on_stderr_after_a_warning() {
        // pi answers on stderr; a warning may come first on stdout.
        let dir = tempfile::tempdir().unwrap();
        let p = script(
            dir.path(),
            r#"echo 'WARNING: proceeding, even though we could not update PATH'; echo 0.5.2 >&2"#,
        );
        assert_eq!(
            ask(&p, dir.path(), Duration::from_secs(60)).as_deref(),
            Some("0.5.2")
        );
    }

    #[test]
    fn a_failure_says_how_and_what_was_printed() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(
            dir.path(),
            "echo 'Missing optional dependency @openai/codex-linux-x64' >&2; exit 1",
        );
        assert_eq!(
            answer(Cmd::new(&p).work_in(dir.path()), Duration::from_secs(60)),
            Answer::Failed(
                "exited with code 1: Missing optional dependency @openai/codex-linux-x64".into()
            )
        );
        let p = script(dir.path(), "sleep 600");
        assert_eq!(
            answer(Cmd::new(&p).work_in(dir.path()), Duration::from_millis(200)),
            Answer::None
        );
        let p = script(dir.path(), "echo no version here");
        assert_eq!(
            answer(Cmd::new(&p).work_in(dir.path()), Duration::from_secs(60)),
            Answer::Version(None)
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
