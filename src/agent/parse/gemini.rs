//! Gemini CLI `--output-format stream-json`: `init`, `message` (assistant text
//! arrives in `delta` chunks, joined here into whole messages), `tool_use`,
//! `tool_result`, `error`, `result` (status and stats, no cost).

use super::{
    LineParser, json_object, raw, str_at, summarize_tool_input, summarize_tool_output, u64_at,
    usage_from,
};
use crate::agent::ratelimit::rate_limit_in_text;
use crate::agent::{AgentEvent, FinalResult};
use serde_json::Value;

#[derive(Debug, Default)]
pub struct GeminiParser {
    /// Assistant text not yet reported (deltas of the current message).
    pending: String,
    session_id: Option<String>,
}

impl GeminiParser {
    fn flush(&mut self, out: &mut Vec<AgentEvent>) {
        if !self.pending.trim().is_empty() {
            out.push(AgentEvent::Text {
                text: std::mem::take(&mut self.pending),
            });
        }
        self.pending.clear();
    }
}

impl LineParser for GeminiParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        let Some(v) = json_object(line) else {
            raw(line, out);
            return;
        };
        let kind = str_at(&v, "type");
        if kind == Some("message") {
            // The user's message is our prompt echoed back: never an event.
            if str_at(&v, "role") == Some("assistant") {
                let content = str_at(&v, "content").unwrap_or_default();
                if v.get("delta").and_then(Value::as_bool).unwrap_or(false) {
                    self.pending.push_str(content);
                } else {
                    self.flush(out);
                    self.pending.push_str(content);
                    self.flush(out);
                }
            }
            return;
        }
        self.flush(out);
        match kind {
            Some("init") => {
                self.session_id = str_at(&v, "session_id")
                    .or_else(|| str_at(&v, "sessionId"))
                    .map(str::to_string);
                out.push(AgentEvent::Init {
                    session_id: self.session_id.clone(),
                    model: str_at(&v, "model").map(str::to_string),
                });
            }
            Some("tool_use") => out.push(AgentEvent::ToolUse {
                name: str_at(&v, "tool_name").unwrap_or("tool").to_string(),
                summary: v
                    .get("parameters")
                    .map(summarize_tool_input)
                    .unwrap_or_default(),
            }),
            Some("tool_result") => {
                let ok = str_at(&v, "status").is_none_or(|s| s == "success");
                let summary = match v.get("output") {
                    Some(o) if !o.is_null() => summarize_tool_output(o),
                    _ => v
                        .get("error")
                        .map(summarize_tool_output)
                        .unwrap_or_default(),
                };
                out.push(AgentEvent::ToolResult {
                    is_error: !ok,
                    summary,
                });
            }
            Some("error") => {
                let message = str_at(&v, "message").unwrap_or("unknown error");
                if let Some(limit) = rate_limit_in_text(message) {
                    out.push(AgentEvent::RateLimit { limit });
                }
                out.push(AgentEvent::Raw {
                    line: format!("error: {message}"),
                });
            }
            Some("result") => {
                let stats = v.get("stats");
                let error_text = v
                    .get("error")
                    .map(summarize_tool_output)
                    .unwrap_or_default();
                out.push(AgentEvent::Result {
                    result: FinalResult {
                        text: str_at(&v, "response")
                            .map(str::to_string)
                            .unwrap_or(error_text),
                        is_error: str_at(&v, "status").is_some_and(|s| s != "success"),
                        subtype: str_at(&v, "status").map(str::to_string),
                        turns: None,
                        usage: stats.and_then(usage_from),
                        cost_usd: None,
                        duration_ms: stats.and_then(|s| u64_at(s, "duration_ms")),
                        session_id: self.session_id.clone(),
                        api_error_status: None,
                    },
                });
            }
            _ => raw(line, out),
        }
    }

    fn finish(&mut self, out: &mut Vec<AgentEvent>) {
        self.flush(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_join_into_one_message() {
        let mut p = GeminiParser::default();
        let mut out = Vec::new();
        for l in [
            r#"{"type":"init","timestamp":"t","session_id":"g1","model":"gemini-2.5-pro"}"#,
            r#"{"type":"message","role":"user","content":"Task ID: 1 <promise>COMPLETE</promise>"}"#,
            r#"{"type":"message","role":"assistant","content":"I will ","delta":true}"#,
            r#"{"type":"message","role":"assistant","content":"look.","delta":true}"#,
            r#"{"type":"tool_use","tool_name":"run_shell_command","tool_id":"x","parameters":{"command":"ls"}}"#,
            r#"{"type":"tool_result","tool_id":"x","status":"error","error":{"type":"E","message":"denied"}}"#,
            r#"{"type":"message","role":"assistant","content":"Done <promise>COMPLETE</promise>","delta":true}"#,
            r#"{"type":"result","status":"success","stats":{"total_tokens":30,"input_tokens":20,"output_tokens":10,"duration_ms":500,"tool_calls":1}}"#,
            r#"{"type":"mystery"}"#,
        ] {
            p.parse_line(l, &mut out);
        }
        p.finish(&mut out);
        assert_eq!(
            out[0],
            AgentEvent::Init {
                session_id: Some("g1".into()),
                model: Some("gemini-2.5-pro".into())
            }
        );
        assert_eq!(
            out[1],
            AgentEvent::Text {
                text: "I will look.".into()
            }
        );
        assert_eq!(
            out[2],
            AgentEvent::ToolUse {
                name: "run_shell_command".into(),
                summary: "ls".into()
            }
        );
        assert_eq!(
            out[3],
            AgentEvent::ToolResult {
                is_error: true,
                summary: "denied".into()
            }
        );
        assert_eq!(
            out[4],
            AgentEvent::Text {
                text: "Done <promise>COMPLETE</promise>".into()
            }
        );
        let AgentEvent::Result { result } = &out[5] else {
            panic!("{out:?}")
        };
        assert!(!result.is_error);
        assert_eq!(
            result.usage.as_ref().map(|u| (u.input, u.output)),
            Some((20, 10))
        );
        assert_eq!(result.duration_ms, Some(500));
        assert!(matches!(&out[6], AgentEvent::Raw { .. }));
        assert_eq!(out.len(), 7);
    }
}
