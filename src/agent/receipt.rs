//! Per-attempt receipts: what an attempt took and how it ended, for the
//! session file, `--json` output and the human summary line.

use crate::agent::{AgentExit, CompletionSignal, Ending, RateLimit, TokenUsage};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// Wall-clock time of the attempt, from spawn to the last process gone.
    pub duration_ms: u64,
    /// Model round trips, where the agent's output shows them (Claude's
    /// `num_turns`, OpenCode's steps); `None` for agents that don't (Codex,
    /// Gemini, text agents): shown as `turns not reported`, never guessed.
    pub turns: Option<u64>,
    /// Tokens the agent reports, when it reports any, with the meaning
    /// [`TokenUsage`] gives them whichever agent it was.
    pub tokens: Option<TokenUsage>,
    /// Cost the agent reports, in dollars; `None` for agents that report
    /// none ("cost not reported").
    pub cost_usd: Option<f64>,
    /// How the process ended (exit code, signal, timeout, stop, spawn failure).
    pub ending: Ending,
    /// The agent's own verdict, when it gave one.
    pub signal: Option<CompletionSignal>,
    /// Whether the agent's final result was an error, when it sent one.
    pub is_error: Option<bool>,
    pub rate_limited: Option<RateLimit>,
    pub session_id: Option<String>,
    /// The model the agent says did the work, when it says.
    #[serde(default)]
    pub model: Option<String>,
    /// The agent's final answer, its promise and learning tags taken out,
    /// trimmed (what a task's commit says in its body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// An ACP agent's permission requests, when it made any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Permissions>,
}

/// How many times an agent asked permission, and how many were refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permissions {
    pub asked: u32,
    pub refused: u32,
}

/// How long a receipt's summary may be: an answer's end is its conclusion,
/// so a longer one keeps its last lines.
const SUMMARY_MAX_CHARS: usize = 1500;

/// The final answer as a summary: `<promise>` and `<learning>` blocks
/// removed, escape sequences and controls removed, runs of blank lines
/// made one, cut to its last [`SUMMARY_MAX_CHARS`] at a line; `None` when
/// nothing is left.
pub fn summary_of(answer: &str) -> Option<String> {
    let mut text = answer.to_owned();
    for (open, close) in [("<promise>", "</promise>"), ("<learning>", "</learning>")] {
        while let Some(start) = text.find(open) {
            let end = text[start..]
                .find(close)
                .map_or(text.len(), |e| start + e + close.len());
            text.replace_range(start..end, "");
        }
    }
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = crate::text::strip(line).trim_end().to_owned();
        if line.is_empty() && lines.last().is_none_or(|l| l.is_empty()) {
            continue;
        }
        lines.push(line);
    }
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let mut kept: Vec<String> = Vec::new();
    let mut length = 0;
    for line in lines.into_iter().rev() {
        length += line.chars().count() + 1;
        if length > SUMMARY_MAX_CHARS && !kept.is_empty() {
            kept.push("…".into());
            break;
        }
        kept.push(line);
    }
    kept.reverse();
    let text = kept.join("\n").trim().to_owned();
    let text: String = if text.chars().count() > SUMMARY_MAX_CHARS {
        let skip = text.chars().count() - SUMMARY_MAX_CHARS;
        format!("…{}", text.chars().skip(skip).collect::<String>())
    } else {
        text
    };
    (!text.is_empty()).then_some(text)
}

impl Receipt {
    pub fn from_exit(exit: &AgentExit) -> Receipt {
        let result = exit.result.as_ref();
        Receipt {
            duration_ms: u64::try_from(exit.duration.as_millis()).unwrap_or(u64::MAX),
            turns: result.and_then(|r| r.turns),
            tokens: result.and_then(|r| r.usage.clone()),
            cost_usd: result.and_then(|r| r.cost_usd),
            ending: exit.ending.clone(),
            signal: exit.signal.clone(),
            is_error: result.map(|r| r.is_error),
            rate_limited: exit.rate_limited.clone(),
            session_id: result
                .and_then(|r| r.session_id.clone())
                .or_else(|| exit.session_id.clone()),
            model: result
                .and_then(|r| r.model.clone())
                .or_else(|| exit.model.clone()),
            summary: exit.final_answer.as_deref().and_then(summary_of),
            permissions: None,
        }
    }
}

