//! OpenCode `run --format json`: `step_start`, `text`, `tool_use` (the whole
//! call, with its state), `step_finish` (tokens and cost per step), `error`.
//! No final line: at the end the parser reports the equivalent, with the
//! summed tokens and cost.

use super::{
    LineParser, add_usage, json_object, raw, str_at, summarize_tool_input, summarize_tool_output,
    usage_from,
};
use crate::agent::ratelimit::rate_limit_in_text;
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
    saw_anything: bool,
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
            Some("tool_use") => {
                let state = part.get("state").unwrap_or(&Value::Null);
                out.push(AgentEvent::ToolUse {
                    name: str_at(part, "tool").unwrap_or("tool").to_string(),
                    summary: state
                        .get("input")
                        .map(summarize_tool_input)
                        .unwrap_or_default(),
                });
                match str_at(state, "status") {
                    Some("completed") => out.push(AgentEvent::ToolResult {
                        is_error: false,
                        summary: state
                            .get("output")
                            .map(summarize_tool_output)
                            .unwrap_or_default(),
                    }),
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
            Some("step_finish") => {
                self.steps += 1;
                if let Some(cost) = part.get("cost").and_then(Value::as_f64) {
                    *self.cost.get_or_insert(0.0) += cost;
                }
                if let Some(usage) = part.get("tokens").and_then(usage_from) {
                    add_usage(self.usage.get_or_insert_with(TokenUsage::default), &usage);
                    out.push(AgentEvent::Usage { usage });
                }
            }
            Some("error") => {
                let err = v.get("error").unwrap_or(&Value::Null);
                let message = str_at(err, "message")
                    .or_else(|| err.get("data").and_then(|d| str_at(d, "message")))
                    .or_else(|| str_at(err, "name"))
                    .unwrap_or("unknown error")
                    .to_string();
                if let Some(limit) = rate_limit_in_text(&message) {
                    out.push(AgentEvent::RateLimit { limit });
                }
                out.push(AgentEvent::Raw {
                    line: format!("error: {message}"),
                });
                self.error = Some(message);
            }
            _ => raw(line, out),
        }
    }

    fn finish(&mut self, out: &mut Vec<AgentEvent>) {
        if !self.saw_anything {
            return;
        }
        out.push(AgentEvent::Result {
            result: FinalResult {
                text: self
                    .last_text
                    .clone()
                    .or_else(|| self.error.clone())
                    .unwrap_or_default(),
                is_error: self.error.is_some(),
                subtype: Some(
                    if self.error.is_some() {
                        "error"
                    } else {
                        "success"
                    }
                    .to_string(),
                ),
                turns: Some(self.steps),
                usage: self.usage.clone(),
                cost_usd: self.cost,
                duration_ms: None,
                session_id: self.session_id.clone(),
                api_error_status: None,
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
