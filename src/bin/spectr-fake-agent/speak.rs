//! The fake agent's output formats: what it prints for each thing it does,
//! in the words of the CLI it stands in for. Its scenarios (the steps) live
//! in the main file and never print themselves.
//!
//! - `Claude`: Claude Code's stream-json (the default);
//! - `Text`: plain lines (`--format text`);
//! - `Copilot`, `Pi`, `Qwen`: the JSON lines of GitHub Copilot CLI
//!   (`--output-format json`), pi (`--mode json`) and Qwen Code (`-o
//!   stream-json`), shaped like their recorded streams in
//!   `tests/fixtures/agent-streams/`. Installed under the CLI's name, the
//!   fake speaks its format, and behaves like it where it matters to spectr:
//!   copilot denies every tool call without `--allow-all` (and writes tokens
//!   to `--usage-output-file` at exit), qwen withholds its write tools
//!   without `--yolo` and waits out a 429 on stderr until `--max-wall-time`
//!   (exit 55), pi exits 0 when every model call failed.

use serde_json::{Value, json};
use std::io::{BufWriter, Stdout, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Claude,
    Text,
    Copilot,
    Pi,
    Qwen,
    /// The Agent Client Protocol (see `acp.rs`).
    Acp,
}

/// What the command line says about how to speak and what is allowed.
pub struct Invocation {
    pub format: Format,
    /// Whether tool calls may run: copilot needs `--allow-all` (or `--yolo`,
    /// `--allow-all-tools`), qwen `--yolo` (or `--approval-mode yolo`).
    pub tools_allowed: bool,
    pub usage_file: Option<PathBuf>,
    /// qwen's `--max-wall-time`.
    pub max_wall_time: Option<Duration>,
}

impl Invocation {
    /// `program` is how the fake was called (its file name picks the
    /// format), `args` the rest.
    pub fn read(program: &str, args: &[String]) -> Invocation {
        let name = std::path::Path::new(program)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let has = |flag: &str| {
            args.iter()
                .any(|a| a == flag || a.strip_prefix(flag).is_some_and(|r| r.starts_with('=')))
        };
        let value = |flag: &str| {
            args.iter().enumerate().find_map(|(i, a)| {
                if a == flag {
                    args.get(i + 1).cloned()
                } else {
                    a.strip_prefix(flag)
                        .and_then(|r| r.strip_prefix('='))
                        .map(str::to_string)
                }
            })
        };
        let text = ["--format", "--output-format"]
            .iter()
            .any(|f| value(f).as_deref() == Some("text"));
        let acp =
            name.ends_with("-acp") || has("--acp") || args.first().is_some_and(|a| a == "acp");
        let format = match name {
            _ if acp => Format::Acp,
            _ if text => Format::Text,
            "copilot" => Format::Copilot,
            "pi" => Format::Pi,
            "qwen" => Format::Qwen,
            _ => Format::Claude,
        };
        let tools_allowed = match format {
            Format::Copilot => has("--allow-all") || has("--yolo") || has("--allow-all-tools"),
            Format::Qwen => {
                has("--yolo") || has("-y") || value("--approval-mode").as_deref() == Some("yolo")
            }
            _ => true,
        };
        Invocation {
            format,
            tools_allowed,
            usage_file: value("--usage-output-file").map(PathBuf::from),
            max_wall_time: value("--max-wall-time").and_then(|v| {
                v.trim_end_matches('s')
                    .parse::<u64>()
                    .ok()
                    .map(Duration::from_secs)
            }),
        }
    }
}

/// Tokens of one fake model call (pi and qwen report them per message).
const CALL_INPUT: u64 = 100;
const CALL_CACHED: u64 = 50;
const CALL_OUTPUT: u64 = 20;

pub struct Speaker {
    out: BufWriter<Stdout>,
    pub format: Format,
    inv: Invocation,
    session: String,
    started: Instant,
    turns: u64,
    messages: u64,
    /// Claude: the result's `total_cost_usd`; pi: each message's cost.
    pub cost: f64,
    /// Tool calls are refused (no permission flag, or a `deny_tools` step).
    pub denied: bool,
    pub result_sent: bool,
    /// pi: a retry announced, to be closed when the run succeeds.
    pi_retrying: bool,
    pub exit_code: i32,
    /// ACP: the conversation with the client.
    pub acp: Option<crate::acp::AcpIo>,
}

