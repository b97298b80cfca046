//! Gemini CLI `--output-format stream-json` (tested against gemini-cli
//! 0.61.0): `init` (session id, model), `message` (assistant text arrives in
//! `delta` chunks, joined here into whole messages; the user message is our
//! prompt echoed back), `tool_use`, `tool_result`, `error`, `result` (status,
//! `error` and stats; no cost, and no `response`: the final answer is the
//! last assistant message).
//!
//! Tokens: gemini's `input_tokens` includes cached tokens; its `input` field
//! is the uncached part, which is the receipt's `input` (`cached` is the
//! cache read). Turns: gemini does not show its model round trips, so none
//! are reported. Model: the one that used the most tokens in `stats.models`,
//! else the one `init` names.
//!
//! A failed shell command is not marked: gemini reports `status: success`
//! and no exit code for it.

use super::{
    LineParser, error_message, json_object, raw, str_at, summarize_tool_input,
    summarize_tool_output, u64_at,
};
use crate::agent::ratelimit::rate_limit_in_text;
use crate::agent::{AgentEvent, FinalResult, TokenUsage};
use serde_json::Value;

#[derive(Debug, Default)]
pub struct GeminiParser {
    /// Assistant text not yet reported (deltas of the current message).
    pending: String,
    /// The last whole assistant message: the final answer.
    last_text: Option<String>,
    session_id: Option<String>,
    model: Option<String>,
}

impl GeminiParser {
    fn flush(&mut self, out: &mut Vec<AgentEvent>) {
        if !self.pending.trim().is_empty() {
            let text = std::mem::take(&mut self.pending);
            self.last_text = Some(text.clone());
            out.push(AgentEvent::Text { text });
        }
        self.pending.clear();
    }

    fn result(&self, v: &Value, out: &mut Vec<AgentEvent>) {
        let stats = v.get("stats");
        let status = str_at(v, "status");
        let is_error = status.is_some_and(|s| s != "success");
        let raw_error = v.get("error").map(|e| match e {
            Value::String(s) => s.clone(),
            _ => str_at(e, "message")
                .map(str::to_string)
                .unwrap_or_else(|| e.to_string()),
        });
        let text = if is_error {
            let raw_error = raw_error.clone().unwrap_or_else(|| "unknown error".into());
            // Read the whole message: the limit wording may be on any line.
            if let Some(limit) = rate_limit_in_text(&raw_error) {
                out.push(AgentEvent::RateLimit { limit });
            }
            error_message(&raw_error)
        } else {
            self.last_text
                .clone()
                .or_else(|| str_at(v, "response").map(str::to_string))
                .unwrap_or_default()
        };
        let api_error_status = raw_error.as_deref().and_then(http_code);
        out.push(AgentEvent::Result {
            result: FinalResult {
                text,
                is_error,
                subtype: status.map(str::to_string),
                turns: None,
                usage: stats.and_then(gemini_usage),
                cost_usd: None,
                duration_ms: stats.and_then(|s| u64_at(s, "duration_ms")),
                session_id: self.session_id.clone(),
                api_error_status,
                model: stats.and_then(busiest_model).or_else(|| self.model.clone()),
            },
        });
    }
}

/// Gemini's stats, converted to the receipt's meaning (see module docs).
fn gemini_usage(stats: &Value) -> Option<TokenUsage> {
    if !stats.is_object() {
        return None;
    }
    let cache_read = u64_at(stats, "cached").unwrap_or(0);
    let input = u64_at(stats, "input").unwrap_or_else(|| {
        u64_at(stats, "input_tokens")
            .unwrap_or(0)
            .saturating_sub(cache_read)
    });
    Some(TokenUsage {
        input,
        output: u64_at(stats, "output_tokens").unwrap_or(0),
        cache_read,
        cache_creation: 0,
    })
}

/// The model that used the most tokens (the first by name on a tie).
fn busiest_model(stats: &Value) -> Option<String> {
    let models = stats.get("models")?.as_object()?;
    let mut best: Option<(&String, u64)> = None;
    for (name, m) in models {
        let total = u64_at(m, "total_tokens").unwrap_or(0);
        if total > 0 && best.is_none_or(|(_, t)| total > t) {
            best = Some((name, total));
        }
    }
    best.map(|(name, _)| name.clone())
}

/// The HTTP status in an `[API Error: {"error":{"code":400,…}}]` message.
fn http_code(text: &str) -> Option<u16> {
    let start = text.find('{')?;
    let v = serde_json::Deserializer::from_str(&text[start..])
        .into_iter::<Value>()
        .next()?
        .ok()?;
    let err = v.get("error").unwrap_or(&v);
    u64_at(err, "code").and_then(|c| u16::try_from(c).ok())
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
                self.model = str_at(&v, "model").map(str::to_string);
                out.push(AgentEvent::Init {
                    session_id: self.session_id.clone(),
                    model: self.model.clone(),
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
                // On failure the error's message says more than the output.
                let summary = match (ok, v.get("output"), v.get("error")) {
                    (false, _, Some(e)) if !e.is_null() => summarize_tool_output(e),
                    (_, Some(o), _) if !o.is_null() => summarize_tool_output(o),
                    (_, _, Some(e)) => summarize_tool_output(e),
                    _ => String::new(),
                };
                out.push(AgentEvent::ToolResult {
                    is_error: !ok,
                    summary,
                });
            }
            // A warning or an error gemini goes on after: shown, never fatal
            // by itself (the `result` says whether the run failed).
            Some("error") => {
                let message = str_at(&v, "message").unwrap_or("unknown error");
                let level = str_at(&v, "severity").unwrap_or("error");
                out.push(AgentEvent::Raw {
                    line: format!("{level}: {}", error_message(message)),
                });
            }
            Some("result") => self.result(&v, out),
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
            Some((20, 10)),
            "without `input`, input_tokens minus `cached`"
        );
        assert_eq!(result.duration_ms, Some(500));
        assert_eq!(result.text, "Done <promise>COMPLETE</promise>");
        assert_eq!(result.session_id.as_deref(), Some("g1"));
        assert!(matches!(&out[6], AgentEvent::Raw { .. }));
        assert_eq!(out.len(), 7);
    }
}
