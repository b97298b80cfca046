//! Claude Code `--output-format stream-json --verbose`.

use super::{
    LineParser, json_object, raw, str_at, summarize_tool_input, summarize_tool_output, u64_at,
    usage_from,
};
use crate::agent::{AgentEvent, FinalResult, RateLimit, TokenUsage};
use serde_json::Value;
use std::borrow::Cow;

#[derive(Debug, Default)]
pub struct ClaudeParser {
    /// Claude repeats a message's usage on every content block of that
    /// message: report it once per message id.
    last_usage_message: Option<String>,
}

impl LineParser for ClaudeParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        if !self.parse_fast(line, out) {
            self.parse_generic(line, out);
        }
    }
}

impl ClaudeParser {
    /// Any line, read as a generic JSON tree.
    fn parse_generic(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        let Some(v) = json_object(line) else {
            raw(line, out);
            return;
        };
        match str_at(&v, "type") {
            Some("system") => system(&v, line, out),
            Some("assistant") => self.assistant(&v, line, out),
            Some("user") => user(&v, out),
            Some("rate_limit_event") => out.push(AgentEvent::RateLimit {
                limit: rate_limit(&v),
            }),
            Some("result") => out.push(AgentEvent::Result {
                result: final_result(&v),
            }),
            _ => raw(line, out),
        }
    }
}

/// Typed shapes of the bulk of Claude's output (assistant and user
/// messages): read without building a generic JSON tree. Unknown fields are
/// skipped; any surprise (a field of another type) fails the typed read and
/// the line takes the generic path instead.
mod fast {
    use serde::Deserialize;
    use serde_json::Value;
    use serde_json::value::RawValue;
    use std::borrow::Cow;

    #[derive(Deserialize)]
    pub struct Line<'a> {
        #[serde(rename = "type", borrow)]
        pub kind: Cow<'a, str>,
        #[serde(borrow)]
        pub message: Option<Message<'a>>,
    }

    #[derive(Deserialize)]
    pub struct Message<'a> {
        #[serde(borrow)]
        pub id: Option<Cow<'a, str>>,
        #[serde(borrow)]
        pub content: Option<Vec<Block<'a>>>,
        pub usage: Option<Usage>,
    }

    /// Texts stay as written (escapes and all) until one is wanted: see
    /// [`super::super::json_str`].
    #[derive(Deserialize)]
    pub struct Block<'a> {
        #[serde(rename = "type", borrow)]
        pub kind: Cow<'a, str>,
        #[serde(borrow)]
        pub text: Option<&'a RawValue>,
        #[serde(borrow)]
        pub thinking: Option<&'a RawValue>,
        pub name: Option<String>,
        pub input: Option<Value>,
        pub content: Option<Value>,
        pub is_error: Option<bool>,
    }

    #[derive(Deserialize)]
    pub struct Usage {
        pub input_tokens: Option<u64>,
        pub output_tokens: Option<u64>,
        pub cache_read_input_tokens: Option<u64>,
        pub cache_creation_input_tokens: Option<u64>,
    }
}

/// A block's text: `Some(None)` when absent, `None` when it is not a string
/// this fast path reads (the whole line then takes the generic path).
fn block_text(raw: Option<&serde_json::value::RawValue>) -> Option<Option<String>> {
    match raw {
        None => Some(None),
        Some(r) => super::json_str::unescape(r.get()).map(Some),
    }
}

