//! Codex CLI `exec --json` (tested against codex 0.169.0). Codex has no final
//! `result` line and reports no cost: at the end of output the parser reports
//! the equivalent, built from the last agent message and the summed turn
//! usage.
//!
//! Errors: codex prints a top-level `error` line both for a retry it is about
//! to make ("Reconnecting... 1/3 (…429 Too Many Requests)") and for a fatal
//! one; only `turn.failed` (which follows a fatal `error`) ends the run as
//! failed. A retry is an [`AgentEvent::ApiRetry`], never an error or a rate
//! limit; a rate limit is one only when the turn failed on it.
//!
//! Tokens: codex's `input_tokens` counts every input token, cached ones
//! included; the receipt's `input` is what is left after taking out
//! `cached_input_tokens` (cache reads) and `cache_write_input_tokens`.
//!
//! Turns: codex does not show its model round trips, so none are reported.

use super::{
    LineParser, SUMMARY_MAX_CHARS, add_usage, error_message, json_object, one_line, raw, str_at,
    u64_at, unwrap_shell,
};
use crate::agent::ratelimit::rate_limit_in_text;
use crate::agent::{AgentEvent, FinalResult, TokenUsage};
use serde_json::Value;

#[derive(Debug, Default)]
pub struct CodexParser {
    session_id: Option<String>,
    last_message: Option<String>,
    usage: Option<TokenUsage>,
    /// The message of the `turn.failed` that ended the run.
    failed: Option<String>,
    /// The last `error` line's message, until `turn.failed` repeats it (so
    /// it is shown once).
    last_error: Option<String>,
    saw_anything: bool,
}

/// Codex's usage object, converted to the receipt's meaning (see module docs).
fn codex_usage(v: &Value) -> Option<TokenUsage> {
    if !v.is_object() {
        return None;
    }
    let all_input = u64_at(v, "input_tokens").unwrap_or(0);
    let cache_read = u64_at(v, "cached_input_tokens").unwrap_or(0);
    let cache_creation = u64_at(v, "cache_write_input_tokens").unwrap_or(0);
    Some(TokenUsage {
        input: all_input.saturating_sub(cache_read.saturating_add(cache_creation)),
        output: u64_at(v, "output_tokens").unwrap_or(0),
        cache_read,
        cache_creation,
    })
}

/// "Reconnecting... 1/3 (…)" (0.169), or older codex's "stream error: …;
/// retrying 1/5 in 200ms…": codex is about to retry; `(attempt, max)`.
fn reconnecting(message: &str) -> Option<(Option<u64>, Option<u64>)> {
    let rest = match message.trim_start().strip_prefix("Reconnecting") {
        Some(rest) => rest,
        None => {
            let at = message.find("; retrying ")?;
            &message[at + "; retrying ".len()..]
        }
    };
    let rest = rest.trim_start_matches(['.', '…', ' ']);
    let counts: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '/')
        .collect();
    let mut parts = counts.split('/').map(|n| n.parse::<u64>().ok());
    Some((parts.next().flatten(), parts.next().flatten()))
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
            Some("turn.started") | Some("item.updated") => {}
            Some("turn.completed") => {
                if let Some(usage) = v.get("usage").and_then(codex_usage) {
                    add_usage(self.usage.get_or_insert_with(TokenUsage::default), &usage);
                    out.push(AgentEvent::Usage { usage });
                }
            }
            Some("error") => {
                let message = str_at(&v, "message").unwrap_or("unknown error").to_string();
                if let Some((attempt, max_retries)) = reconnecting(&message) {
                    out.push(AgentEvent::ApiRetry {
                        attempt,
                        max_retries,
                        delay_ms: None,
                        message: Some(message),
                    });
                } else {
                    out.push(AgentEvent::Raw {
                        line: format!("error: {}", error_message(&message)),
                    });
                    self.last_error = Some(message);
                }
            }
            Some("turn.failed") => {
                let message = v
                    .get("error")
                    .and_then(|e| str_at(e, "message"))
                    .or_else(|| str_at(&v, "message"))
                    .unwrap_or("unknown error")
                    .to_string();
                if let Some(limit) = rate_limit_in_text(&message) {
                    out.push(AgentEvent::RateLimit { limit });
                }
                if self.last_error.as_deref() != Some(message.as_str()) {
                    out.push(AgentEvent::Raw {
                        line: format!("error: {}", error_message(&message)),
                    });
                }
                self.failed = Some(message);
            }
            Some("item.started") => item_started(&v, out),
            Some("item.completed") => self.item_completed(&v, line, out),
            _ => raw(line, out),
        }
    }

    fn finish(&mut self, out: &mut Vec<AgentEvent>) {
        if !self.saw_anything {
            return;
        }
        let is_error = self.failed.is_some();
        let text = match (&self.failed, &self.last_message) {
            // The error is the answer: the loop shows it and reads limits from it.
            (Some(failed), _) => failed.clone(),
            (None, Some(message)) => message.clone(),
            (None, None) => String::new(),
        };
        out.push(AgentEvent::Result {
            result: FinalResult {
                text,
                is_error,
                subtype: Some(if is_error { "error" } else { "success" }.to_string()),
                turns: None,
                usage: self.usage.clone(),
                cost_usd: None,
                duration_ms: None,
                session_id: self.session_id.clone(),
                api_error_status: None,
                model: None,
            },
        });
    }
}

