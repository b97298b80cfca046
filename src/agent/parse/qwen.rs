//! Qwen Code `--yolo -o stream-json` (tested against qwen-code 0.24.4):
//! Claude Code's stream-json (`system/init`, `assistant`, `user`, `result`),
//! read by [`ClaudeParser`], with what qwen does differently:
//!
//! - `stream_event` lines (`goal_state` and, with partial messages, deltas)
//!   carry nothing the loop needs;
//! - `system/retry {data: {attempt, maxRetries, delayMs}}`: qwen is about to
//!   retry a failed model call; the reason is on stderr only
//!   (`Retrying in 60s (attempt 1/10): [API Error: 429 …]`, read by
//!   [`QwenStderr`]), and qwen goes on retrying for many minutes;
//! - `input_tokens` count cached tokens too (gemini's counting): the receipt's
//!   input is what is left after `cache_read_input_tokens`; no cost;
//! - without `--yolo` the tools that write are not even offered (`tools` of
//!   `system/init`) and the run still reports success: such a run ends as
//!   denied ([`FinalResult::deny`]).

use super::{ClaudeParser, LineParser, json_object, str_at, u64_at};
use crate::agent::ratelimit::{epoch_in, rate_limit_in_text, rejected, retry_delay_secs};
use crate::agent::{AgentEvent, TokenUsage};
use serde_json::Value;

/// Tools of qwen's that change files or run commands: a run offered none of
/// them can do nothing a task asks.
const WRITE_TOOLS: [&str; 5] = [
    "write_file",
    "edit",
    "replace",
    "run_shell_command",
    "notebook_edit",
];

#[derive(Debug, Default)]
pub struct QwenParser {
    claude: ClaudeParser,
    /// Why the run could not act: the write tools were withheld.
    withheld: Option<String>,
}

impl LineParser for QwenParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        // The bulk (assistant and user messages, as qwen writes them) goes
        // straight to the Claude reader; other lines are looked at first.
        let bulk =
            line.starts_with(r#"{"type":"assistant""#) || line.starts_with(r#"{"type":"user""#);
        if !bulk && let Some(v) = json_object(line) {
            match (str_at(&v, "type"), str_at(&v, "subtype")) {
                (Some("stream_event"), _) => return,
                (Some("system"), Some("retry")) => {
                    let data = v.get("data").unwrap_or(&Value::Null);
                    out.push(AgentEvent::ApiRetry {
                        attempt: u64_at(data, "attempt"),
                        max_retries: u64_at(data, "maxRetries"),
                        delay_ms: u64_at(data, "delayMs"),
                        message: None,
                    });
                    return;
                }
                (Some("system"), Some("init")) => self.check_tools(&v),
                _ => {}
            }
        }
        let before = out.len();
        self.claude.parse_line(line, out);
        for event in &mut out[before..] {
            match event {
                AgentEvent::Usage { usage } => uncache(usage),
                AgentEvent::Result { result } => {
                    if let Some(usage) = &mut result.usage {
                        uncache(usage);
                    }
                    if let Some(why) = &self.withheld {
                        result.deny(why.clone());
                    }
                }
                _ => {}
            }
        }
    }
}

impl QwenParser {
    fn check_tools(&mut self, init: &Value) {
        let Some(Value::Array(tools)) = init.get("tools") else {
            return;
        };
        let offers_a_writer = tools
            .iter()
            .filter_map(Value::as_str)
            .any(|t| WRITE_TOOLS.contains(&t));
        if !offers_a_writer {
            let mode = str_at(init, "permission_mode").unwrap_or("unknown");
            self.withheld = Some(format!(
                "qwen offered the model no tool that writes files or runs commands (permission mode {mode}; they need --yolo)"
            ));
        }
    }
}

/// qwen's `input_tokens` include cache reads: the receipt's `input` does not.
fn uncache(usage: &mut TokenUsage) {
    usage.input = usage
        .input
        .saturating_sub(usage.cache_read.saturating_add(usage.cache_creation));
}

/// qwen's stderr: every line as it is, and a rate limit for each retry qwen
/// announces on a 429 (`Retrying in 60s (attempt 1/10): [API Error: 429 …]`),
/// resetting when qwen will try again. The loop then knows, if the attempt
/// ends in that back-off (qwen's `--max-wall-time`, or the task timeout), that
/// a limit stopped it, and waits instead of counting a failure.
#[derive(Debug, Default)]
pub struct QwenStderr;

impl LineParser for QwenStderr {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        if line.trim().is_empty() {
            return;
        }
        if let Some(rest) = line.trim_start().strip_prefix("Retrying in ") {
            let lower = rest.to_ascii_lowercase();
            let limited = lower.contains("api error: 429") || rate_limit_in_text(rest).is_some();
            if limited {
                let wait = retry_delay_secs(&format!("retry in {rest}"));
                out.push(AgentEvent::RateLimit {
                    limit: rejected(wait.map(epoch_in)),
                });
            }
        }
        out.push(AgentEvent::Stderr {
            line: line.to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::parse::parse_all;

    #[test]
    fn retry_lines_on_stderr_are_rate_limits_with_their_wait() {
        let before = epoch_in(0);
        let events = parse_all(
            QwenStderr,
            &[
                "Ripgrep not available: spawn rg EACCES. Falling back to built-in grep.",
                "Retrying in 60s (attempt 1/10): [API Error: 429 mock rate limit]",
                "Retrying in 2s (attempt 1/3): [API Error: 500 internal]",
            ],
        );
        let limits: Vec<Option<u64>> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::RateLimit { limit } => Some(limit.resets_at),
                _ => None,
            })
            .collect();
        assert_eq!(limits.len(), 1, "a 500 is no limit: {events:?}");
        let at = limits[0].unwrap();
        assert!(at >= before + 60 && at <= epoch_in(60), "{at}");
        let lines = events
            .iter()
            .filter(|e| matches!(e, AgentEvent::Stderr { .. }))
            .count();
        assert_eq!(lines, 3, "every line is kept as it was");
    }

    #[test]
    fn retries_on_stdout_are_api_retries() {
        let events = parse_all(
            QwenParser::default(),
            &[
                r#"{"type":"system","subtype":"retry","uuid":"u","session_id":"s","data":{"reason":"retry","attempt":1,"maxRetries":10,"delayMs":60000}}"#,
                r#"{"type":"stream_event","event":{"type":"goal_state"}}"#,
                // Fields in another order read the same.
                r#"{"event":{"type":"goal_state"},"type":"stream_event"}"#,
            ],
        );
        assert_eq!(
            events,
            [AgentEvent::ApiRetry {
                attempt: Some(1),
                max_retries: Some(10),
                delay_ms: Some(60000),
                message: None
            }]
        );
    }
}
