//! OpenCode `run --format json` (tested against opencode 1.18.33):
//! `step_start`, `text`, `reasoning`, `tool_use` (the whole call, with its
//! state), `step_finish` (tokens and cost per step), `error` (a fatal API
//! error, with `statusCode` and the response headers). No final line: at the
//! end the parser reports the equivalent, with the summed tokens and cost.
//!
//! Each step is one model round trip: they are the receipt's turns. Tokens
//! already mean what the receipt means (`input` is uncached; `cache.read`,
//! `cache.write` apart); `reasoning` tokens are added to the output. A shell
//! command that exits non-zero (`metadata.exit`) is a failed tool call.

use super::{
    LineParser, SUMMARY_MAX_CHARS, add_usage, error_message, json_object, one_line, raw, str_at,
    summarize_tool_input, summarize_tool_output, u64_at,
};
use crate::agent::ratelimit::{epoch_in, rate_limit_in_text, rejected, retry_delay_secs};
use crate::agent::{AgentEvent, FinalResult, TokenUsage};
use serde_json::Value;

#[derive(Debug, Default)]
pub struct OpencodeParser {
    session_id: Option<String>,
    last_text: Option<String>,
    usage: Option<TokenUsage>,
    cost: Option<f64>,
    steps: u64,
    error: Option<String>,
    status_code: Option<u16>,
    saw_anything: bool,
}

/// A step's tokens, converted to the receipt's meaning (see module docs).
fn opencode_usage(tokens: &Value) -> Option<TokenUsage> {
    if !tokens.is_object() {
        return None;
    }
    let cache = tokens.get("cache").unwrap_or(&Value::Null);
    Some(TokenUsage {
        input: u64_at(tokens, "input").unwrap_or(0),
        output: u64_at(tokens, "output")
            .unwrap_or(0)
            .saturating_add(u64_at(tokens, "reasoning").unwrap_or(0)),
        cache_read: u64_at(cache, "read").unwrap_or(0),
        cache_creation: u64_at(cache, "write").unwrap_or(0),
    })
}

impl OpencodeParser {
    fn tool_use(&mut self, part: &Value, out: &mut Vec<AgentEvent>) {
        let state = part.get("state").unwrap_or(&Value::Null);
        out.push(AgentEvent::ToolUse {
            name: str_at(part, "tool").unwrap_or("tool").to_string(),
            summary: state
                .get("input")
                .map(summarize_tool_input)
                .unwrap_or_default(),
        });
        match str_at(state, "status") {
            Some("completed") => {
                // A shell command's exit code is in its metadata.
                let exit = state
                    .get("metadata")
                    .and_then(|m| m.get("exit"))
                    .and_then(Value::as_i64);
                let output = state
                    .get("output")
                    .map(summarize_tool_output)
                    .unwrap_or_default();
                let summary = match exit {
                    Some(code) if code != 0 => {
                        one_line(&format!("exit {code} · {output}"), SUMMARY_MAX_CHARS)
                    }
                    _ => output,
                };
                out.push(AgentEvent::ToolResult {
                    is_error: exit.is_some_and(|c| c != 0),
                    summary,
                });
            }
            Some("error") => out.push(AgentEvent::ToolResult {
                is_error: true,
                summary: state
                    .get("error")
                    .map(summarize_tool_output)
                    .unwrap_or_default(),
            }),
            _ => {}
        }
    }

    /// A fatal error: the run ends on it (opencode retries retryable API
    /// errors itself before it reports one).
    fn fatal(&mut self, v: &Value, out: &mut Vec<AgentEvent>) {
        let err = v.get("error").unwrap_or(&Value::Null);
        let data = err.get("data").unwrap_or(&Value::Null);
        let message = str_at(data, "message")
            .or_else(|| str_at(err, "message"))
            .map(error_message)
            .or_else(|| str_at(err, "name").map(str::to_string))
            .unwrap_or_else(|| "unknown error".to_string());
        let status = u64_at(data, "statusCode").and_then(|c| u16::try_from(c).ok());
        let retry_after = data
            .get("responseHeaders")
            .and_then(|h| str_at(h, "retry-after").or_else(|| str_at(h, "Retry-After")));
        let mut text = match status {
            Some(code) => format!("{message} (HTTP {code})"),
            None => message,
        };
        if let Some(after) = retry_after {
            text.push_str(&format!(" (retry-after {after})"));
        }
        let limit = if status == Some(429) {
            // The longer of what the header and the message ask for.
            let header = retry_after.and_then(|a| a.trim().parse::<u64>().ok());
            let wait = header.max(retry_delay_secs(&text));
            Some(rejected(wait.map(epoch_in)))
        } else {
            rate_limit_in_text(&text)
        };
        if let Some(limit) = limit {
            out.push(AgentEvent::RateLimit { limit });
        }
        out.push(AgentEvent::Raw {
            line: format!("error: {text}"),
        });
        self.status_code = status;
        self.error = Some(text);
    }
}