impl CodexParser {
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
                // The command and its exit code: the output's first line is
                // often shell start-up noise.
                let code = item.get("exit_code").and_then(Value::as_i64);
                let failed =
                    str_at(item, "status") == Some("failed") || code.is_some_and(|c| c != 0);
                let command = one_line(&command_text(item), SUMMARY_MAX_CHARS);
                let summary = match code {
                    Some(code) if command.is_empty() => format!("exit {code}"),
                    Some(code) => format!("exit {code} · {command}"),
                    None => command,
                };
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
                if str_at(item, "status") == Some("failed") {
                    out.push(AgentEvent::ToolResult {
                        is_error: true,
                        summary: "edit failed".to_string(),
                    });
                }
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
            // An error item is a warning codex goes on after (a model it has
            // no metadata for, a truncated output): shown, not fatal.
            Some("error") => {
                let message = str_at(item, "message").unwrap_or("unknown error");
                out.push(AgentEvent::Raw {
                    line: format!("warning: {}", error_message(message)),
                });
            }
            _ => raw(line, out),
        }
    }
}

/// The command of a `command_execution` item (a string, or an argv list in
/// some versions), without its shell wrapper.
fn command_text(item: &Value) -> String {
    match item.get("command") {
        Some(Value::String(s)) => unwrap_shell(s),
        Some(Value::Array(words)) => {
            let words: Vec<&str> = words.iter().filter_map(Value::as_str).collect();
            match words.as_slice() {
                [shell, flag, command]
                    if matches!(*flag, "-c" | "-lc")
                        && matches!(
                            shell.rsplit('/').next(),
                            Some("bash" | "sh" | "zsh" | "dash")
                        ) =>
                {
                    command.to_string()
                }
                _ => words.join(" "),
            }
        }
        _ => String::new(),
    }
}