impl From<&AgentExit> for Receipt {
    fn from(exit: &AgentExit) -> Receipt {
        Receipt::from_exit(exit)
    }
}

impl Receipt {
    /// The receipt of an attempt that never started an agent (a failed
    /// checkpoint, an attempt found done before it began).
    pub fn none() -> Receipt {
        Receipt {
            duration_ms: 0,
            turns: None,
            tokens: None,
            cost_usd: None,
            ending: Ending::Stopped {
                reason: "no agent was started".into(),
            },
            signal: None,
            is_error: None,
            rate_limited: None,
            session_id: None,
            model: None,
            summary: None,
            permissions: None,
        }
    }
}

/// How many stderr lines [`AgentExit::agent_error`] quotes at most.
const ERROR_STDERR_LINES: usize = 5;
/// How long [`AgentExit::agent_error`] lets the agent's words be.
const ERROR_MAX_CHARS: usize = 600;

impl AgentExit {
    /// Why the agent says it stopped, in its own words: the message of its
    /// failed final result, else the line of its stderr that names an error
    /// (a crash's `Error: ...`, not the stack trace below it), else the last
    /// lines of its stderr but stack frames. Colour codes are removed and it
    /// is one line. `None` when it said nothing.
    pub fn agent_error(&self) -> Option<String> {
        let from_result = self
            .result
            .as_ref()
            .filter(|r| r.is_error)
            .map(|r| crate::agent::parse::error_message(&r.text))
            .filter(|t| !t.trim().is_empty());
        let text = from_result.or_else(|| {
            let lines: Vec<String> = self
                .stderr_tail
                .lines()
                .map(|l| crate::text::strip(l).trim().to_string())
                .filter(|l| !l.is_empty())
                .collect();
            if let Some(error) = lines.iter().rev().find(|l| is_error_line(l)) {
                return Some(error.clone());
            }
            let said: Vec<&String> = lines.iter().filter(|l| !is_stack_line(l)).collect();
            let shown = &said[said.len().saturating_sub(ERROR_STDERR_LINES)..];
            Some(
                shown
                    .iter()
                    .map(|l| l.as_str())
                    .collect::<Vec<_>>()
                    .join(" | "),
            )
            .filter(|t| !t.is_empty())
        })?;
        Some(crate::agent::parse::one_line(&text, ERROR_MAX_CHARS))
    }
}

/// A line that names an error: `Error: ...`, `TypeError: ...`,
/// `java.lang.IllegalStateException: ...`, `error: ...`, `error[E0308]: ...`,
/// `fatal: ...`, `panic: ...`, `thread 'main' panicked at ...`.
pub(crate) fn is_error_line(line: &str) -> bool {
    let line = line.trim();
    if is_stack_line(line) {
        return false;
    }
    if line.contains("panicked at") {
        return true;
    }
    let Some((head, _)) = line.split_once(':') else {
        return false;
    };
    // `error[E0308]` and `Error [ERR_MODULE_NOT_FOUND]` name their code.
    let head = head.split(['[', ' ']).next().unwrap_or(head);
    let word = head.rsplit('.').next().unwrap_or(head);
    let lower = word.to_ascii_lowercase();
    !word.is_empty()
        && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && (lower.ends_with("error")
            || lower.ends_with("exception")
            || matches!(lower.as_str(), "fatal" | "panic"))
}

