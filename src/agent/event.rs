//! The normalized event stream every provider's output is turned into.

use serde::{Deserialize, Serialize};

/// Tokens of one attempt, with one meaning for every agent (each parser
/// converts its agent's own counting to this):
/// - `input`: input tokens the model processed that were neither read from
///   nor written to a prompt cache (codex and gemini count cached tokens in
///   their `input_tokens`; they are taken out here),
/// - `output`: every token the model generated, reasoning included,
/// - `cache_read`: input tokens served from the prompt cache,
/// - `cache_creation`: input tokens written to the prompt cache.
///
/// So `input + cache_read + cache_creation` is the whole prompt side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_creation: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateLimit {
    /// `allowed`, `allowed_warning` or `rejected`.
    pub status: String,
    /// Unix seconds when the limit resets, when known.
    pub resets_at: Option<u64>,
    pub kind: Option<String>,
}

/// The agent's final report (Claude's `result` line, or the equivalent).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FinalResult {
    pub text: String,
    pub is_error: bool,
    pub subtype: Option<String>,
    pub turns: Option<u64>,
    pub usage: Option<TokenUsage>,
    /// None when the agent does not report cost (token-only agents).
    pub cost_usd: Option<f64>,
    pub duration_ms: Option<u64>,
    pub session_id: Option<String>,
    pub api_error_status: Option<u16>,
    /// The model that did the work, when the agent names it in its result.
    #[serde(default)]
    pub model: Option<String>,
}

/// The [`FinalResult::subtype`] of a run whose tools were all denied or
/// withheld (copilot without `--allow-all`, qwen without `--yolo`): such a
/// run still exits 0 and may even claim success, having written nothing.
pub const SUBTYPE_TOOLS_DENIED: &str = "tools_denied";

impl FinalResult {
    /// Why the agent could not act, when every tool it tried was denied or
    /// the tools that write were withheld; the result's text says so.
    pub fn tools_denied(&self) -> Option<&str> {
        (self.subtype.as_deref() == Some(SUBTYPE_TOOLS_DENIED)).then_some(self.text.as_str())
    }

    /// Marks this result as a run whose tools were denied, for `why`. The
    /// agent's own final words are dropped: they may claim what it could
    /// not have done.
    pub fn deny(&mut self, why: String) {
        self.is_error = true;
        self.subtype = Some(SUBTYPE_TOOLS_DENIED.to_string());
        self.text = why;
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AgentEvent {
    Init {
        session_id: Option<String>,
        model: Option<String>,
    },
    Text {
        text: String,
    },
    Thinking {
        text: String,
    },
    ToolUse {
        name: String,
        summary: String,
    },
    ToolResult {
        is_error: bool,
        summary: String,
    },
    Usage {
        usage: TokenUsage,
    },
    RateLimit {
        limit: RateLimit,
    },
    /// The agent retries a failed model call itself (not an error yet).
    ApiRetry {
        attempt: Option<u64>,
        max_retries: Option<u64>,
        delay_ms: Option<u64>,
        /// Why, in the agent's words, when it says.
        #[serde(default)]
        message: Option<String>,
    },
    Result {
        result: FinalResult,
    },
    /// A line we don't understand (an unknown event type, or plain-text
    /// output), kept as it was: never an error.
    Raw {
        line: String,
    },
    /// A line from the agent's stderr.
    Stderr {
        line: String,
    },
    /// An ACP agent asked before a tool call and the run answered: `tool`
    /// its title, `tool_kind` the protocol's (`edit`, `execute`, …),
    /// `reason` why it was refused.
    Permission {
        tool: String,
        tool_kind: String,
        allowed: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}
