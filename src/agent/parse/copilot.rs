//! GitHub Copilot CLI `--output-format json` (tested against copilot
//! 1.0.102): JSON lines of its own, `{"type": "<event>", "data": {…}}`, the
//! last one `{"type": "result", "exitCode": …, "sessionId": …}`.
//!
//! - `assistant.message`: one model response, its text in `content` and its
//!   tool calls in `toolRequests` (the `*_delta` events repeat it in pieces).
//!   Each is a turn; the final answer is the last one with text.
//! - `tool.execution_complete`: `success`, else `error {message, code}`; code
//!   `denied` is a permission refusal. Without `--allow-all` every write is
//!   refused and the run still exits 0, its final words claiming success: a
//!   run whose every tool call was denied ends as such ([`FinalResult::deny`]).
//! - `model.call_failure` (`statusCode`, `errorMessage`) followed by
//!   `assistant.turn_retry {reason}`: copilot retries (5 times, honouring
//!   `Retry-After`); `session.error {errorType, message, statusCode}` ends the
//!   run (`errorType` `rate_limit` for a 429).
//!
//! Tokens and cost are not on stdout: `--usage-output-file F` writes them at
//! exit ([`read_usage_file`]). Its cost is in premium requests and AI
//! credits, not dollars, so receipts show no cost.

use super::{
    LineParser, error_message, json_object, raw, str_at, summarize_tool_input,
    summarize_tool_output, u64_at,
};
use crate::agent::ratelimit::{rate_limit_in_text, rejected};
use crate::agent::{AgentEvent, FinalResult, TokenUsage};
use serde_json::Value;
use std::path::Path;

/// Events that carry nothing a person or the loop needs (progress, deltas of
/// what `assistant.message` repeats whole, the echo of our own prompt).
const QUIET: [&str; 15] = [
    "session.skills_loaded",
    "session.mcp_servers_loaded",
    "session.info",
    "user.message",
    "assistant.turn_start",
    "assistant.turn_end",
    "assistant.idle",
    "assistant.message_start",
    "assistant.message_delta",
    "assistant.tool_call_delta",
    "assistant.reasoning_delta",
    "model.call_start",
    "model.call_finished",
    "model.call_final_result",
    "tool.execution_start",
];

#[derive(Debug, Default)]
pub struct CopilotParser {
    model_named: bool,
    model: Option<String>,
    last_text: Option<String>,
    turns: u64,
    tool_calls: u64,
    denied: u64,
    /// The first refusal's words, for the reason.
    denied_message: Option<String>,
    /// The last failed model call (`statusCode`, message), named by the retry after it.
    last_failure: Option<(Option<u16>, String)>,
    retries: u64,
    /// The `session.error` that ended the run.
    error: Option<(Option<u16>, String)>,
}

impl LineParser for CopilotParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        let Some(v) = json_object(line) else {
            raw(line, out);
            return;
        };
        let data = v.get("data").unwrap_or(&Value::Null);
        match str_at(&v, "type") {
            Some(kind) if QUIET.contains(&kind) => {}
            Some("session.tools_updated") => {
                if let Some(model) = str_at(data, "model").filter(|m| !m.is_empty()) {
                    self.model = Some(model.to_string());
                    if !self.model_named {
                        self.model_named = true;
                        out.push(AgentEvent::Init {
                            session_id: None,
                            model: self.model.clone(),
                        });
                    }
                }
            }
            Some("assistant.message") => self.message(data, out),
            Some("tool.execution_complete") => self.tool_done(data, out),
            Some("model.call_failure") => {
                let status = u64_at(data, "statusCode").and_then(|c| u16::try_from(c).ok());
                let message = str_at(data, "errorMessage")
                    .map(error_message)
                    .unwrap_or_else(|| "model call failed".to_string());
                self.last_failure = Some((status, message));
            }
            Some("assistant.turn_retry") => {
                self.retries += 1;
                let reason = str_at(data, "reason").unwrap_or("retry");
                let message = match &self.last_failure {
                    Some((Some(code), m)) => format!("{reason}: {m} (HTTP {code})"),
                    Some((None, m)) => format!("{reason}: {m}"),
                    None => reason.to_string(),
                };
                out.push(AgentEvent::ApiRetry {
                    attempt: Some(self.retries),
                    max_retries: None,
                    delay_ms: None,
                    message: Some(message),
                });
            }
            Some("session.error") => self.fatal(data, out),
            Some("result") => out.push(AgentEvent::Result {
                result: self.result(&v),
            }),
            _ => raw(line, out),
        }
    }
}