impl LineParser for OpencodeParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        let Some(v) = json_object(line) else {
            raw(line, out);
            return;
        };
        self.saw_anything = true;
        if self.session_id.is_none()
            && let Some(id) = str_at(&v, "sessionID")
        {
            self.session_id = Some(id.to_string());
            out.push(AgentEvent::Init {
                session_id: self.session_id.clone(),
                model: None,
            });
        }
        let part = v.get("part").unwrap_or(&Value::Null);
        match str_at(&v, "type") {
            Some("step_start") => {}
            Some("text") => {
                if let Some(text) = str_at(part, "text").filter(|t| !t.trim().is_empty()) {
                    self.last_text = Some(text.to_string());
                    out.push(AgentEvent::Text {
                        text: text.to_string(),
                    });
                }
            }
            Some("reasoning") => {
                if let Some(text) = str_at(part, "text").filter(|t| !t.trim().is_empty()) {
                    out.push(AgentEvent::Thinking {
                        text: text.to_string(),
                    });
                }
            }
            Some("tool_use") => self.tool_use(part, out),
            Some("step_finish") => {
                self.steps += 1;
                if let Some(cost) = part.get("cost").and_then(Value::as_f64) {
                    *self.cost.get_or_insert(0.0) += cost;
                }
                if let Some(usage) = part.get("tokens").and_then(opencode_usage) {
                    add_usage(self.usage.get_or_insert_with(TokenUsage::default), &usage);
                    out.push(AgentEvent::Usage { usage });
                }
            }
            Some("error") => self.fatal(&v, out),
            _ => raw(line, out),
        }
    }

    fn finish(&mut self, out: &mut Vec<AgentEvent>) {
        if !self.saw_anything {
            return;
        }
        let is_error = self.error.is_some();
        out.push(AgentEvent::Result {
            result: FinalResult {
                text: self
                    .error
                    .clone()
                    .or_else(|| self.last_text.clone())
                    .unwrap_or_default(),
                is_error,
                subtype: Some(if is_error { "error" } else { "success" }.to_string()),
                turns: Some(self.steps),
                usage: self.usage.clone(),
                cost_usd: self.cost,
                duration_ms: None,
                session_id: self.session_id.clone(),
                api_error_status: self.status_code,
                model: None,
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_tools_text_and_summed_cost() {
        let mut p = OpencodeParser::default();
        let mut out = Vec::new();
        for l in [
            r#"{"type":"step_start","timestamp":1,"sessionID":"ses_1","part":{"type":"step-start"}}"#,
            r#"{"type":"tool_use","timestamp":2,"sessionID":"ses_1","part":{"type":"tool","tool":"bash","callID":"c","state":{"status":"completed","input":{"command":"ls"},"output":"a\nb"}}}"#,
            r#"{"type":"step_finish","sessionID":"ses_1","part":{"type":"step-finish","cost":0.01,"tokens":{"input":10,"output":2,"reasoning":0,"cache":{"read":1,"write":0}}}}"#,
            r#"{"type":"text","sessionID":"ses_1","part":{"type":"text","text":"ok <promise>COMPLETE</promise>"}}"#,
            r#"{"type":"step_finish","sessionID":"ses_1","part":{"type":"step-finish","cost":0.02,"tokens":{"input":5,"output":1}}}"#,
        ] {
            p.parse_line(l, &mut out);
        }
        p.finish(&mut out);
        assert_eq!(
            out[0],
            AgentEvent::Init {
                session_id: Some("ses_1".into()),
                model: None
            }
        );
        assert_eq!(
            out[1],
            AgentEvent::ToolUse {
                name: "bash".into(),
                summary: "ls".into()
            }
        );
        assert_eq!(
            out[2],
            AgentEvent::ToolResult {
                is_error: false,
                summary: "a".into()
            }
        );
        assert!(matches!(out[3], AgentEvent::Usage { .. }));
        assert_eq!(
            out[4],
            AgentEvent::Text {
                text: "ok <promise>COMPLETE</promise>".into()
            }
        );
        let AgentEvent::Result { result } = out.last().unwrap() else {
            panic!("{out:?}")
        };
        assert_eq!(result.turns, Some(2));
        assert_eq!(
            result
                .usage
                .as_ref()
                .map(|u| (u.input, u.output, u.cache_read)),
            Some((15, 3, 1))
        );
        assert!((result.cost_usd.unwrap() - 0.03).abs() < 1e-9);
        assert_eq!(result.text, "ok <promise>COMPLETE</promise>");
    }
}
