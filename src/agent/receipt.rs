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
        }
    }
}

/// How many stderr lines [`AgentExit::agent_error`] quotes at most.
const ERROR_STDERR_LINES: usize = 5;
/// How long [`AgentExit::agent_error`] lets the agent's words be.
const ERROR_MAX_CHARS: usize = 600;

impl AgentExit {
    /// Why the agent says it stopped, in its own words: the message of its
    /// failed final result, else the last lines of its stderr. Colour codes
    /// are removed and it is one line. `None` when it said nothing.
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
            let shown = &lines[lines.len().saturating_sub(ERROR_STDERR_LINES)..];
            Some(shown.join(" | ")).filter(|t| !t.is_empty())
        })?;
        Some(crate::agent::parse::one_line(&text, ERROR_MAX_CHARS))
    }
}