impl CopilotParser {
    fn message(&mut self, data: &Value, out: &mut Vec<AgentEvent>) {
        self.turns += 1;
        if let Some(model) = str_at(data, "model").filter(|m| !m.is_empty()) {
            self.model = Some(model.to_string());
        }
        if let Some(text) = str_at(data, "content").filter(|t| !t.trim().is_empty()) {
            self.last_text = Some(text.to_string());
            out.push(AgentEvent::Text {
                text: text.to_string(),
            });
        }
        if let Some(Value::Array(calls)) = data.get("toolRequests") {
            for call in calls {
                out.push(AgentEvent::ToolUse {
                    name: str_at(call, "name").unwrap_or("tool").to_string(),
                    summary: call
                        .get("arguments")
                        .map(summarize_tool_input)
                        .unwrap_or_default(),
                });
            }
        }
    }

    fn tool_done(&mut self, data: &Value, out: &mut Vec<AgentEvent>) {
        self.tool_calls += 1;
        let ok = data.get("success").and_then(Value::as_bool).unwrap_or(true);
        if ok {
            let summary = data
                .get("result")
                .and_then(|r| r.get("content"))
                .map(summarize_tool_output)
                .unwrap_or_default();
            out.push(AgentEvent::ToolResult {
                is_error: false,
                summary,
            });
            return;
        }
        let error = data.get("error").unwrap_or(&Value::Null);
        let message = str_at(error, "message")
            .map(str::to_string)
            .unwrap_or_else(|| summarize_tool_output(error));
        if str_at(error, "code") == Some("denied") {
            self.denied += 1;
            self.denied_message.get_or_insert_with(|| message.clone());
        }
        out.push(AgentEvent::ToolResult {
            is_error: true,
            summary: summarize_tool_output(&Value::String(message)),
        });
    }

    fn fatal(&mut self, data: &Value, out: &mut Vec<AgentEvent>) {
        let status = u64_at(data, "statusCode").and_then(|c| u16::try_from(c).ok());
        let message = str_at(data, "message")
            .map(error_message)
            .or_else(|| str_at(data, "errorType").map(str::to_string))
            .unwrap_or_else(|| "unknown error".to_string());
        let limited = str_at(data, "errorType") == Some("rate_limit") || status == Some(429);
        let limit = if limited {
            Some(rate_limit_in_text(&message).unwrap_or_else(|| rejected(None)))
        } else {
            rate_limit_in_text(&message)
        };
        if let Some(limit) = limit {
            out.push(AgentEvent::RateLimit { limit });
        }
        out.push(AgentEvent::Raw {
            line: format!("error: {message}"),
        });
        self.error = Some((status, message));
    }

    fn result(&self, v: &Value) -> FinalResult {
        let code = v.get("exitCode").and_then(Value::as_i64).unwrap_or(0);
        let usage = v.get("usage").unwrap_or(&Value::Null);
        let (status, text, is_error) = match &self.error {
            Some((status, message)) => (*status, message.clone(), true),
            None => (None, self.last_text.clone().unwrap_or_default(), code != 0),
        };
        let mut result = FinalResult {
            text,
            is_error,
            subtype: Some(if is_error { "error" } else { "success" }.to_string()),
            turns: Some(self.turns),
            usage: None,
            cost_usd: None,
            duration_ms: u64_at(usage, "sessionDurationMs"),
            session_id: str_at(v, "sessionId").map(str::to_string),
            api_error_status: status,
            model: self.model.clone(),
        };
        if self.tool_calls > 0 && self.denied == self.tool_calls {
            let said = self.denied_message.as_deref().unwrap_or("denied");
            result.deny(format!(
                "copilot denied every tool call ({} of {}): {said}",
                self.denied, self.tool_calls
            ));
        }
        result
    }
}

