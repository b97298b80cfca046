//! Output parsers: one per provider, each turning the agent's stdout, line by
//! line, into [`AgentEvent`]s. Parsers never fail: a line they don't understand
//! becomes [`AgentEvent::Raw`].

mod claude;
mod codex;
pub mod copilot;
mod cursor;
mod gemini;
mod json_str;
mod opencode;
mod pi;
mod qwen;
mod text;

pub use claude::ClaudeParser;
pub use codex::CodexParser;
pub use copilot::CopilotParser;
pub use cursor::CursorParser;
pub use gemini::GeminiParser;
pub use opencode::OpencodeParser;
pub use pi::PiParser;
pub use qwen::{QwenParser, QwenStderr};
pub use text::TextParser;

use crate::agent::{AgentEvent, AgentKind, TokenUsage};
use serde_json::Value;

/// Tool summaries and result summaries are cut to this many characters.
pub const SUMMARY_MAX_CHARS: usize = 100;

/// Turns one provider's stdout lines into events.
pub trait LineParser: Send {
    /// One line of stdout, without its line terminator.
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>);
    /// End of output: flush anything buffered (and, for agents with no final
    /// `result` line of their own, report the equivalent).
    fn finish(&mut self, _out: &mut Vec<AgentEvent>) {}
}

/// Every event a parser makes of `lines` and the end of output (for tests).
#[cfg(test)]
pub(crate) fn parse_all(mut parser: impl LineParser, lines: &[&str]) -> Vec<AgentEvent> {
    let mut out = Vec::new();
    for l in lines {
        parser.parse_line(l, &mut out);
    }
    parser.finish(&mut out);
    out
}

/// The parser for an agent's stdout.
pub fn parser_for(kind: AgentKind) -> Box<dyn LineParser> {
    match kind {
        AgentKind::Claude => Box::new(ClaudeParser::default()),
        AgentKind::Codex => Box::new(CodexParser::default()),
        AgentKind::Gemini => Box::new(GeminiParser::default()),
        AgentKind::Opencode => Box::new(OpencodeParser::default()),
        AgentKind::Cursor => Box::new(CursorParser),
        AgentKind::Copilot => Box::new(CopilotParser::default()),
        AgentKind::Pi => Box::new(PiParser::default()),
        AgentKind::Qwen => Box::new(QwenParser::default()),
        AgentKind::Amp | AgentKind::Custom => Box::new(TextParser),
        // An ACP agent's stdout is a conversation: the supervisor gives it
        // an `AcpSession` (this parser only reads what none could).
        _ => Box::new(TextParser),
    }
}

/// The reader of an agent's stderr: each line an [`AgentEvent::Stderr`] of
/// its own; qwen's also says when it waits out a rate limit (it says so
/// nowhere else).
pub fn stderr_parser_for(kind: AgentKind) -> Box<dyn LineParser> {
    match kind {
        AgentKind::Qwen => Box::new(QwenStderr),
        _ => Box::new(StderrLines),
    }
}

/// stderr read as lines, not parsed.
pub struct StderrLines;

impl LineParser for StderrLines {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        if !line.trim().is_empty() {
            out.push(AgentEvent::Stderr {
                line: line.to_string(),
            });
        }
    }
}

/// Parses a line that should be a JSON object; `None` (keep it raw) otherwise.
pub(crate) fn json_object(line: &str) -> Option<Value> {
    let trimmed = line.trim_start();
    if !trimmed.starts_with('{') {
        return None;
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(v @ Value::Object(_)) => Some(v),
        _ => None,
    }
}

/// A raw event for a line (empty lines produce nothing).
pub(crate) fn raw(line: &str, out: &mut Vec<AgentEvent>) {
    if !line.trim().is_empty() {
        out.push(AgentEvent::Raw {
            line: line.to_string(),
        });
    }
}

pub(crate) fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