impl ClaudeParser {
    /// The typed path for assistant and user lines; `false`: not handled here.
    fn parse_fast(&mut self, line: &str, out: &mut Vec<AgentEvent>) -> bool {
        if !line.trim_start().starts_with('{') {
            return false;
        }
        let Ok(parsed) = serde_json::from_str::<fast::Line>(line) else {
            return false;
        };
        let Some(message) = parsed.message else {
            return false;
        };
        let before = out.len();
        match parsed.kind.as_ref() {
            "assistant" => {
                for block in message.content.unwrap_or_default() {
                    match block.kind.as_ref() {
                        "text" => {
                            let Some(text) = block_text(block.text) else {
                                out.truncate(before);
                                return false;
                            };
                            if let Some(text) = text.filter(|t| !t.is_empty()) {
                                out.push(AgentEvent::Text { text });
                            }
                        }
                        "thinking" => {
                            let Some(text) = block_text(block.thinking) else {
                                out.truncate(before);
                                return false;
                            };
                            if let Some(text) = text.filter(|t| !t.is_empty()) {
                                out.push(AgentEvent::Thinking { text });
                            }
                        }
                        "tool_use" | "server_tool_use" => out.push(AgentEvent::ToolUse {
                            name: block.name.unwrap_or_else(|| "tool".to_string()),
                            summary: block
                                .input
                                .as_ref()
                                .map(summarize_tool_input)
                                .unwrap_or_default(),
                        }),
                        _ => {}
                    }
                }
                if let Some(u) = message.usage
                    && (message.id.is_none()
                        || message.id.as_deref() != self.last_usage_message.as_deref())
                {
                    self.last_usage_message = message.id.map(Cow::into_owned);
                    out.push(AgentEvent::Usage {
                        usage: TokenUsage {
                            input: u.input_tokens.unwrap_or(0),
                            output: u.output_tokens.unwrap_or(0),
                            cache_read: u.cache_read_input_tokens.unwrap_or(0),
                            cache_creation: u.cache_creation_input_tokens.unwrap_or(0),
                        },
                    });
                }
                if out.len() == before {
                    raw(line, out);
                }
                true
            }
            "user" => {
                for block in message.content.unwrap_or_default() {
                    if block.kind == "tool_result" {
                        out.push(AgentEvent::ToolResult {
                            is_error: block.is_error.unwrap_or(false),
                            summary: block
                                .content
                                .as_ref()
                                .map(summarize_tool_output)
                                .unwrap_or_default(),
                        });
                    }
                }
                true
            }
            _ => false,
        }
    }
}

fn system(v: &Value, line: &str, out: &mut Vec<AgentEvent>) {
    match str_at(v, "subtype") {
        Some("init") => out.push(AgentEvent::Init {
            session_id: str_at(v, "session_id").map(str::to_string),
            model: str_at(v, "model").map(str::to_string),
        }),
        Some("api_retry") => out.push(AgentEvent::ApiRetry {
            attempt: u64_at(v, "attempt"),
            max_retries: u64_at(v, "max_retries"),
            delay_ms: u64_at(v, "retry_delay_ms"),
            message: str_at(v, "error")
                .or_else(|| str_at(v, "message"))
                .map(str::to_string),
        }),
        _ => raw(line, out),
    }
}

impl ClaudeParser {
    fn assistant(&mut self, v: &Value, line: &str, out: &mut Vec<AgentEvent>) {
        let Some(message) = v.get("message") else {
            raw(line, out);
            return;
        };
        let before = out.len();
        match message.get("content") {
            Some(Value::Array(blocks)) => {
                for block in blocks {
                    content_block(block, out);
                }
            }
            Some(Value::String(text)) if !text.is_empty() => {
                out.push(AgentEvent::Text { text: text.clone() })
            }
            _ => {}
        }
        if let Some(usage) = message.get("usage").and_then(usage_from) {
            let id = str_at(message, "id").map(str::to_string);
            if id.is_none() || id != self.last_usage_message {
                self.last_usage_message = id;
                out.push(AgentEvent::Usage { usage });
            }
        }
        if out.len() == before {
            raw(line, out);
        }
    }
}

fn content_block(block: &Value, out: &mut Vec<AgentEvent>) {
    match str_at(block, "type") {
        Some("text") => {
            if let Some(text) = str_at(block, "text").filter(|t| !t.is_empty()) {
                out.push(AgentEvent::Text {
                    text: text.to_string(),
                });
            }
        }
        Some("thinking") => {
            if let Some(text) = str_at(block, "thinking").filter(|t| !t.is_empty()) {
                out.push(AgentEvent::Thinking {
                    text: text.to_string(),
                });
            }
        }
        Some("tool_use") | Some("server_tool_use") => out.push(AgentEvent::ToolUse {
            name: str_at(block, "name").unwrap_or("tool").to_string(),
            summary: block
                .get("input")
                .map(summarize_tool_input)
                .unwrap_or_default(),
        }),
        // Redacted thinking and future block types carry nothing to show.
        _ => {}
    }
}

fn user(v: &Value, out: &mut Vec<AgentEvent>) {
    // A user message is either tool output or a replay of our own prompt;
    // only tool results are worth an event (never read signals from either).
    let Some(Value::Array(blocks)) = v.get("message").and_then(|m| m.get("content")) else {
        return;
    };
    for block in blocks {
        if str_at(block, "type") == Some("tool_result") {
            out.push(AgentEvent::ToolResult {
                is_error: block
                    .get("is_error")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                summary: block
                    .get("content")
                    .map(summarize_tool_output)
                    .unwrap_or_default(),
            });
        }
    }
}

