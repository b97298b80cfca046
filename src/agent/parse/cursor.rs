//! Cursor Agent `--print --output-format stream-json`: Claude-like `system`,
//! `assistant` and `result` lines, plus `tool_call` started/completed lines
//! whose payload is keyed by the tool (`shellToolCall`, `readToolCall`, …).
//! Its `user` lines repeat our prompt: never an event.

use super::{
    LineParser, json_object, raw, str_at, summarize_tool_input, summarize_tool_output, u64_at,
};
use crate::agent::{AgentEvent, FinalResult};
use serde_json::Value;

#[derive(Debug, Default)]
pub struct CursorParser;

impl LineParser for CursorParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        let Some(v) = json_object(line) else {
            raw(line, out);
            return;
        };
        match str_at(&v, "type") {
            Some("system") if str_at(&v, "subtype") == Some("init") => out.push(AgentEvent::Init {
                session_id: str_at(&v, "session_id").map(str::to_string),
                model: str_at(&v, "model").map(str::to_string),
            }),
            Some("user") => {}
            Some("assistant") => {
                let content = v.get("message").and_then(|m| m.get("content"));
                let text: String = match content {
                    Some(Value::Array(blocks)) => blocks
                        .iter()
                        .filter(|b| str_at(b, "type") == Some("text"))
                        .filter_map(|b| str_at(b, "text"))
                        .collect(),
                    Some(Value::String(s)) => s.clone(),
                    _ => String::new(),
                };
                if !text.trim().is_empty() {
                    out.push(AgentEvent::Text { text });
                }
            }
            Some("thinking") => {
                if let Some(text) = str_at(&v, "text").filter(|t| !t.trim().is_empty()) {
                    out.push(AgentEvent::Thinking {
                        text: text.to_string(),
                    });
                }
            }
            Some("tool_call") => tool_call(&v, line, out),
            Some("result") => out.push(AgentEvent::Result {
                result: FinalResult {
                    text: str_at(&v, "result").unwrap_or_default().to_string(),
                    is_error: v.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                    subtype: str_at(&v, "subtype").map(str::to_string),
                    turns: None,
                    usage: None,
                    cost_usd: None,
                    duration_ms: u64_at(&v, "duration_ms"),
                    session_id: str_at(&v, "session_id").map(str::to_string),
                    api_error_status: None,
                    model: None,
                },
            }),
            _ => raw(line, out),
        }
    }
}

fn tool_call(v: &Value, line: &str, out: &mut Vec<AgentEvent>) {
    // `{"tool_call": {"shellToolCall": {"args": {...}, "result": {...}}}}`
    let Some((key, call)) = v
        .get("tool_call")
        .and_then(Value::as_object)
        .and_then(|m| m.iter().next())
    else {
        raw(line, out);
        return;
    };
    let name = key.strip_suffix("ToolCall").unwrap_or(key).to_string();
    match str_at(v, "subtype") {
        Some("started") => out.push(AgentEvent::ToolUse {
            name,
            summary: call
                .get("args")
                .map(summarize_tool_input)
                .unwrap_or_default(),
        }),
        Some("completed") => {
            let result = call.get("result").unwrap_or(&Value::Null);
            let failure = result
                .get("error")
                .or_else(|| result.get("failure"))
                .or_else(|| result.get("rejected"));
            let summary = match failure {
                Some(f) => summarize_tool_output(f),
                None => result
                    .get("success")
                    .map(summarize_tool_output)
                    .unwrap_or_default(),
            };
            out.push(AgentEvent::ToolResult {
                is_error: failure.is_some(),
                summary,
            });
        }
        _ => raw(line, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_stream() {
        let mut p = CursorParser;
        let mut out = Vec::new();
        for l in [
            r#"{"type":"system","subtype":"init","session_id":"c1","model":"gpt-5","cwd":"/w"}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"<promise>COMPLETE</promise>"}]}}"#,
            r#"{"type":"tool_call","subtype":"started","call_id":"t1","tool_call":{"shellToolCall":{"args":{"command":"ls -la"}}}}"#,
            r#"{"type":"tool_call","subtype":"completed","call_id":"t1","tool_call":{"shellToolCall":{"args":{"command":"ls -la"},"result":{"success":{"stdout":"x"}}}}}"#,
            r#"{"type":"tool_call","subtype":"completed","call_id":"t2","tool_call":{"readToolCall":{"args":{"path":"a"},"result":{"error":{"message":"no such file"}}}}}"#,
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Finished."}]}}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"result":"Finished.","duration_ms":1234,"session_id":"c1","request_id":"r"}"#,
        ] {
            p.parse_line(l, &mut out);
        }
        assert_eq!(
            out[0],
            AgentEvent::Init {
                session_id: Some("c1".into()),
                model: Some("gpt-5".into())
            }
        );
        assert_eq!(
            out[1],
            AgentEvent::ToolUse {
                name: "shell".into(),
                summary: "ls -la".into()
            }
        );
        assert_eq!(
            out[2],
            AgentEvent::ToolResult {
                is_error: false,
                summary: "x".into()
            }
        );
        assert_eq!(
            out[3],
            AgentEvent::ToolResult {
                is_error: true,
                summary: "no such file".into()
            }
        );
        assert_eq!(
            out[4],
            AgentEvent::Text {
                text: "Finished.".into()
            }
        );
        let AgentEvent::Result { result } = &out[5] else {
            panic!("{out:?}")
        };
        assert_eq!(result.duration_ms, Some(1234));
        assert_eq!(result.cost_usd, None);
        assert_eq!(out.len(), 6);
    }
}