pub(crate) fn u64_at(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(|x| {
        x.as_u64()
            .or_else(|| x.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
    })
}

/// Collapses `text` to one line (whitespace runs become one space) of at most
/// `max` characters, ending with `…` when cut.
pub fn one_line(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max * 4) + 3);
    let mut chars = 0usize;
    let mut pending_space = false;
    for c in text.chars() {
        if c.is_whitespace() || c.is_control() {
            pending_space = chars > 0;
            continue;
        }
        if pending_space {
            if chars + 1 >= max {
                out.push('…');
                return out;
            }
            out.push(' ');
            chars += 1;
            pending_space = false;
        }
        if chars >= max {
            out.push('…');
            return out;
        }
        out.push(c);
        chars += 1;
    }
    out
}

/// A one-line summary of a tool's input: the field a human would want to see
/// (the command, the file, the pattern), else the compact JSON.
pub fn summarize_tool_input(input: &Value) -> String {
    const KEYS: [&str; 14] = [
        "command",
        "cmd",
        "file_path",
        "filePath",
        "path",
        "notebook_path",
        "pattern",
        "query",
        "url",
        "description",
        "prompt",
        "subject",
        "skill",
        "todos",
    ];
    match input {
        Value::Object(map) => {
            for key in KEYS {
                match map.get(key) {
                    Some(Value::String(s)) if !s.trim().is_empty() => {
                        return one_line(s, SUMMARY_MAX_CHARS);
                    }
                    Some(Value::Array(items)) if key == "todos" => {
                        return format!("{} todos", items.len());
                    }
                    Some(Value::Array(items)) if !items.is_empty() => {
                        let words: Vec<String> = items
                            .iter()
                            .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string))
                            .collect();
                        return one_line(&words.join(" "), SUMMARY_MAX_CHARS);
                    }
                    _ => {}
                }
            }
            // serde_json's map keeps keys sorted (no preserve_order), so this is deterministic.
            if let Some(s) = map
                .values()
                .find_map(|v| v.as_str().filter(|s| !s.trim().is_empty()))
            {
                return one_line(s, SUMMARY_MAX_CHARS);
            }
            if map.is_empty() {
                String::new()
            } else {
                one_line(&input.to_string(), SUMMARY_MAX_CHARS)
            }
        }
        Value::String(s) => one_line(s, SUMMARY_MAX_CHARS),
        Value::Null => String::new(),
        other => one_line(&other.to_string(), SUMMARY_MAX_CHARS),
    }
}

/// The first non-empty line of a tool's output (a string, or Claude's list of
/// content blocks), as a one-line summary.
pub fn summarize_tool_output(content: &Value) -> String {
    match content {
        Value::String(s) => first_line(s),
        Value::Array(blocks) => blocks
            .iter()
            .find_map(|b| match b {
                Value::String(s) => Some(first_line(s)),
                _ => str_at(b, "text").map(first_line),
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_default(),
        Value::Null => String::new(),
        Value::Object(map) => ["text", "message", "stdout", "output", "content", "stderr"]
            .iter()
            .find_map(|k| str_at(content, k).filter(|s| !s.trim().is_empty()))
            .or_else(|| {
                map.values()
                    .find_map(|v| v.as_str().filter(|s| !s.trim().is_empty()))
            })
            .map(first_line)
            .unwrap_or_else(|| one_line(&content.to_string(), SUMMARY_MAX_CHARS)),
        other => one_line(&other.to_string(), SUMMARY_MAX_CHARS),
    }
}

fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| one_line(l, SUMMARY_MAX_CHARS))
        .unwrap_or_default()
}