fn rate_limit(v: &Value) -> RateLimit {
    let info = v.get("rate_limit_info").unwrap_or(v);
    RateLimit {
        status: str_at(info, "status").unwrap_or("unknown").to_string(),
        resets_at: u64_at(info, "resets_at").or_else(|| u64_at(info, "resetsAt")),
        kind: str_at(info, "rate_limit_type")
            .or_else(|| str_at(info, "rateLimitType"))
            .map(str::to_string),
    }
}

fn final_result(v: &Value) -> FinalResult {
    let text = match v.get("result") {
        Some(Value::String(s)) => s.clone(),
        _ => str_at(v, "error").unwrap_or_default().to_string(),
    };
    FinalResult {
        text,
        is_error: v.get("is_error").and_then(Value::as_bool).unwrap_or(false),
        subtype: str_at(v, "subtype").map(str::to_string),
        turns: u64_at(v, "num_turns"),
        usage: v.get("usage").and_then(usage_from),
        cost_usd: v.get("total_cost_usd").and_then(Value::as_f64),
        duration_ms: u64_at(v, "duration_ms"),
        session_id: str_at(v, "session_id").map(str::to_string),
        api_error_status: u64_at(v, "api_error_status").and_then(|s| u16::try_from(s).ok()),
        model: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(lines: &[&str]) -> Vec<AgentEvent> {
        crate::agent::parse::parse_all(ClaudeParser::default(), lines)
    }

    #[test]
    fn init_text_tool_use_and_result() {
        let events = parse(&[
            r#"{"type":"system","subtype":"init","session_id":"s1","model":"claude-x","tools":["Bash"],"cwd":"/w","brand_new":1}"#,
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Looking."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cargo test","description":"run"}}],"usage":{"input_tokens":3,"output_tokens":1}},"session_id":"s1"}"#,
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"thinking","thinking":"hmm"}],"usage":{"input_tokens":3,"output_tokens":1}}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"test result: ok. 3 passed\n","is_error":false}]}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"boom"}],"is_error":true}]}}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"result":"Done.\n<promise>COMPLETE</promise>","num_turns":4,"duration_ms":41000,"duration_api_ms":39000,"total_cost_usd":0.084,"usage":{"input_tokens":12300,"output_tokens":2100,"cache_creation_input_tokens":10,"cache_read_input_tokens":20},"session_id":"s1","permission_denials":[],"future":{"x":1}}"#,
        ]);
        assert_eq!(
            events,
            vec![
                AgentEvent::Init {
                    session_id: Some("s1".into()),
                    model: Some("claude-x".into())
                },
                AgentEvent::Text {
                    text: "Looking.".into()
                },
                AgentEvent::ToolUse {
                    name: "Bash".into(),
                    summary: "cargo test".into()
                },
                AgentEvent::Usage {
                    usage: TokenUsage {
                        input: 3,
                        output: 1,
                        cache_read: 0,
                        cache_creation: 0
                    }
                },
                AgentEvent::Thinking { text: "hmm".into() },
                AgentEvent::ToolResult {
                    is_error: false,
                    summary: "test result: ok. 3 passed".into()
                },
                AgentEvent::ToolResult {
                    is_error: true,
                    summary: "boom".into()
                },
                AgentEvent::Result {
                    result: FinalResult {
                        text: "Done.\n<promise>COMPLETE</promise>".into(),
                        is_error: false,
                        subtype: Some("success".into()),
                        turns: Some(4),
                        usage: Some(TokenUsage {
                            input: 12300,
                            output: 2100,
                            cache_read: 20,
                            cache_creation: 10
                        }),
                        cost_usd: Some(0.084),
                        duration_ms: Some(41000),
                        session_id: Some("s1".into()),
                        api_error_status: None,
                        model: None,
                    }
                },
            ]
        );
    }

    #[test]
    fn retries_rate_limits_and_api_errors() {
        let events = parse(&[
            r#"{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1500}"#,
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resets_at":1700000000,"rate_limit_type":"five_hour","utilization":1.0}}"#,
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: 429"}"#,
        ]);
        assert_eq!(
            events[0],
            AgentEvent::ApiRetry {
                attempt: Some(2),
                max_retries: Some(10),
                delay_ms: Some(1500),
                message: None,
            }
        );
        assert_eq!(
            events[1],
            AgentEvent::RateLimit {
                limit: RateLimit {
                    status: "rejected".into(),
                    resets_at: Some(1_700_000_000),
                    kind: Some("five_hour".into())
                }
            }
        );
        let AgentEvent::Result { result } = &events[2] else {
            panic!("{events:?}")
        };
        assert!(result.is_error);
        assert_eq!(result.api_error_status, Some(429));
        assert_eq!(result.cost_usd, None);
    }

    #[test]
    fn typed_and_generic_paths_agree() {
        let lines = [
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"a\nb"},{"type":"tool_use","id":"t","name":"Read","input":{"file_path":"x.rs"}},{"type":"new_block","x":1}],"usage":{"input_tokens":3,"output_tokens":1,"cache_creation":{"ephemeral_5m_input_tokens":0},"service_tier":"standard"}},"parent_tool_use_id":null}"#,
            r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"redacted_thinking","data":"x"}]}}"#,
            r#"{"type":"assistant","message":{"id":"m3","content":[{"type":"thinking","thinking":"t","signature":"s"}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"out"}],"is_error":null}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"hello"}]}}"#,
        ];
        for line in lines {
            let mut fast = Vec::new();
            assert!(
                ClaudeParser::default().parse_fast(line, &mut fast),
                "{line}"
            );
            let mut generic = Vec::new();
            ClaudeParser::default().parse_generic(line, &mut generic);
            assert_eq!(fast, generic, "{line}");
        }
        // Shapes the typed path does not take fall back to the generic one.
        let mut out = Vec::new();
        assert!(!ClaudeParser::default().parse_fast(
            r#"{"type":"assistant","message":{"content":"plain"}}"#,
            &mut out
        ));
        assert!(!ClaudeParser::default().parse_fast(r#"{"type":"result","result":"x"}"#, &mut out));
        assert!(out.is_empty());
    }

    proptest::proptest! {
        /// Whatever a block's text looks like (escapes of every kind, not a
        /// string at all), the typed path or its fallback reads a line as the
        /// generic path does.
        #[test]
        fn texts_of_any_shape_read_as_the_generic_path_reads_them(
            text in "[a-z \"\\\\/\n\t\r\u{1}\u{e9}\u{20ac}\u{1f600}]{0,30}",
            kind in proptest::sample::select(vec!["text", "thinking", "tool_use", "other"]),
            shape in 0u8..5,
        ) {
            let value = match shape {
                0 => serde_json::to_string(&text).expect("serialize"),
                1 => text.chars().map(|c| {
                    let mut units = [0u16; 2];
                    c.encode_utf16(&mut units).iter().map(|u| format!("\\u{u:04x}")).collect::<String>()
                }).collect::<String>().pipe_quote(),
                2 => "null".to_string(),
                3 => "17".to_string(),
                _ => format!("[{}]", serde_json::to_string(&text).expect("serialize")),
            };
            let line = format!(
                r#"{{"type":"assistant","message":{{"id":"m","content":[{{"type":"{kind}","text":{value},"thinking":{value},"name":"n"}}],"usage":{{"input_tokens":1}}}}}}"#
            );
            let mut both = Vec::new();
            ClaudeParser::default().parse_line(&line, &mut both);
            let mut generic = Vec::new();
            ClaudeParser::default().parse_generic(&line, &mut generic);
            proptest::prop_assert_eq!(both, generic, "{}", line);
        }
    }

    trait PipeQuote {
        fn pipe_quote(self) -> String;
    }

    impl PipeQuote for String {
        fn pipe_quote(self) -> String {
            format!("\"{self}\"")
        }
    }

    #[test]
    fn unknown_types_and_garbage_stay_raw() {
        let lines = [
            r#"{"type":"system","subtype":"hook_started","hook":"x"}"#,
            r#"{"type":"something_new","x":1}"#,
            "plain text warning",
            "{not json",
            r#"{"type":"result","result":null,"is_error":"weird"}"#,
            "",
        ];
        let events = parse(&lines);
        assert_eq!(
            events[0],
            AgentEvent::Raw {
                line: lines[0].into()
            }
        );
        assert_eq!(
            events[1],
            AgentEvent::Raw {
                line: lines[1].into()
            }
        );
        assert_eq!(
            events[2],
            AgentEvent::Raw {
                line: lines[2].into()
            }
        );
        assert_eq!(
            events[3],
            AgentEvent::Raw {
                line: lines[3].into()
            }
        );
        // A result with odd field types is still a result.
        assert!(
            matches!(&events[4], AgentEvent::Result { result } if !result.is_error && result.text.is_empty())
        );
        assert_eq!(events.len(), 5);
    }

    #[test]
    fn prompt_replay_in_user_message_is_not_an_event() {
        let events = parse(&[
            r#"{"type":"user","message":{"role":"user","content":"Task ID: 1.1 <promise>COMPLETE</promise>"}}"#,
        ]);
        assert!(events.is_empty());
    }
}
