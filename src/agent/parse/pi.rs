//! pi `-p --mode json` (tested against pi 0.73.1): a `session` header
//! (`id`, `cwd`), then `agent_start`, `turn_start`, `message_start/update/end`,
//! `tool_execution_start/end`, `turn_end`, `agent_end`, and
//! `auto_retry_start/end` around its own retries. No final line: the answer
//! is the last assistant `message_end`, and at the end of output the parser
//! reports the equivalent of a result.
//!
//! pi exits 0 in `--mode json` even when every model call failed, so the
//! outcome is read from the events: an assistant message with
//! `stopReason: "error"` (its `errorMessage`, e.g. `429 mock rate limit`) that
//! no later answer followed, or `auto_retry_end {success: false}`.
//!
//! Every assistant `message_end` carries `usage` (`input` already without
//! cache reads, `cacheRead`, `cacheWrite`, `output`) and `cost.total` in
//! dollars: both are summed. Turns are the answered model calls.

use super::{
    LineParser, add_usage, error_message, json_object, raw, str_at, summarize_tool_input,
    summarize_tool_output, u64_at,
};
use crate::agent::{AgentEvent, FinalResult, TokenUsage};
use serde_json::Value;

/// Events with nothing a person or the loop needs; the first four repeat the
/// message so far on every line (large), and are skipped without parsing.
const QUIET: [&str; 11] = [
    "message_update",
    "message_start",
    "turn_end",
    "agent_end",
    "agent_start",
    "turn_start",
    "tool_execution_start",
    "tool_execution_update",
    "queue_update",
    "compaction_start",
    "compaction_end",
];

#[derive(Debug, Default)]
pub struct PiParser {
    saw_anything: bool,
    session_id: Option<String>,
    model: Option<String>,
    last_text: Option<String>,
    /// The last assistant message's error, until an answer follows it.
    last_error: Option<String>,
    /// `auto_retry_end` with `success: false`: retries ran out.
    gave_up: Option<String>,
    turns: u64,
    usage: Option<TokenUsage>,
    cost: Option<f64>,
}

/// The event type when the line starts the way pi writes it
/// (`{"type":"…"`), without parsing the line.
fn leading_type(line: &str) -> Option<&str> {
    let rest = line.strip_prefix(r#"{"type":""#)?;
    rest.split_once('"').map(|(kind, _)| kind)
}

fn pi_usage(u: &Value) -> Option<TokenUsage> {
    if !u.is_object() {
        return None;
    }
    Some(TokenUsage {
        input: u64_at(u, "input").unwrap_or(0),
        output: u64_at(u, "output").unwrap_or(0),
        cache_read: u64_at(u, "cacheRead").unwrap_or(0),
        cache_creation: u64_at(u, "cacheWrite").unwrap_or(0),
    })
}

/// The HTTP status an error message starts with (`429 mock rate limit`).
fn leading_status(message: &str) -> Option<u16> {
    let digits: String = message
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (digits.len() == 3)
        .then(|| digits.parse().ok())
        .flatten()
        .filter(|c| (400..600).contains(c))
}

impl LineParser for PiParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        if leading_type(line).is_some_and(|t| QUIET.contains(&t)) {
            self.saw_anything = true;
            return;
        }
        let Some(v) = json_object(line) else {
            raw(line, out);
            return;
        };
        self.saw_anything = true;
        match str_at(&v, "type") {
            Some(kind) if QUIET.contains(&kind) => {}
            Some("session") => {
                self.session_id = str_at(&v, "id").map(str::to_string);
                out.push(AgentEvent::Init {
                    session_id: self.session_id.clone(),
                    model: None,
                });
            }
            Some("message_end") => {
                let message = v.get("message").unwrap_or(&Value::Null);
                if str_at(message, "role") == Some("assistant") {
                    self.assistant(message, out);
                }
            }
            Some("tool_execution_end") => out.push(AgentEvent::ToolResult {
                is_error: v.get("isError").and_then(Value::as_bool).unwrap_or(false),
                summary: v
                    .get("result")
                    .and_then(|r| r.get("content"))
                    .map(summarize_tool_output)
                    .unwrap_or_default(),
            }),
            Some("auto_retry_start") => out.push(AgentEvent::ApiRetry {
                attempt: u64_at(&v, "attempt"),
                max_retries: u64_at(&v, "maxAttempts"),
                delay_ms: u64_at(&v, "delayMs"),
                message: str_at(&v, "errorMessage").map(error_message),
            }),
            Some("auto_retry_end") => {
                if v.get("success").and_then(Value::as_bool) == Some(false) {
                    let why = str_at(&v, "finalError")
                        .map(error_message)
                        .or_else(|| self.last_error.clone())
                        .unwrap_or_else(|| "retries ran out".to_string());
                    self.gave_up = Some(why);
                }
            }
            _ => raw(line, out),
        }
    }

    fn finish(&mut self, out: &mut Vec<AgentEvent>) {
        if !self.saw_anything {
            return;
        }
        let error = self.gave_up.clone().or_else(|| self.last_error.clone());
        let is_error = error.is_some();
        if let Some(e) = &error {
            out.push(AgentEvent::Raw {
                line: format!("error: {e}"),
            });
        }
        out.push(AgentEvent::Result {
            result: FinalResult {
                api_error_status: error.as_deref().and_then(leading_status),
                text: error.or_else(|| self.last_text.clone()).unwrap_or_default(),
                is_error,
                subtype: Some(if is_error { "error" } else { "success" }.to_string()),
                turns: Some(self.turns),
                usage: self.usage.clone(),
                cost_usd: self.cost,
                duration_ms: None,
                session_id: self.session_id.clone(),
                model: self.model.clone(),
            },
        });
    }
}