impl Speaker {
    pub fn new(inv: Invocation, session: String) -> Speaker {
        Speaker {
            out: BufWriter::with_capacity(256 * 1024, std::io::stdout()),
            format: inv.format,
            denied: !inv.tools_allowed,
            inv,
            session,
            started: Instant::now(),
            turns: 0,
            messages: 0,
            cost: 0.0123,
            result_sent: false,
            pi_retrying: false,
            exit_code: 0,
            acp: None,
        }
    }

    pub fn flush(&mut self) {
        let _ = self.out.flush();
    }

    fn emit(&mut self, v: &Value) {
        let _ = serde_json::to_writer(&mut self.out, v);
        let _ = self.out.write_all(b"\n");
    }

    /// A Claude-format line: as serde_json writes it for Claude (the fake's
    /// way since it began), `"type"` first for qwen (its own way).
    fn emit_claude(&mut self, mut v: Value) {
        if self.format != Format::Qwen {
            self.emit(&v);
            return;
        }
        let kind = v
            .as_object_mut()
            .and_then(|m| m.remove("type"))
            .and_then(|k| k.as_str().map(str::to_string))
            .unwrap_or_default();
        self.typed(&kind, &v);
    }

    /// A line with `"type"` first, the way copilot, pi and qwen write their
    /// lines (serde_json sorts keys): `v` holds the other fields.
    fn typed(&mut self, kind: &str, v: &Value) {
        let rest = v.to_string();
        let rest = rest.strip_prefix('{').unwrap_or("}");
        let sep = if rest == "}" { "" } else { "," };
        let _ = writeln!(self.out, "{{\"type\":{}{sep}{rest}", json!(kind));
    }

    pub fn println(&mut self, line: &str) {
        let _ = writeln!(self.out, "{line}");
    }

    pub fn write_raw(&mut self, bytes: &[u8]) {
        let _ = self.out.write_all(bytes);
    }

    fn copilot(&mut self, kind: &str, data: Value) {
        let v = json!({"data": data, "id": format!("ev-{}", self.messages),
            "timestamp": "2026-11-25T07:45:31.026Z"});
        self.typed(kind, &v);
    }

    /// The start of the run: the format's header lines, with the prompt
    /// echoed where the real CLI echoes it.
    pub fn init(&mut self, prompt: &str) {
        let cwd = std::env::current_dir()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        match self.format {
            // The session was opened in the handshake.
            Format::Text | Format::Acp => {}
            Format::Claude => {
                let v = json!({"type": "system", "subtype": "init", "session_id": self.session, "model": "fake-model",
                    "cwd": cwd, "tools": ["Bash", "Read", "Write", "Edit"], "permissionMode": "default"});
                self.emit(&v);
            }
            Format::Copilot => {
                self.copilot("session.mcp_servers_loaded", json!({"servers": []}));
                self.copilot("session.tools_updated", json!({"model": "fake-model"}));
                self.copilot(
                    "user.message",
                    json!({"content": prompt, "transformedContent": prompt}),
                );
            }
            Format::Pi => {
                self.typed(
                    "session",
                    &json!({"version": 3, "id": self.session, "cwd": cwd}),
                );
                self.typed("agent_start", &json!({}));
                self.typed("turn_start", &json!({}));
                let user = json!({"role": "user", "content": [{"type": "text", "text": prompt}]});
                self.typed("message_start", &json!({"message": user}));
                self.typed("message_end", &json!({"message": user}));
            }
            Format::Qwen => {
                let mut tools = vec!["read_file", "glob", "grep_search", "web_fetch"];
                if !self.denied {
                    tools.extend(["write_file", "edit", "run_shell_command"]);
                }
                let mode = if self.denied { "default" } else { "yolo" };
                self.typed(
                    "system",
                    &json!({"subtype": "init", "uuid": self.session,
                    "session_id": self.session, "cwd": cwd, "tools": tools, "mcp_servers": [],
                    "model": "fake-model", "permission_mode": mode, "qwen_code_version": "0.24.4"}),
                );
                self.typed("stream_event", &json!({"session_id": self.session,
                    "event": {"type": "goal_state", "goal_state": {"goal": null, "activity": "idle"}}}));
            }
        }
        self.flush();
    }

    fn claude_assistant(&mut self, content: Value, usage: Value) {
        self.messages += 1;
        let v = json!({"type": "assistant", "message": {"id": format!("msg_{}", self.messages), "type": "message",
            "role": "assistant", "model": "fake-model", "content": [content],
            "usage": usage}, "session_id": self.session});
        self.emit_claude(v);
    }

