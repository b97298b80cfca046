//! The fake agent as an ACP agent (installed as `*-acp`, or given `--acp`
//! or `acp`): JSON-RPC over stdio. It answers `initialize` and
//! `session/new`, takes its prompt from `session/prompt`, says what it does
//! as `session/update` notifications, asks permission before each write
//! (and does not write when refused), and answers the prompt with its stop
//! reason; then it reads to the end of its input.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Stdin, Write};

pub struct AcpIo {
    reader: BufReader<Stdin>,
    prompt_id: Value,
    pub session: String,
    next_id: u64,
    /// A `session/cancel` came: the turn ends as cancelled.
    pub cancelled: bool,
}

fn send(out: &mut impl Write, v: &Value) {
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

/// Reads messages until `session/prompt`: the conversation and the prompt.
pub fn handshake() -> std::io::Result<(AcpIo, String)> {
    let mut reader = BufReader::new(std::io::stdin());
    let mut out = std::io::stdout();
    let session = format!("fake-acp-{}", std::process::id());
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(std::io::Error::other("stdin ended before session/prompt"));
        }
        let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
            continue;
        };
        let id = v["id"].clone();
        match v["method"].as_str().unwrap_or_default() {
            "initialize" => send(
                &mut out,
                &json!({"jsonrpc": "2.0", "id": id, "result": {
                    "protocolVersion": 1,
                    "agentCapabilities": {"loadSession": false},
                    "authMethods": [],
                }}),
            ),
            "session/new" => send(
                &mut out,
                &json!({"jsonrpc": "2.0", "id": id, "result": {"sessionId": session}}),
            ),
            "session/prompt" => {
                let prompt = v["params"]["prompt"]
                    .as_array()
                    .map(|blocks| {
                        blocks
                            .iter()
                            .filter_map(|b| b["text"].as_str())
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default();
                let io = AcpIo {
                    reader,
                    prompt_id: id,
                    session,
                    next_id: 100,
                    cancelled: false,
                };
                return Ok((io, prompt));
            }
            _ => {}
        }
    }
}

impl AcpIo {
    pub fn update(&self, out: &mut impl Write, update: Value) {
        send(
            out,
            &json!({"jsonrpc": "2.0", "method": "session/update",
                "params": {"sessionId": self.session, "update": update}}),
        );
    }

    /// Asks to run a tool call (`call`: its `toolCall` fields); true when
    /// allowed.
    pub fn may(&mut self, out: &mut impl Write, call: Value) -> bool {
        let id = self.next_id;
        self.next_id += 1;
        send(
            out,
            &json!({"jsonrpc": "2.0", "id": id, "method": "session/request_permission", "params": {
                "sessionId": self.session,
                "toolCall": call,
                "options": [
                    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
                ],
            }}),
        );
        let mut line = String::new();
        loop {
            line.clear();
            match self.reader.read_line(&mut line) {
                Ok(0) | Err(_) => return false,
                Ok(_) => {}
            }
            let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
                continue;
            };
            if v["method"] == "session/cancel" {
                self.cancelled = true;
                return false;
            }
            if v["id"] == id {
                return v["result"]["outcome"]["optionId"] == "allow";
            }
        }
    }

    /// Answers the prompt: the turn is over.
    pub fn end(&mut self, out: &mut impl Write, stop: &str) {
        let stop = if self.cancelled { "cancelled" } else { stop };
        send(
            out,
            &json!({"jsonrpc": "2.0", "id": self.prompt_id, "result": {"stopReason": stop}}),
        );
    }

    /// Reads to the end of its input (the client closes it after the turn).
    pub fn drain(&mut self) {
        let mut line = String::new();
        while self.reader.read_line(&mut line).is_ok_and(|n| n > 0) {
            line.clear();
        }
    }
}
