//! Codex CLI `exec --json`. Codex has no final `result` line and reports no
//! cost: at the end of output the parser reports the equivalent, built from
//! the last agent message and the summed turn usage.

use super::{
    LineParser, SUMMARY_MAX_CHARS, add_usage, json_object, one_line, raw, str_at,
    summarize_tool_input, summarize_tool_output, usage_from,
};
use crate::agent::ratelimit::rate_limit_in_text;
use crate::agent::{AgentEvent, FinalResult, TokenUsage};
use serde_json::Value;

#[derive(Debug, Default)]
pub struct CodexParser {
    session_id: Option<String>,
    last_message: Option<String>,
    usage: Option<TokenUsage>,
    turns: u64,
    failed: Option<String>,
    saw_anything: bool,
}

impl LineParser for CodexParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        let Some(v) = json_object(line) else {
            raw(line, out);
            return;
        };
        self.saw_anything = true;
        match str_at(&v, "type") {
            Some("thread.started") => {
                self.session_id = str_at(&v, "thread_id").map(str::to_string);
                out.push(AgentEvent::Init {
                    session_id: self.session_id.clone(),
                    model: None,
                });
            }
            Some("turn.started") => {}
            Some("turn.completed") => {
                self.turns += 1;
                if let Some(usage) = v.get("usage").and_then(usage_from) {
                    add_usage(self.usage.get_or_insert_with(TokenUsage::default), &usage);
                    out.push(AgentEvent::Usage { usage });
                }
            }
            Some("turn.failed") | Some("error") => {
                let message = v
                    .get("error")
                    .and_then(|e| str_at(e, "message"))
                    .or_else(|| str_at(&v, "message"))
                    .unwrap_or("unknown error")
                    .to_string();
                self.error(message, out);
            }
            Some("item.started") => item_started(&v, out),
            Some("item.completed") => self.item_completed(&v, line, out),
            Some("item.updated") => {}
            _ => raw(line, out),
        }
    }

    fn finish(&mut self, out: &mut Vec<AgentEvent>) {
        if !self.saw_anything {
            return;
        }
        let text = self.last_message.clone().unwrap_or_default();
        out.push(AgentEvent::Result {
            result: FinalResult {
                text: if text.is_empty() {
                    self.failed.clone().unwrap_or_default()
                } else {
                    text
                },
                is_error: self.failed.is_some(),
                subtype: Some(
                    if self.failed.is_some() {
                        "error"
                    } else {
                        "success"
                    }
                    .to_string(),
                ),
                turns: Some(self.turns),
                usage: self.usage.clone(),
                cost_usd: None,
                duration_ms: None,
                session_id: self.session_id.clone(),
                api_error_status: None,
            },
        });
    }
}

impl CodexParser {
    fn error(&mut self, message: String, out: &mut Vec<AgentEvent>) {
        if let Some(limit) = rate_limit_in_text(&message) {
            out.push(AgentEvent::RateLimit { limit });
        }
        out.push(AgentEvent::Raw {
            line: format!("error: {message}"),
        });
        self.failed = Some(message);
    }