    fn pi_usage(&self) -> Value {
        json!({"input": CALL_INPUT, "output": CALL_OUTPUT, "cacheRead": CALL_CACHED, "cacheWrite": 0,
            "totalTokens": CALL_INPUT + CALL_OUTPUT + CALL_CACHED,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": self.cost}})
    }

    fn pi_assistant(&mut self, content: Value, stop: &str) {
        self.messages += 1;
        let message = json!({"role": "assistant", "content": content, "api": "openai-completions",
            "provider": "fake", "model": "fake-model", "usage": self.pi_usage(), "stopReason": stop});
        self.typed(
            "message_start",
            &json!({"message": {"role": "assistant", "content": []}}),
        );
        self.typed(
            "message_update",
            &json!({"message": message,
            "assistantMessageEvent": {"type": "text_delta", "delta": ""}}),
        );
        self.typed("message_end", &json!({"message": message}));
    }

    /// An assistant message of text.
    /// ACP: one `session/update`.
    fn acp_update(&mut self, update: Value) {
        let _ = self.out.flush();
        if let Some(io) = &self.acp {
            io.update(&mut std::io::stdout(), update);
        }
    }

    /// ACP: whether the client lets a write to `path` happen (asked as a
    /// tool call); every other format: yes.
    pub fn may_write(&mut self, path: &str) -> bool {
        let _ = self.out.flush();
        let abs = std::env::current_dir().map_or_else(|_| path.into(), |d| d.join(path));
        // Not a model call: the count copilot's usage file reports stays.
        let call = format!("call-{}-{}", self.messages, self.turns);
        match &mut self.acp {
            Some(io) => io.may(
                &mut std::io::stdout(),
                json!({"toolCallId": call, "title": format!("Write {path}"), "kind": "edit",
                    "locations": [{"path": abs.display().to_string()}]}),
            ),
            None => true,
        }
    }

    /// ACP: whether the client lets `command` run; every other format: yes.
    pub fn may_run(&mut self, command: &str) -> bool {
        let _ = self.out.flush();
        let call = format!("call-{}-{}", self.messages, self.turns);
        match &mut self.acp {
            Some(io) => io.may(
                &mut std::io::stdout(),
                json!({"toolCallId": call, "title": command, "kind": "execute",
                    "rawInput": {"command": command}}),
            ),
            None => true,
        }
    }

    pub fn say(&mut self, text: &str) {
        self.turns += 1;
        match self.format {
            Format::Acp => self.acp_update(json!({"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": format!("{text}\n")}})),
            Format::Text => {
                for l in text.lines() {
                    self.println(l);
                }
            }
            Format::Claude => self.claude_assistant(
                json!({"type": "text", "text": text}),
                json!({"input_tokens": 100, "output_tokens": 20}),
            ),
            Format::Qwen => self.claude_assistant(
                json!({"type": "text", "text": text}),
                json!({"input_tokens": CALL_INPUT + CALL_CACHED, "output_tokens": CALL_OUTPUT,
                    "cache_read_input_tokens": CALL_CACHED}),
            ),
            Format::Copilot => {
                self.messages += 1;
                self.copilot(
                    "assistant.turn_start",
                    json!({"turnId": self.turns.to_string()}),
                );
                self.copilot("assistant.message_delta", json!({"deltaContent": text}));
                self.copilot(
                    "assistant.message",
                    json!({"model": "fake-model", "content": text, "toolRequests": []}),
                );
                self.copilot(
                    "assistant.turn_end",
                    json!({"turnId": self.turns.to_string()}),
                );
            }
            Format::Pi => {
                self.pi_assistant(json!([{"type": "text", "text": text}]), "stop");
                self.typed("turn_end", &json!({"toolResults": []}));
            }
        }
    }

    /// Assistant text in bulk (the `flood` step): as plain text does it, one
    /// message per call for the JSON formats.
    pub fn flood_text(&mut self, text: &str) {
        match self.format {
            Format::Text => self.write_raw(text.as_bytes()),
            Format::Claude => self.claude_assistant(
                json!({"type": "text", "text": text}),
                json!({"input_tokens": 100, "output_tokens": 20}),
            ),
            _ => self.say(text),
        }
    }

    /// A tool call and its output; refused instead when tools are denied.
    pub fn tool(&mut self, name: &str, input: &str, output: &str, is_error: bool) {
        self.turns += 1;
        let denied = self.denied;
        match self.format {
            Format::Acp => {
                let id = format!("tool-{}", self.messages);
                self.messages += 1;
                let kind = match name {
                    "Write" | "Edit" => "edit",
                    "Bash" => "execute",
                    "Read" => "read",
                    _ => "other",
                };
                self.acp_update(json!({"sessionUpdate": "tool_call", "toolCallId": id,
                    "title": format!("{name} {input}"), "kind": kind, "status": "pending"}));
                self.acp_update(
                    json!({"sessionUpdate": "tool_call_update", "toolCallId": id,
                    "status": if is_error { "failed" } else { "completed" },
                    "content": [{"type": "content", "content": {"type": "text", "text": output}}]}),
                );
            }
            Format::Text => {
                self.println(&format!("$ {name} {input}"));
                for l in output.lines() {
                    self.println(l);
                }
            }
            Format::Claude | Format::Qwen => {
                let (name, key) = match (self.format, name) {
                    (Format::Qwen, "Bash") => ("run_shell_command", "command"),
                    (Format::Qwen, "Write") => ("write_file", "file_path"),
                    (Format::Qwen, "Edit") => ("edit", "file_path"),
                    (_, "Bash") => ("Bash", "command"),
                    (_, "Read" | "Write" | "Edit") => (name, "file_path"),
                    _ => (name, "input"),
                };
                let id = format!("toolu_{}", self.messages + 1);
                let usage = if self.format == Format::Qwen {
                    json!({"input_tokens": CALL_INPUT + CALL_CACHED, "output_tokens": CALL_OUTPUT,
                        "cache_read_input_tokens": CALL_CACHED})
                } else {
                    json!({"input_tokens": 100, "output_tokens": 20})
                };
                self.claude_assistant(
                    json!({"type": "tool_use", "id": id, "name": name, "input": {key: input}}),
                    usage,
                );
                let (content, is_error) = if denied {
                    (format!("Tool \"{name}\" not found in registry."), true)
                } else {
                    (output.to_string(), is_error)
                };
                let v = json!({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result",
                    "tool_use_id": id, "content": content, "is_error": is_error}]}, "session_id": self.session});
                self.emit_claude(v);
            }
            Format::Copilot => {
                self.messages += 1;
                let id = format!("call_{}", self.messages);
                let (name, key) = match name {
                    "Bash" => ("bash", "command"),
                    "Write" => ("create", "path"),
                    "Edit" => ("edit", "path"),
                    other => (other, "input"),
                };
                self.copilot(
                    "assistant.turn_start",
                    json!({"turnId": self.turns.to_string()}),
                );
                self.copilot(
                    "assistant.message",
                    json!({"model": "fake-model", "content": "",
                    "toolRequests": [{"toolCallId": id, "name": name, "arguments": {key: input}}]}),
                );
                self.copilot(
                    "tool.execution_start",
                    json!({"toolCallId": id, "toolName": name}),
                );
                let done = if denied {
                    json!({"toolCallId": id, "success": false, "error": {"code": "denied",
                        "message": "Permission denied because no interactive user response was available."}})
                } else if is_error {
                    json!({"toolCallId": id, "success": false, "error": {"code": "failure", "message": output}})
                } else {
                    json!({"toolCallId": id, "success": true, "result": {"content": output}})
                };
                self.copilot("tool.execution_complete", done);
                self.copilot(
                    "assistant.turn_end",
                    json!({"turnId": self.turns.to_string()}),
                );
            }
            Format::Pi => {
                let id = format!("call_{}", self.messages + 1);
                let (name, key) = match name {
                    "Bash" => ("bash", "command"),
                    "Write" => ("write", "path"),
                    "Edit" => ("edit", "path"),
                    other => (other, "input"),
                };
                self.pi_assistant(
                    json!([{"type": "toolCall", "id": id, "name": name, "arguments": {key: input}}]),
                    "toolUse",
                );
                self.typed(
                    "tool_execution_start",
                    &json!({"toolCallId": id, "toolName": name}),
                );
                let result = json!({"content": [{"type": "text", "text": output}]});
                self.typed(
                    "tool_execution_end",
                    &json!({"toolCallId": id, "toolName": name,
                    "result": result, "isError": is_error}),
                );
                self.typed("turn_end", &json!({"toolResults": []}));
                self.typed("turn_start", &json!({}));
            }
        }
    }

    /// The final answer (or error) of the run.
    pub fn result(&mut self, text: &str, is_error: bool, api_error_status: Option<u16>) {
        self.result_sent = true;
        match self.format {
            Format::Acp => {
                let _ = api_error_status;
                self.acp_update(json!({"sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": text}}));
                let stop = if is_error { "refusal" } else { "end_turn" };
                if let Some(io) = &mut self.acp {
                    io.end(&mut std::io::stdout(), stop);
                }
            }
            Format::Text => {
                for l in text.lines() {
                    self.println(l);
                }
            }
            Format::Claude | Format::Qwen => {
                if self.format == Format::Qwen && !is_error {
                    // qwen's final answer is an assistant message too.
                    self.say(text);
                }
                let turns = self.turns.max(1);
                let mut v = if self.format == Format::Claude {
                    json!({"type": "result", "subtype": "success", "is_error": is_error, "result": text,
                        "num_turns": turns, "duration_ms": self.started.elapsed().as_millis() as u64,
                        "duration_api_ms": 1, "total_cost_usd": self.cost, "session_id": self.session,
                        "permission_denials": [],
                        "usage": {"input_tokens": 1000 * turns, "output_tokens": 200 * turns,
                            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 500 * turns}})
                } else {
                    // qwen: tokens (cached ones inside input_tokens), no cost.
                    json!({"type": "result", "subtype": "success", "is_error": is_error, "result": text,
                        "num_turns": turns, "duration_ms": self.started.elapsed().as_millis() as u64,
                        "session_id": self.session, "permission_denials": [],
                        "usage": {"input_tokens": (CALL_INPUT + CALL_CACHED) * turns,
                            "output_tokens": CALL_OUTPUT * turns, "cache_read_input_tokens": CALL_CACHED * turns}})
                };
                if let Some(status) = api_error_status {
                    v["api_error_status"] = json!(status);
                }
                self.emit_claude(v);
            }
            Format::Copilot => {
                if is_error {
                    let status = api_error_status.unwrap_or(500);
                    self.copilot(
                        "session.error",
                        json!({"errorType": "query", "message": text, "statusCode": status}),
                    );
                    self.exit_code = 1;
                } else {
                    self.say(text);
                }
            }
            Format::Pi => {
                if is_error {
                    let status = api_error_status.unwrap_or(500);
                    self.pi_error(&format!("{status} {text}"));
                } else {
                    self.say(text);
                }
            }
        }
    }

    fn pi_error(&mut self, message: &str) {
        let m = json!({"role": "assistant", "content": [], "model": "fake-model",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                "cost": {"total": 0}},
            "stopReason": "error", "errorMessage": message});
        self.typed("message_end", &json!({"message": m}));
        self.typed("turn_end", &json!({"toolResults": []}));
    }

    /// A 429 the agent retried and got past (copilot: one `turn_retry`; pi:
    /// `auto_retry_start`; qwen: `system/retry` and its stderr line).
    pub fn retried_429(&mut self, secs: u64) {
        let message = format!("429 Rate limit reached. Please try again in {secs}s.");
        match self.format {
            Format::Claude | Format::Text | Format::Acp => {}
            Format::Copilot => {
                self.copilot(
                    "model.call_failure",
                    json!({"model": "fake-model", "statusCode": 429, "errorMessage": message}),
                );
                self.copilot(
                    "assistant.turn_retry",
                    json!({"model": "fake-model", "reason": "rate_limit"}),
                );
            }
            Format::Pi => {
                self.pi_error(&message);
                self.typed(
                    "auto_retry_start",
                    &json!({"attempt": 1, "maxAttempts": 3,
                    "delayMs": secs * 1000, "errorMessage": message}),
                );
                self.pi_retrying = true;
            }
            Format::Qwen => {
                self.typed("system", &json!({"subtype": "retry", "session_id": self.session,
                    "data": {"reason": "retry", "attempt": 1, "maxRetries": 10, "delayMs": secs * 1000}}));
                self.flush();
                eprintln!("Retrying in {secs}s (attempt 1/10): [API Error: {message}]");
            }
        }
        self.flush();
    }

    /// Every model call answers 429: the agent gives up as the real one does
    /// (qwen never does: it waits until its `--max-wall-time`, or until it is
    /// stopped). Claude and text: a usage limit resetting in `secs`.
    pub fn rate_limited(&mut self, secs: u64, resets_at: u64) {
        let message = format!("429 Rate limit reached. Please try again in {secs}s.");
        match self.format {
            Format::Text => {
                self.println(&format!("Usage limit reached|{resets_at}"));
                self.exit_code = 1;
            }
            // ACP names no rate limits: the prompt fails with the words.
            Format::Acp => {
                self.result(
                    &format!("Usage limit reached|{resets_at} ({message})"),
                    true,
                    None,
                );
            }
            Format::Claude => {
                let v = json!({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected",
                    "resets_at": resets_at, "rate_limit_type": "five_hour", "utilization": 1.0},
                    "session_id": self.session});
                self.emit(&v);
                self.result(
                    &format!("Claude AI usage limit reached|{resets_at}"),
                    true,
                    Some(429),
                );
                self.exit_code = 1;
            }
            Format::Copilot => {
                for attempt in 0..6 {
                    self.copilot(
                        "model.call_failure",
                        json!({"model": "fake-model", "statusCode": 429, "retryAttempt": attempt,
                        "errorMessage": message}),
                    );
                    if attempt < 5 {
                        self.copilot(
                            "assistant.turn_retry",
                            json!({"model": "fake-model", "reason": "rate_limit"}),
                        );
                    }
                }
                let text = format!(
                    "Failed to get response from the AI model; retried 5 times (total retry wait time: 0.1 seconds) Last error: {message}"
                );
                self.copilot(
                    "session.error",
                    json!({"errorType": "rate_limit", "message": text, "statusCode": 429}),
                );
                self.result_sent = true;
                self.exit_code = 1;
            }
            Format::Pi => {
                self.pi_error(&message);
                for attempt in 1..=3 {
                    self.typed(
                        "auto_retry_start",
                        &json!({"attempt": attempt, "maxAttempts": 3,
                        "delayMs": 10, "errorMessage": message}),
                    );
                    self.pi_error(&message);
                }
                self.typed(
                    "auto_retry_end",
                    &json!({"success": false, "attempt": 3,
                    "finalError": message}),
                );
                // pi exits 0 in --mode json all the same.
                self.result_sent = true;
            }
            Format::Qwen => {
                self.retried_429(secs);
                let limit = self.inv.max_wall_time;
                let waited = Instant::now();
                loop {
                    std::thread::sleep(Duration::from_millis(50));
                    if let Some(limit) = limit
                        && self.started.elapsed() >= limit
                    {
                        eprintln!(
                            "Run aborted: wall-clock budget of {}s exceeded (--max-wall-time).",
                            limit.as_secs()
                        );
                        std::process::exit(55);
                    }
                    if waited.elapsed() >= Duration::from_secs(3600) {
                        std::process::exit(1);
                    }
                }
            }
        }
    }

    /// The end of output; returns the exit code.
    pub fn finish(&mut self, last_text: &str) -> i32 {
        let text = if last_text.is_empty() {
            "Done."
        } else {
            last_text
        };
        match self.format {
            Format::Text => {}
            Format::Claude | Format::Qwen => {
                if !self.result_sent {
                    self.result(text, false, None);
                }
            }
            Format::Acp => {
                if !self.result_sent {
                    self.result(text, false, None);
                }
                self.flush();
                // The client closes its side once the turn is answered.
                if let Some(io) = &mut self.acp {
                    io.drain();
                }
            }
            Format::Copilot => {
                self.copilot("assistant.idle", json!({}));
                let code = self.exit_code;
                self.typed("result", &json!({"timestamp": "2026-11-25T07:45:31.430Z",
                    "sessionId": self.session, "exitCode": code,
                    "usage": {"premiumRequests": 0, "sessionDurationMs": self.started.elapsed().as_millis() as u64}}));
                self.write_usage_file();
            }
            Format::Pi => {
                if self.pi_retrying {
                    self.typed("auto_retry_end", &json!({"success": true, "attempt": 1}));
                }
                self.typed("agent_end", &json!({"messages": []}));
            }
        }
        self.flush();
        self.exit_code
    }

    /// copilot's `--usage-output-file`: tokens per model, cache reads inside
    /// `inputTokens`, cost in premium requests (not dollars).
    fn write_usage_file(&self) {
        let Some(path) = &self.inv.usage_file else {
            return;
        };
        let calls = self.messages.max(1);
        let usage = json!({"inputTokens": (CALL_INPUT + CALL_CACHED) * calls,
            "outputTokens": CALL_OUTPUT * calls, "cacheReadTokens": CALL_CACHED * calls, "cacheWriteTokens": 0});
        let v = json!({"totalPremiumRequestCost": 0, "totalUserRequests": 1, "totalNanoAiu": 0,
            "modelMetrics": {"fake-model": {"requests": {"count": calls, "cost": 0}, "usage": usage}},
            "currentModel": "fake-model"});
        if let Err(e) = std::fs::write(path, v.to_string()) {
            eprintln!("copilot: cannot write {}: {e}", path.display());
        }
    }
}