impl PiParser {
    fn assistant(&mut self, message: &Value, out: &mut Vec<AgentEvent>) {
        if let Some(model) = str_at(message, "model").filter(|m| !m.is_empty()) {
            self.model = Some(model.to_string());
        }
        if let Some(usage) = message.get("usage").and_then(pi_usage) {
            add_usage(self.usage.get_or_insert_with(TokenUsage::default), &usage);
            if let Some(cost) = message
                .get("usage")
                .and_then(|u| u.get("cost"))
                .and_then(|c| c.get("total"))
                .and_then(Value::as_f64)
            {
                *self.cost.get_or_insert(0.0) += cost;
            }
            out.push(AgentEvent::Usage { usage });
        }
        if matches!(str_at(message, "stopReason"), Some("error" | "aborted")) {
            let why = str_at(message, "errorMessage")
                .map(error_message)
                .unwrap_or_else(|| "the model call failed".to_string());
            self.last_error = Some(why);
            return;
        }
        self.turns += 1;
        self.last_error = None;
        let mut text = String::new();
        if let Some(Value::Array(blocks)) = message.get("content") {
            for block in blocks {
                match str_at(block, "type") {
                    Some("text") => {
                        if let Some(t) = str_at(block, "text") {
                            text.push_str(t);
                        }
                    }
                    Some("thinking") => {
                        if let Some(t) = str_at(block, "thinking").filter(|t| !t.trim().is_empty())
                        {
                            out.push(AgentEvent::Thinking {
                                text: t.to_string(),
                            });
                        }
                    }
                    Some("toolCall") => out.push(AgentEvent::ToolUse {
                        name: str_at(block, "name").unwrap_or("tool").to_string(),
                        summary: block
                            .get("arguments")
                            .map(summarize_tool_input)
                            .unwrap_or_default(),
                    }),
                    _ => {}
                }
            }
        }
        if !text.trim().is_empty() {
            self.last_text = Some(text.clone());
            out.push(AgentEvent::Text { text });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::parse::parse_all;

    #[test]
    fn the_event_type_is_read_without_parsing_the_line() {
        assert_eq!(
            leading_type(r#"{"type":"message_update","x":1}"#),
            Some("message_update")
        );
        assert_eq!(leading_type(r#"{ "type": "session"}"#), None);
        assert_eq!(leading_status("429 mock rate limit"), Some(429));
        assert_eq!(leading_status("4290 things"), None);
        assert_eq!(leading_status("no code"), None);
    }

    #[test]
    fn an_answer_after_an_error_clears_it_and_costs_add_up() {
        let events = parse_all(
            PiParser::default(),
            &[
                r#"{"type":"session","version":3,"id":"s1","cwd":"/p"}"#,
                r#"{"type":"message_end","message":{"role":"assistant","content":[],"model":"m","usage":{"input":0,"output":0},"stopReason":"error","errorMessage":"500 boom"}}"#,
                r#"{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"500 boom"}"#,
                r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"toolCall","id":"c","name":"write","arguments":{"path":"/p/a.txt","content":"x"}}],"model":"m","usage":{"input":100,"output":45,"cacheRead":23,"cacheWrite":0,"cost":{"total":0.001}},"stopReason":"toolUse"}}"#,
                r#"{"type":"tool_execution_end","toolCallId":"c","toolName":"write","result":{"content":[{"type":"text","text":"Successfully wrote"}]},"isError":false}"#,
                r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"ok <promise>COMPLETE</promise>"}],"model":"m","usage":{"input":100,"output":45,"cacheRead":23,"cost":{"total":0.002}},"stopReason":"stop"}}"#,
                r#"{"type":"auto_retry_end","success":true,"attempt":1}"#,
            ],
        );
        assert!(events.iter().any(|e| matches!(
            e,
            AgentEvent::ApiRetry {
                attempt: Some(1),
                max_retries: Some(3),
                delay_ms: Some(2000),
                ..
            }
        )));
        let AgentEvent::Result { result } = events.last().unwrap() else {
            panic!("{events:?}")
        };
        assert!(!result.is_error);
        assert_eq!(result.text, "ok <promise>COMPLETE</promise>");
        assert_eq!(result.turns, Some(2));
        assert_eq!(
            result.usage,
            Some(TokenUsage {
                input: 200,
                output: 90,
                cache_read: 46,
                cache_creation: 0
            })
        );
        assert!((result.cost_usd.unwrap() - 0.003).abs() < 1e-12);
        assert_eq!(result.session_id.as_deref(), Some("s1"));
        assert_eq!(result.model.as_deref(), Some("m"));
    }
}