/// A line of a stack trace (`at f (file.js:1:2)`, `^^^`, Node's version
/// footer, a source location alone): never the reason itself.
pub(crate) fn is_stack_line(line: &str) -> bool {
    let line = line.trim();
    line.starts_with("at ")
        || line.starts_with("Node.js v")
        || (!line.is_empty() && line.chars().all(|c| c == '^' || c == '~' || c == ' '))
        || line.starts_with("file://") && !line.contains(' ')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crashed(stderr: &str) -> AgentExit {
        AgentExit {
            ending: Ending::Exited { code: 1 },
            duration: std::time::Duration::ZERO,
            result: None,
            final_answer: None,
            signal: None,
            rate_limited: None,
            stderr_tail: stderr.into(),
            session_id: None,
            model: None,
        }
    }

    #[test]
    fn a_node_crash_is_told_by_its_error_line_not_its_stack() {
        let exit = crashed(
            "file:///tmp/agents/node_modules/@openai/codex/bin/codex.js:113
    throw new Error(
    ^

Error: Missing optional dependency @openai/codex-linux-x64. Reinstall Codex: `npm install -g @openai/codex@latest`
    at file:///tmp/agents/node_modules/@openai/codex/bin/codex.js:113:20
    at ModuleJob.run (node:internal/modules/esm/module_job:271:25)
    at async onImport.tracePromise.__proto__ (node:internal/modules/esm/loader:547:26)
    at async asyncRunEntryPointWithESMLoader (node:internal/modules/run_main:116:5)

Node.js v20.20.2",
        );
        assert_eq!(
            exit.agent_error().as_deref(),
            Some(
                "Error: Missing optional dependency @openai/codex-linux-x64. Reinstall Codex: `npm install -g @openai/codex@latest`"
            )
        );
    }

    #[test]
    fn error_lines_are_told_apart_from_the_rest() {
        for yes in [
            "Error: Cannot find package 'x' imported from /tmp/a.js",
            "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'chalk'",
            "TypeError: fetch failed",
            "java.lang.IllegalStateException: no",
            "error: unexpected argument '--yolo' found",
            "error[E0308]: mismatched types",
            "fatal: not a git repository",
            "thread 'main' panicked at src/main.rs:3:5:",
        ] {
            assert!(is_error_line(yes), "{yes}");
        }
        for no in [
            "at ModuleJob.run (node:internal/modules/esm/module_job:271:25)",
            "warning: config: ignored",
            "Loading: 3 files",
            "the error was: none",
            "Node.js v20.20.2",
        ] {
            assert!(!is_error_line(no), "{no}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(256))]
        /// Any stderr: one line back, never a stack frame alone.
        #[test]
        fn any_stderr_gives_one_line_or_none(lines in proptest::collection::vec(
            proptest::prop_oneof![
                "[ -~]{0,40}",
                "    at [a-z]{1,8} \\([a-z./:0-9]{1,20}\\)",
                "[A-Za-z]{0,8}Error(\\[[A-Z_]{1,6}\\])?: [ -~]{0,30}",
                "\\PC{0,20}",
            ],
            0..30,
        )) {
            let exit = crashed(&lines.join("\n"));
            if let Some(said) = exit.agent_error() {
                proptest::prop_assert!(!said.contains('\n'));
                proptest::prop_assert!(said.chars().count() <= ERROR_MAX_CHARS + 1);
                proptest::prop_assert!(!is_stack_line(&said) || said.contains(" | "));
            }
        }
    }

    #[test]
    fn without_an_error_line_the_last_lines_but_stack_frames_are_told() {
        let exit = crashed("starting\nsomething went wrong\n    at f (a.js:1:2)\n");
        assert_eq!(
            exit.agent_error().as_deref(),
            Some("starting | something went wrong")
        );
    }
}

#[cfg(test)]
mod summary_tests {
    use super::*;

    #[test]
    fn a_summary_leaves_out_the_tags_and_keeps_an_answers_end() {
        let answer = "\x1b[1mDone.\x1b[0m Added the parser.\n\n\n<learning>use x</learning>\n<promise>COMPLETE</promise>\n";
        assert_eq!(
            summary_of(answer).as_deref(),
            Some("Done. Added the parser.")
        );
        assert_eq!(summary_of("<promise>COMPLETE</promise>"), None);
        let long: String = (0..400).map(|i| format!("line {i}\n")).collect();
        let s = summary_of(&long).unwrap();
        assert!(s.chars().count() <= SUMMARY_MAX_CHARS + 2, "{}", s.len());
        assert!(s.starts_with('…') && s.ends_with("line 399"), "{s}");
    }
}
