//! Per-attempt receipts: what an attempt took and how it ended, for the
//! session file, `--json` output and the human summary line.

use crate::agent::{AgentExit, CompletionSignal, Ending, RateLimit, TokenUsage};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// Wall-clock time of the attempt, from spawn to the last process gone.
    pub duration_ms: u64,
    /// Turns the agent reports (Claude's `num_turns`, Codex's turns).
    pub turns: Option<u64>,
    /// Tokens the agent reports, when it reports any.
    pub tokens: Option<TokenUsage>,
    /// Cost the agent reports; `None` for token-only agents ("cost unknown").
    pub cost_usd: Option<f64>,
    /// How the process ended (exit code, signal, timeout, stop, spawn failure).
    pub ending: Ending,
    /// The agent's own verdict, when it gave one.
    pub signal: Option<CompletionSignal>,
    /// Whether the agent's final result was an error, when it sent one.
    pub is_error: Option<bool>,
    pub rate_limited: Option<RateLimit>,
    pub session_id: Option<String>,
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
            session_id: result.and_then(|r| r.session_id.clone()),
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
        }
    }
}