/// Tokens and the model from the file `--usage-output-file` wrote, summed
/// over its models (`modelMetrics.<model>.usage`). Copilot's `inputTokens`
/// include cache reads; they are taken out to mean what the receipt's
/// `input` means. `None` when the file is missing or unreadable.
pub fn read_usage_file(path: &Path) -> Option<(TokenUsage, Option<String>)> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    let Some(Value::Object(models)) = v.get("modelMetrics") else {
        return None;
    };
    let mut total = TokenUsage::default();
    // The model that used the most tokens names the attempt (as for gemini).
    let mut busiest: Option<(u64, &str)> = None;
    for (name, metrics) in models {
        let usage = metrics.get("usage").unwrap_or(&Value::Null);
        let all_input = u64_at(usage, "inputTokens").unwrap_or(0);
        let cache_read = u64_at(usage, "cacheReadTokens").unwrap_or(0);
        let cache_creation = u64_at(usage, "cacheWriteTokens").unwrap_or(0);
        let output = u64_at(usage, "outputTokens").unwrap_or(0);
        total.input += all_input.saturating_sub(cache_read.saturating_add(cache_creation));
        total.output += output;
        total.cache_read += cache_read;
        total.cache_creation += cache_creation;
        let used = all_input + output;
        if busiest.is_none_or(|(most, _)| used > most) {
            busiest = Some((used, name));
        }
    }
    let model = str_at(&v, "currentModel")
        .or(busiest.map(|(_, name)| name))
        .map(str::to_string);
    Some((total, model))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::parse::parse_all;

    #[test]
    fn text_tools_turns_and_result() {
        let events = parse_all(
            CopilotParser::default(),
            &[
                r#"{"type":"session.tools_updated","data":{"model":"m1"},"ephemeral":true}"#,
                r#"{"type":"user.message","data":{"content":"<promise>COMPLETE</promise>"}}"#,
                r#"{"type":"assistant.message","data":{"model":"m1","content":"","toolRequests":[{"toolCallId":"c1","name":"bash","arguments":{"command":"ls"}}]}}"#,
                r#"{"type":"tool.execution_complete","data":{"toolCallId":"c1","success":true,"result":{"content":"a\nb"}}}"#,
                r#"{"type":"assistant.message","data":{"model":"m1","content":"Done. <promise>COMPLETE</promise>","toolRequests":[]}}"#,
                r#"{"type":"result","sessionId":"s1","exitCode":0,"usage":{"sessionDurationMs":517}}"#,
            ],
        );
        assert_eq!(
            events[..4],
            [
                AgentEvent::Init {
                    session_id: None,
                    model: Some("m1".into())
                },
                AgentEvent::ToolUse {
                    name: "bash".into(),
                    summary: "ls".into()
                },
                AgentEvent::ToolResult {
                    is_error: false,
                    summary: "a".into()
                },
                AgentEvent::Text {
                    text: "Done. <promise>COMPLETE</promise>".into()
                },
            ]
        );
        let AgentEvent::Result { result } = &events[4] else {
            panic!("{events:?}")
        };
        assert_eq!(result.text, "Done. <promise>COMPLETE</promise>");
        assert!(!result.is_error);
        assert_eq!(result.turns, Some(2));
        assert_eq!(result.session_id.as_deref(), Some("s1"));
        assert_eq!(result.duration_ms, Some(517));
        assert_eq!(result.tools_denied(), None);
        assert_eq!(events.len(), 5);
    }

    #[test]
    fn some_denied_tools_are_not_a_denied_run() {
        let events = parse_all(
            CopilotParser::default(),
            &[
                r#"{"type":"tool.execution_complete","data":{"success":false,"error":{"message":"no","code":"denied"}}}"#,
                r#"{"type":"tool.execution_complete","data":{"success":true,"result":{"content":"ok"}}}"#,
                r#"{"type":"result","exitCode":0}"#,
            ],
        );
        let AgentEvent::Result { result } = events.last().unwrap() else {
            panic!("{events:?}")
        };
        assert_eq!(result.tools_denied(), None);
    }

    #[test]
    fn usage_file_tokens_mean_the_receipts_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("usage.json");
        std::fs::write(
            &path,
            r#"{"totalPremiumRequestCost":0,"modelMetrics":{"mock-model":{"requests":{"count":2,"cost":0},
            "usage":{"inputTokens":246,"outputTokens":90,"cacheReadTokens":46,"cacheWriteTokens":0}}},
            "currentModel":"mock-model"}"#,
        )
        .unwrap();
        let (usage, model) = read_usage_file(&path).unwrap();
        assert_eq!(
            usage,
            TokenUsage {
                input: 200,
                output: 90,
                cache_read: 46,
                cache_creation: 0
            }
        );
        assert_eq!(model.as_deref(), Some("mock-model"));
        assert!(read_usage_file(&dir.path().join("missing.json")).is_none());
        std::fs::write(&path, "not json").unwrap();
        assert!(read_usage_file(&path).is_none());
    }
}