fn item_started(v: &Value, out: &mut Vec<AgentEvent>) {
    let Some(item) = v.get("item") else { return };
    match str_at(item, "type") {
        Some("command_execution") => out.push(AgentEvent::ToolUse {
            name: "shell".to_string(),
            summary: one_line(&command_text(item), SUMMARY_MAX_CHARS),
        }),
        Some("mcp_tool_call") => {
            let name = str_at(item, "tool").unwrap_or("mcp").to_string();
            let summary = item
                .get("arguments")
                .map(super::summarize_tool_input)
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

    fn result(events: &[AgentEvent]) -> &FinalResult {
        match events.last() {
            Some(AgentEvent::Result { result }) => result,
            _ => panic!("no result last: {events:?}"),
        }
    }

    #[test]
    fn a_whole_run() {
        let events = parse(&[
            r#"{"type":"thread.started","thread_id":"th_1"}"#,
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.started","item":{"id":"i1","type":"command_execution","command":"bash -lc 'cargo test'","status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"bash -lc 'cargo test'","aggregated_output":"pyenv: noise\nerror[E0425]: x\n","exit_code":101,"status":"failed"}}"#,
            r#"{"type":"item.completed","item":{"id":"i2","type":"file_change","changes":[{"path":"src/a.rs","kind":"update"}],"status":"completed"}}"#,
            r#"{"type":"item.completed","item":{"id":"i3","type":"reasoning","text":"thinking"}}"#,
            r#"{"type":"item.completed","item":{"id":"i4","type":"agent_message","text":"All done.\n<promise>COMPLETE</promise>"}}"#,
            r#"{"type":"item.completed","item":{"id":"i5","type":"brand_new_item"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":40,"cache_write_input_tokens":10,"output_tokens":7}}"#,
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
                summary: "cargo test".into()
            }
        );
        assert_eq!(
            events[2],
            AgentEvent::ToolResult {
                is_error: true,
                summary: "exit 101 · cargo test".into()
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
        // Uncached input: 100 - 40 read - 10 written.
        assert_eq!(
            events[7],
            AgentEvent::Usage {
                usage: TokenUsage {
                    input: 50,
                    output: 7,
                    cache_read: 40,
                    cache_creation: 10
                }
            }
        );
        let r = result(&events);
        assert_eq!(r.text, "All done.\n<promise>COMPLETE</promise>");
        assert!(!r.is_error);
        assert_eq!(r.turns, None, "codex does not show its round trips");
        assert_eq!(r.cost_usd, None);
        assert_eq!(r.usage.as_ref().map(|u| u.input), Some(50));
        assert_eq!(events.len(), 9);
    }

    #[test]
    fn a_fatal_error_is_shown_once_and_a_limit_only_when_the_turn_fails_on_it() {
        let events = parse(&[
            r#"{"type":"error","message":"You've hit your usage limit. Try again in 30s."}"#,
            r#"{"type":"turn.failed","error":{"message":"You've hit your usage limit. Try again in 30s."}}"#,
        ]);
        let raws = events
            .iter()
            .filter(|e| matches!(e, AgentEvent::Raw { .. }))
            .count();
        assert_eq!(raws, 1, "{events:?}");
        assert!(events.iter().any(
            |e| matches!(e, AgentEvent::RateLimit { limit } if limit.status == "rejected" && limit.resets_at.is_some())
        ));
        assert!(result(&events).is_error);
    }

    #[test]
    fn a_recovered_retry_is_neither_an_error_nor_a_limit() {
        let events = parse(&[
            r#"{"type":"error","message":"Reconnecting... 2/5 (exceeded retry limit, last status: 429 Too Many Requests)"}"#,
            r#"{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"ok"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}"#,
        ]);
        assert!(matches!(
            &events[0],
            AgentEvent::ApiRetry { attempt: Some(2), max_retries: Some(5), message: Some(m), .. } if m.contains("429")
        ));
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, AgentEvent::RateLimit { .. } | AgentEvent::Raw { .. }))
        );
        assert!(!result(&events).is_error);
    }

    #[test]
    fn older_retry_wording_is_a_retry_too() {
        let events = parse(&[
            r#"{"type":"error","message":"stream error: connection reset; retrying 2/5 in 400ms…"}"#,
        ]);
        assert!(matches!(
            &events[0],
            AgentEvent::ApiRetry {
                attempt: Some(2),
                max_retries: Some(5),
                ..
            }
        ));
    }

    #[test]
    fn argv_commands_and_wrappers() {
        let item: Value = serde_json::json!({"command": ["/bin/bash", "-lc", "ls -la"]});
        assert_eq!(command_text(&item), "ls -la");
        let item: Value = serde_json::json!({"command": ["git", "status"]});
        assert_eq!(command_text(&item), "git status");
        let item: Value = serde_json::json!({"command": "/bin/bash -lc \"echo \\\"hi\\\"\""});
        assert_eq!(command_text(&item), "echo \"hi\"");
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