/// The message of an agent's error, for people: colour codes stripped, and
/// when the text carries a JSON error body (`{"error": {"message": …}}`,
/// Gemini's `[API Error: {…}]`) its message, with the HTTP code when given.
pub fn error_message(raw: &str) -> String {
    let text = crate::text::strip(raw);
    let text = text.trim();
    if let Some(start) = text.find('{') {
        let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        if let Some(Ok(v)) = values.next()
            && let Some(message) = json_error_message(&v)
        {
            // Keep what came before the body ("API Error: 500"), if anything.
            let before = text[..start]
                .trim()
                .trim_matches(|c: char| c == '[' || c == ':');
            return if before.trim().is_empty() {
                message
            } else {
                format!("{}: {message}", before.trim())
            };
        }
    }
    text.to_string()
}

fn json_error_message(v: &Value) -> Option<String> {
    let err = match v.get("error") {
        Some(e) if e.is_object() => e,
        _ => v,
    };
    let message = str_at(err, "message").filter(|m| !m.trim().is_empty())?;
    Some(match err.get("code").and_then(Value::as_u64) {
        Some(code) => format!("{} (HTTP {code})", message.trim()),
        None => message.trim().to_string(),
    })
}

/// A shell command without the `bash -lc '…'` wrapper agents put around it
/// (Codex runs every command as `/bin/bash -lc '<command>'`).
pub fn unwrap_shell(command: &str) -> String {
    let trimmed = command.trim();
    let mut words = trimmed.splitn(3, ' ');
    let (Some(shell), Some(flag), Some(rest)) = (words.next(), words.next(), words.next()) else {
        return trimmed.to_string();
    };
    let shell = shell.rsplit('/').next().unwrap_or(shell);
    if !matches!(shell, "bash" | "sh" | "zsh" | "dash") || !matches!(flag, "-c" | "-lc") {
        return trimmed.to_string();
    }
    let rest = rest.trim();
    if rest.len() >= 2 && rest.starts_with('\'') && rest.ends_with('\'') {
        rest[1..rest.len() - 1].replace("'\\''", "'")
    } else if rest.len() >= 2 && rest.starts_with('"') && rest.ends_with('"') {
        rest[1..rest.len() - 1]
            .replace("\\\"", "\"")
            .replace("\\\\", "\\")
    } else {
        rest.to_string()
    }
}

/// Reads a Claude-style usage object (`input_tokens` without cached tokens,
/// `cache_read_input_tokens`, `cache_creation_input_tokens`); also accepts
/// OpenCode's `input` / `cache.read` naming. Agents whose `input_tokens`
/// include cached tokens (Codex, Gemini) have readers of their own.
pub(crate) fn usage_from(v: &Value) -> Option<TokenUsage> {
    if !v.is_object() {
        return None;
    }
    let pick = |keys: &[&str]| keys.iter().find_map(|k| u64_at(v, k));
    let cache = v.get("cache");
    let usage = TokenUsage {
        input: pick(&["input_tokens", "input", "prompt_tokens"]).unwrap_or(0),
        output: pick(&[
            "output_tokens",
            "output",
            "completion_tokens",
            "candidates_tokens",
        ])
        .unwrap_or(0),
        cache_read: pick(&[
            "cache_read_input_tokens",
            "cached_input_tokens",
            "cached",
            "cache_read",
        ])
        .or_else(|| cache.and_then(|c| u64_at(c, "read")))
        .unwrap_or(0),
        cache_creation: pick(&["cache_creation_input_tokens", "cache_write"])
            .or_else(|| cache.and_then(|c| u64_at(c, "write")))
            .unwrap_or(0),
    };
    Some(usage)
}

