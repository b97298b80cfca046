//! Completion signals: `<promise>COMPLETE</promise>` and
//! `<promise>FAILED: reason</promise>`, read only from the agent's own final
//! answer (Claude's `result` text or last assistant text, Codex's last
//! message, a text agent's last lines), never from tool output.
//!
//! Our prompt tells the agent about these markers, so an agent that repeats
//! the prompt would "say" them: a line of the answer that appears verbatim
//! (trimmed) as a line of the prompt is an echo and is ignored. The prompt
//! must therefore never hold a marker alone on a line of its own.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "signal", content = "reason", rename_all = "snake_case")]
pub enum CompletionSignal {
    Complete,
    Failed(String),
}

const OPEN: &str = "<promise>";
const CLOSE: &str = "</promise>";

/// The signal in `final_answer`, ignoring lines that echo `prompt`. When
/// several markers appear, the last one is the agent's final word.
pub fn detect(final_answer: &str, prompt: &str) -> Option<CompletionSignal> {
    if !final_answer.contains(OPEN) {
        return None;
    }
    let echo: HashSet<&str> = prompt
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    final_answer
        .lines()
        .rev()
        .filter(|line| !echo.contains(line.trim()))
        .find_map(last_marker_in_line)
}

/// The last marker on one line.
fn last_marker_in_line(line: &str) -> Option<CompletionSignal> {
    let mut found = None;
    let mut rest = line;
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        let Some(end) = after.find(CLOSE) else { break };
        if let Some(signal) = parse_marker(&after[..end]) {
            found = Some(signal);
        }
        rest = &after[end + CLOSE.len()..];
    }
    found
}

fn parse_marker(inner: &str) -> Option<CompletionSignal> {
    let inner = inner.trim();
    if inner.eq_ignore_ascii_case("COMPLETE") {
        return Some(CompletionSignal::Complete);
    }
    let head = inner.get(..6)?;
    if head.eq_ignore_ascii_case("FAILED") {
        let reason = inner[6..]
            .trim_start()
            .strip_prefix(':')
            .unwrap_or(&inner[6..])
            .trim();
        return Some(CompletionSignal::Failed(reason.to_string()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMPT: &str = "Task ID: 1.1\nTasks file: t.jsonc\n\
        When the task is done and verified, end with <promise>COMPLETE</promise>.\n\
        If you cannot finish, end with <promise>FAILED: reason</promise>.\n";

    #[test]
    fn complete_and_failed() {
        assert_eq!(
            detect("All good.\n<promise>COMPLETE</promise>", PROMPT),
            Some(CompletionSignal::Complete)
        );
        assert_eq!(
            detect("<promise>FAILED: tests need a database</promise>", PROMPT),
            Some(CompletionSignal::Failed("tests need a database".into()))
        );
        assert_eq!(detect("Done, see above.", PROMPT), None);
        assert_eq!(detect("", PROMPT), None);
    }

    #[test]
    fn last_marker_wins() {
        let answer = "<promise>FAILED: x</promise>\nthen I fixed it\n<promise>COMPLETE</promise>";
        assert_eq!(detect(answer, PROMPT), Some(CompletionSignal::Complete));
        assert_eq!(
            detect(
                "<promise>COMPLETE</promise> no wait <promise>FAILED: y</promise>",
                PROMPT
            ),
            Some(CompletionSignal::Failed("y".into()))
        );
    }

    #[test]
    fn echo_of_the_prompt_is_not_a_signal() {
        assert_eq!(detect(PROMPT, PROMPT), None);
        // An echo with different indentation is still an echo.
        let indented: String = PROMPT.lines().map(|l| format!("    {l}\n")).collect();
        assert_eq!(detect(&indented, PROMPT), None);
        // But the agent's own marker after the echo counts.
        let answer = format!("{PROMPT}\nWorking...\n<promise>COMPLETE</promise>");
        assert_eq!(detect(&answer, PROMPT), Some(CompletionSignal::Complete));
    }

    #[test]
    fn unknown_or_broken_markers_are_ignored() {
        assert_eq!(detect("<promise>MAYBE</promise>", PROMPT), None);
        assert_eq!(detect("<promise>COMPLETE", PROMPT), None);
        assert_eq!(
            detect("<promise>failed</promise>", PROMPT),
            Some(CompletionSignal::Failed(String::new()))
        );
    }
}