    fn item_completed(&mut self, v: &Value, line: &str, out: &mut Vec<AgentEvent>) {
        let Some(item) = v.get("item") else {
            raw(line, out);
            return;
        };
        match str_at(item, "type") {
            Some("agent_message") => {
                let text = str_at(item, "text").unwrap_or_default().to_string();
                if !text.is_empty() {
                    self.last_message = Some(text.clone());
                    out.push(AgentEvent::Text { text });
                }
            }
            Some("reasoning") => {
                if let Some(text) = str_at(item, "text").filter(|t| !t.is_empty()) {
                    out.push(AgentEvent::Thinking {
                        text: text.to_string(),
                    });
                }
            }
            Some("command_execution") => {
                let code = item.get("exit_code").and_then(Value::as_i64);
                let failed =
                    str_at(item, "status") == Some("failed") || code.is_some_and(|c| c != 0);
                let mut summary = item
                    .get("aggregated_output")
                    .map(summarize_tool_output)
                    .unwrap_or_default();
                if summary.is_empty()
                    && let Some(code) = code
                {
                    summary = format!("exit {code}");
                }
                out.push(AgentEvent::ToolResult {
                    is_error: failed,
                    summary,
                });
            }
            Some("file_change") => {
                let changes: Vec<String> = item
                    .get("changes")
                    .and_then(Value::as_array)
                    .map(|cs| {
                        cs.iter()
                            .map(|c| {
                                format!(
                                    "{} {}",
                                    str_at(c, "kind").unwrap_or("edit"),
                                    str_at(c, "path").unwrap_or("?")
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(AgentEvent::ToolUse {
                    name: "edit".to_string(),
                    summary: one_line(&changes.join(", "), SUMMARY_MAX_CHARS),
                });
            }
            Some("mcp_tool_call") => {
                let name = match (str_at(item, "server"), str_at(item, "tool")) {
                    (Some(s), Some(t)) => format!("{s}.{t}"),
                    (None, Some(t)) => t.to_string(),
                    _ => "mcp".to_string(),
                };
                let failed = str_at(item, "status") == Some("failed")
                    || item.get("error").is_some_and(|e| !e.is_null());
                out.push(AgentEvent::ToolResult {
                    is_error: failed,
                    summary: format!("{name} {}", if failed { "failed" } else { "done" }),
                });
            }
            Some("web_search") => out.push(AgentEvent::ToolUse {
                name: "web_search".to_string(),
                summary: one_line(str_at(item, "query").unwrap_or_default(), SUMMARY_MAX_CHARS),
            }),
            Some("todo_list") => {
                let n = item
                    .get("items")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                out.push(AgentEvent::ToolUse {
                    name: "todo".to_string(),
                    summary: format!("{n} items"),
                });
            }
            Some("error") => {
                let message = str_at(item, "message")
                    .unwrap_or("unknown error")
                    .to_string();
                out.push(AgentEvent::Raw {
                    line: format!("error: {message}"),
                });
            }
            _ => raw(line, out),
        }
    }
}

fn item_started(v: &Value, out: &mut Vec<AgentEvent>) {
    let Some(item) = v.get("item") else { return };
    match str_at(item, "type") {
        Some("command_execution") => out.push(AgentEvent::ToolUse {
            name: "shell".to_string(),
            summary: item
                .get("command")
                .map(summarize_tool_input)
                .unwrap_or_default(),
        }),
        Some("mcp_tool_call") => {
            let name = str_at(item, "tool").unwrap_or("mcp").to_string();
            let summary = item
                .get("arguments")
                .map(summarize_tool_input)
                .unwrap_or_default();
            out.push(AgentEvent::ToolUse { name, summary });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(lines: &[&str]) -> Vec<AgentEvent> {
        crate::agent::parse::parse_all(CodexParser::default(), lines)
    }

    #[test]
    fn a_whole_run() {
        let events = parse(&[
            r#"{"type":"thread.started","thread_id":"th_1"}"#,
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.started","item":{"id":"i1","type":"command_execution","command":"bash -lc 'cargo test'","status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"bash -lc 'cargo test'","aggregated_output":"error[E0425]: x\n","exit_code":101,"status":"failed"}}"#,
            r#"{"type":"item.completed","item":{"id":"i2","type":"file_change","changes":[{"path":"src/a.rs","kind":"update"}],"status":"completed"}}"#,
            r#"{"type":"item.completed","item":{"id":"i3","type":"reasoning","text":"thinking"}}"#,
            r#"{"type":"item.completed","item":{"id":"i4","type":"agent_message","text":"All done.\n<promise>COMPLETE</promise>"}}"#,
            r#"{"type":"item.completed","item":{"id":"i5","type":"brand_new_item"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":7}}"#,
        ]);
        assert_eq!(
            events[0],
            AgentEvent::Init {
                session_id: Some("th_1".into()),
                model: None
            }
        );
        assert_eq!(
            events[1],
            AgentEvent::ToolUse {
                name: "shell".into(),
                summary: "bash -lc 'cargo test'".into()
            }
        );
        assert_eq!(
            events[2],
            AgentEvent::ToolResult {
                is_error: true,
                summary: "error[E0425]: x".into()
            }
        );
        assert_eq!(
            events[3],
            AgentEvent::ToolUse {
                name: "edit".into(),
                summary: "update src/a.rs".into()
            }
        );
        assert_eq!(
            events[4],
            AgentEvent::Thinking {
                text: "thinking".into()
            }
        );
        assert_eq!(
            events[5],
            AgentEvent::Text {
                text: "All done.\n<promise>COMPLETE</promise>".into()
            }
        );
        assert!(matches!(&events[6], AgentEvent::Raw { line } if line.contains("brand_new_item")));
        assert_eq!(
            events[7],
            AgentEvent::Usage {
                usage: TokenUsage {
                    input: 100,
                    output: 7,
                    cache_read: 40,
                    cache_creation: 0
                }
            }
        );
        let AgentEvent::Result { result } = &events[8] else {
            panic!("{events:?}")
        };
        assert_eq!(result.text, "All done.\n<promise>COMPLETE</promise>");
        assert!(!result.is_error);
        assert_eq!(result.turns, Some(1));
        assert_eq!(result.cost_usd, None);
        assert_eq!(result.usage.as_ref().map(|u| u.input), Some(100));
        assert_eq!(events.len(), 9);
    }

    #[test]
    fn failures_and_usage_limits() {
        let events = parse(&[
            r#"{"type":"turn.failed","error":{"message":"You've hit your usage limit. Try again later."}}"#,
        ]);
        assert!(
            matches!(&events[0], AgentEvent::RateLimit { limit } if limit.status == "rejected")
        );
        assert!(matches!(&events[1], AgentEvent::Raw { line } if line.starts_with("error: ")));
        let AgentEvent::Result { result } = &events[2] else {
            panic!("{events:?}")
        };
        assert!(result.is_error);
    }

    #[test]
    fn no_output_means_no_result() {
        assert!(
            parse(&["just text"])
                .iter()
                .all(|e| matches!(e, AgentEvent::Raw { .. }))
        );
    }
}