pub(crate) fn add_usage(total: &mut TokenUsage, more: &TokenUsage) {
    total.input += more.input;
    total.output += more.output;
    total.cache_read += more.cache_read;
    total.cache_creation += more.cache_creation;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_unknown_event_type_is_one_raw_line_for_every_agent() {
        let line = r#"{"type":"brand_new_event","payload":{"x":1}}"#;
        for kind in [
            AgentKind::Claude,
            AgentKind::Codex,
            AgentKind::Gemini,
            AgentKind::Opencode,
            AgentKind::Cursor,
            AgentKind::Copilot,
            AgentKind::Pi,
            AgentKind::Qwen,
            AgentKind::Amp,
        ] {
            let mut parser = parser_for(kind);
            let mut out = Vec::new();
            parser.parse_line(line, &mut out);
            let raws: Vec<&AgentEvent> = out
                .iter()
                .filter(|e| matches!(e, AgentEvent::Raw { line: l } if l == line))
                .collect();
            assert_eq!(raws.len(), 1, "{kind:?}: {out:?}");
            assert!(
                out.iter()
                    .all(|e| matches!(e, AgentEvent::Raw { .. } | AgentEvent::Init { .. })),
                "{kind:?}: {out:?}"
            );
        }
    }

    #[test]
    fn error_messages_read_json_bodies() {
        assert_eq!(
            error_message(
                r#"{"error": {"message": "Invalid request: mock says no.", "type": "x", "code": "invalid_request"}}"#
            ),
            "Invalid request: mock says no."
        );
        assert_eq!(
            error_message(
                r#"[API Error: {"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT"}}]"#
            ),
            "API Error: Request contains an invalid argument. (HTTP 400)"
        );
        assert_eq!(
            error_message("\u{1b}[31mplain words\u{1b}[0m\n"),
            "plain words"
        );
        assert_eq!(error_message("not {json"), "not {json");
    }

    #[test]
    fn one_line_collapses_and_cuts() {
        assert_eq!(one_line("  a\n  b\tc  ", 100), "a b c");
        let long = "x".repeat(150);
        let cut = one_line(&long, 100);
        assert_eq!(cut.chars().count(), 101);
        assert!(cut.ends_with('…'));
        assert_eq!(one_line("", 10), "");
    }

    #[test]
    fn tool_input_summaries_pick_the_useful_field() {
        assert_eq!(
            summarize_tool_input(&json!({"command": "cargo test", "timeout": 5})),
            "cargo test"
        );
        assert_eq!(
            summarize_tool_input(&json!({"file_path": "/a/b.rs"})),
            "/a/b.rs"
        );
        assert_eq!(
            summarize_tool_input(&json!({"todos": [1, 2, 3]})),
            "3 todos"
        );
        assert_eq!(summarize_tool_input(&json!({"zzz": "value"})), "value");
        assert_eq!(summarize_tool_input(&json!({"n": 3})), "{\"n\":3}");
        assert_eq!(
            summarize_tool_input(&json!({"command": ["ls", "-la"]})),
            "ls -la"
        );
        assert_eq!(summarize_tool_input(&json!({"command": "a\nb"})), "a b");
    }

    #[test]
    fn tool_output_summaries_take_the_first_line() {
        assert_eq!(
            summarize_tool_output(&json!("\n\n  ok: 3 passed\nmore")),
            "ok: 3 passed"
        );
        assert_eq!(
            summarize_tool_output(&json!([{"type": "text", "text": "hello\nworld"}])),
            "hello"
        );
        assert_eq!(summarize_tool_output(&json!(null)), "");
    }

    #[test]
    fn usage_reads_every_naming() {
        let u = usage_from(
            &json!({"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 5,
            "cache_creation_input_tokens": 1, "new_field": true}),
        )
        .unwrap();
        assert_eq!(
            u,
            TokenUsage {
                input: 10,
                output: 2,
                cache_read: 5,
                cache_creation: 1
            }
        );
        let u =
            usage_from(&json!({"input_tokens": 10, "cached_input_tokens": 4, "output_tokens": 3}))
                .unwrap();
        assert_eq!(u.cache_read, 4);
        let u = usage_from(
            &json!({"input": 7, "output": 1, "reasoning": 0, "cache": {"read": 2, "write": 3}}),
        )
        .unwrap();
        assert_eq!(
            u,
            TokenUsage {
                input: 7,
                output: 1,
                cache_read: 2,
                cache_creation: 3
            }
        );
    }
}
