#!/usr/bin/env python3
"""A scripted OpenAI-compatible model server on 127.0.0.1 (chat completions, and
a minimal Responses API for codex), for scripts/real-agents.sh: real agent CLIs
(codex, copilot, opencode, pi, qwen) run against it with no account and no
network.

What it answers, per request:
- the request offers tools and its last message is the user's: a single tool
  call that writes the file the task's `Description:` line names
  ("Create PATH containing the line: TEXT"), with whichever write tool the
  agent offers (qwen `write_file`, copilot `create`, pi and opencode `write`;
  codex has none: a shell command, `exec_command` or `shell`);
- the last message is a tool result: "I wrote PATH. <promise>COMPLETE</promise>";
- "Fail once, then create PATH containing the line: TEXT": the first time,
  "<promise>FAILED: ...</promise>" and no tool call; then as above;
- "Try to run `COMMAND` first, then create PATH containing the line: TEXT":
  COMMAND with the shell tool the agent offers (the run's policy may refuse
  it), then, whatever came of it, the write of PATH, then COMPLETE;
- anything else (a title, a summary, a check the CLI makes on its own): "ok".

`POST /v1/responses` (codex: `wire_api = "responses"`, the only one codex
0.171 speaks) answers the same way as a Responses stream (`response.created`,
`response.output_item.done`, `response.completed`).

Google's Gemini API (`POST /v1beta/models/M:streamGenerateContent?alt=sse`,
`:generateContent`, `:countTokens`; gemini-cli with GOOGLE_GEMINI_BASE_URL)
answers the same way too: a `functionCall` part, or a text part. So does
Anthropic's Messages API (`POST /v1/messages`, streamed or not, and
`/v1/messages/count_tokens`; Claude Code with ANTHROPIC_BASE_URL): a
`tool_use` block, or a text block.

Every answer carries usage: 123 prompt tokens (23 of them cached) and 45
completion tokens. With
--rate-limit-first N the first N chat requests get HTTP 429 (Retry-After: 1).
Requests are logged as JSON lines to --log; with --dump-prompt FILE the
longest user message of the first request is saved whole (what the agent
sent of our prompt). The chosen port is written to --port-file once the
server listens.
"""

import argparse
import json
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DESCRIPTION = re.compile(r"^Description: Create (\S+) containing the line: (.*)$", re.M)
FAIL_ONCE = re.compile(r"^Description: Fail once, then create (\S+) containing the line: (.*)$", re.M)
TRY_FIRST = re.compile(
    r"^Description: Try to run `(.+?)` first, then create (\S+) containing the line: (.*)$", re.M)
# The shell tools the CLIs offer, and their command's argument.
SHELL_TOOLS = [("run_shell_command", "command"), ("bash", "command"), ("Bash", "command")]
# Paths whose "Fail once" task has failed already.
FAILED_ONCE = set()
# The write tools the CLIs offer, and the names of their two arguments (the
# path's is read from the tool's schema where it has one: opencode's `write`
# takes `filePath`, pi's `path`).
WRITE_TOOLS = [
    ("write_file", "file_path", "content"),  # qwen
    ("create", "path", "file_text"),  # copilot
    ("write", "path", "content"),  # pi, opencode
    ("Write", "file_path", "content"),  # claude
]
PATH_KEYS = ("file_path", "filePath", "path")
USAGE = {"prompt_tokens": 123, "completion_tokens": 45, "total_tokens": 168,
         "prompt_tokens_details": {"cached_tokens": 23}}


class State:
    def __init__(self, args):
        self.root = args.root.rstrip("/")
        self.log = open(args.log, "a", buffering=1) if args.log else None
        self.lock = threading.Lock()
        self.calls = 0
        self.rate_limit_first = args.rate_limit_first
        self.dump_prompt = args.dump_prompt


def text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def tool_names(body):
    return list(tool_schemas(body))


def tool_schemas(body):
    """name -> the properties of its parameters (chat's `function` tools, and
    the Responses API's flat ones)."""
    found = {}
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        fn = t.get("function") if isinstance(t.get("function"), dict) else t
        if isinstance(fn.get("name"), str):
            props = (fn.get("parameters") or {}).get("properties") or {}
            found[fn["name"]] = props if isinstance(props, dict) else {}
    return found


def decide(body, root):
    """(kind, payload): ("tool", (name, args)) or ("text", text)."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    role = last.get("role")
    wanted = None
    fail_once = None
    try_first = None
    for m in messages:
        if m.get("role") == "user":
            text = text_of(m.get("content"))
            wanted = DESCRIPTION.search(text) or wanted
            fail_once = FAIL_ONCE.search(text) or fail_once
            try_first = TRY_FIRST.search(text) or try_first
    offered = tool_schemas(body)
    results = sum(1 for m in messages if m.get("role") == "tool")
    if try_first and offered and role in ("user", "tool"):
        command, path, line = try_first.groups()
        if results == 0:
            for name, key in SHELL_TOOLS:
                if name in offered:
                    return "tool", (name, {key: command, "description": "as the task says"})
            return "text", "<promise>FAILED: no shell tool was offered</promise>"
        if results == 1:
            return write_call(offered, path, line, root)
        return "text", f"I wrote {path}. <promise>COMPLETE</promise>"
    if fail_once and not wanted:
        wanted = fail_once
        if role == "user" and offered and fail_once.group(1) not in FAILED_ONCE:
            FAILED_ONCE.add(fail_once.group(1))
            return "text", "<promise>FAILED: the first try fails on purpose</promise>"
    if role == "tool" and wanted:
        return "text", f"I wrote {wanted.group(1)}. <promise>COMPLETE</promise>"
    if role == "user" and wanted and offered:
        return write_call(offered, wanted.group(1), wanted.group(2), root)
    return "text", "ok"


def write_call(offered, path, line, root):
    if not path.startswith("/"):
        path = f"{root}/{path}"
    for name, path_key, content_key in WRITE_TOOLS:
        if name in offered:
            path_key = next((k for k in PATH_KEYS if k in offered[name]), path_key)
            return "tool", (name, {path_key: path, content_key: line + "\n"})
    # codex: a shell command (its own sandbox runs it).
    command = f"printf '%s\\n' '{line}' > '{path}'"
    if "exec_command" in offered:
        return "tool", ("exec_command", {"cmd": command})
    if "shell" in offered:
        return "tool", ("shell", {"command": ["bash", "-lc", command]})
    return "text", "<promise>FAILED: no write tool was offered: " + ", ".join(sorted(offered)) + "</promise>"


def gemini_messages(body):
    """A Gemini request's `contents` as chat messages (what decide() reads):
    a user's text, a model's function call, a function's response."""
    messages = []
    for c in body.get("contents") or []:
        if not isinstance(c, dict):
            continue
        parts = [p for p in c.get("parts") or [] if isinstance(p, dict)]
        if any("functionResponse" in p for p in parts):
            messages.append({"role": "tool", "content": ""})
        elif any("functionCall" in p for p in parts):
            messages.append({"role": "assistant", "content": None})
        else:
            role = "user" if c.get("role", "user") == "user" else "assistant"
            messages.append({"role": role, "content": "\n".join(
                p["text"] for p in parts if isinstance(p.get("text"), str))})
    tools = []
    for t in body.get("tools") or []:
        for fn in (t.get("functionDeclarations") or []) if isinstance(t, dict) else []:
            params = fn.get("parameters") or fn.get("parametersJsonSchema") or {}
            tools.append({"function": {"name": fn.get("name"), "parameters": params}})
    return {"messages": messages, "tools": tools}


def anthropic_messages(body):
    """An Anthropic request's messages as chat messages (what decide()
    reads): a user's text, an assistant's tool use, a tool's result."""
    messages = []
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        blocks = [b for b in blocks if isinstance(b, dict)]
        if m.get("role") == "user" and any(b.get("type") == "tool_result" for b in blocks):
            messages.append({"role": "tool", "content": ""})
        elif m.get("role") == "assistant":
            messages.append({"role": "assistant", "content": None})
        else:
            messages.append({"role": "user", "content": "\n".join(
                b["text"] for b in blocks if isinstance(b.get("text"), str))})
    tools = [{"function": {"name": t.get("name"), "parameters": t.get("input_schema") or {}}}
             for t in body.get("tools") or [] if isinstance(t, dict)]
    return {"messages": messages, "tools": tools}


def decide_responses(body, root):
    """decide() for a Responses API request: its `input` items."""
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    wanted = None
    for it in items:
        if isinstance(it, dict) and it.get("type", "message") == "message":
            found = DESCRIPTION.search(text_of(it.get("content")))
            if found:
                wanted = found
    last = items[-1] if items else {}
    kind = last.get("type", "message") if isinstance(last, dict) else ""
    if kind.endswith("_output") and wanted:
        return "text", f"I wrote {wanted.group(1)}. <promise>COMPLETE</promise>"
    offered = tool_schemas(body)
    if kind == "message" and last.get("role") == "user" and wanted and offered:
        return write_call(offered, wanted.group(1), wanted.group(2), root)
    return "text", "ok"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state = None

    def log_message(self, fmt, *args):  # quiet: the log file says what happened
        pass

    def send_json(self, code, obj, headers=()):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def take_turn(self, chat, stream):
        """One chat-shaped request (`messages`, `tools`: chat completions as
        they come, the other APIs translated): counted, decided, logged,
        the first one's prompt saved.
        (kind, payload); kind "error" while rate-limited."""
        st = self.state
        with st.lock:
            st.calls += 1
            n = st.calls
        limited = n <= st.rate_limit_first
        kind, payload = ("error", None) if limited else decide(chat, st.root)
        if st.log:
            last = (chat.get("messages") or [{}])[-1]
            st.log.write(json.dumps({"n": n, "path": self.path, "stream": stream,
                                     "tools": tool_names(chat), "last_role": last.get("role"),
                                     "answer": kind, "payload": payload}) + "\n")
        if n == 1 and st.dump_prompt:
            users = [text_of(m.get("content")) for m in chat.get("messages") or [] if m.get("role") == "user"]
            with open(st.dump_prompt, "w") as f:
                f.write(max(users, key=len, default=""))
        return kind, payload

    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            self.send_json(200, {"object": "list", "data": [{"id": "mock-model", "object": "model", "owned_by": "mock"}]})
        else:
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self.send_json(400, {"error": {"message": "body is not JSON"}})
            return
        if self.path.rstrip("/").endswith("/responses"):
            self.answer_responses(body)
            return
        route = self.path.split("?")[0]
        if route.endswith("/v1/messages/count_tokens"):
            self.send_json(200, {"input_tokens": USAGE["prompt_tokens"]})
            return
        if route.endswith("/v1/messages"):
            self.answer_anthropic(body)
            return
        if route.endswith(":countTokens"):
            self.send_json(200, {"totalTokens": USAGE["prompt_tokens"]})
            return
        if route.endswith(":generateContent") or route.endswith(":streamGenerateContent"):
            self.answer_gemini(body, route.endswith(":streamGenerateContent"))
            return
        if not self.path.rstrip("/").endswith("chat/completions"):
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        kind, payload = self.take_turn(body, bool(body.get("stream")))
        if kind == "error":
            self.send_json(429, {"error": {"message": "mock rate limit", "type": "rate_limit_exceeded",
                                           "code": "rate_limit_exceeded"}}, [("Retry-After", "1")])
            return
        cid = "chatcmpl-" + uuid.uuid4().hex[:12]
        model = body.get("model") or "mock-model"
        if kind == "tool":
            name, args = payload
            call = {"id": "call_" + uuid.uuid4().hex[:8], "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": payload}
            finish = "stop"
        if not body.get("stream"):
            self.send_json(200, {"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
                                 "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                                 "usage": USAGE})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()

        def chunk(delta, finish_reason=None, usage=None):
            obj = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
            if usage is not None:
                obj["usage"] = usage
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")

        chunk({"role": "assistant", "content": ""})
        if kind == "tool":
            call = message["tool_calls"][0]
            chunk({"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                   "function": {"name": call["function"]["name"],
                                                "arguments": call["function"]["arguments"]}}]})
        else:
            chunk({"content": payload})
        chunk({}, finish)
        # Usage last, as OpenAI sends it with stream_options.include_usage.
        obj = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
               "choices": [], "usage": USAGE}
        self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


    def answer_anthropic(self, body):
        """Anthropic's Messages API: one block, a text or a tool use."""
        kind, payload = self.take_turn(anthropic_messages(body), bool(body.get("stream")))
        if kind == "error":
            self.send_json(429, {"type": "error", "error": {"type": "rate_limit_error",
                                                            "message": "mock rate limit"}},
                           [("Retry-After", "1")])
            return
        mid = "msg_" + uuid.uuid4().hex[:12]
        model = body.get("model") or "mock-model"
        if kind == "tool":
            name, args = payload
            block = {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:12], "name": name, "input": args}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": payload}
            stop = "end_turn"
        usage = {"input_tokens": USAGE["prompt_tokens"] - USAGE["prompt_tokens_details"]["cached_tokens"],
                 "cache_read_input_tokens": USAGE["prompt_tokens_details"]["cached_tokens"],
                 "cache_creation_input_tokens": 0, "output_tokens": USAGE["completion_tokens"]}
        message = {"id": mid, "type": "message", "role": "assistant", "model": model,
                   "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            self.send_json(200, message)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()

        def event(kind, obj):
            obj = {"type": kind, **obj}
            self.wfile.write(f"event: {kind}\ndata: ".encode() + json.dumps(obj).encode() + b"\n\n")

        event("message_start", {"message": {**message, "content": [], "stop_reason": None,
                                            "usage": {**usage, "output_tokens": 1}}})
        if block["type"] == "tool_use":
            event("content_block_start", {"index": 0, "content_block": {**block, "input": {}}})
            event("content_block_delta", {"index": 0, "delta": {"type": "input_json_delta",
                                                                "partial_json": json.dumps(block["input"])}})
        else:
            event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
            event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": payload}})
        event("content_block_stop", {"index": 0})
        event("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                                "usage": {"output_tokens": USAGE["completion_tokens"]}})
        event("message_stop", {})
        self.wfile.flush()
        self.close_connection = True

    def answer_gemini(self, body, stream):
        """Google's Gemini API: one candidate, whole, as one SSE event when
        streamed (`alt=sse`)."""
        kind, payload = self.take_turn(gemini_messages(body), stream)
        if kind == "error":
            self.send_json(429, {"error": {"code": 429, "message": "mock rate limit",
                                           "status": "RESOURCE_EXHAUSTED"}}, [("Retry-After", "1")])
            return
        if kind == "tool":
            name, args = payload
            part = {"functionCall": {"name": name, "args": args}}
        else:
            part = {"text": payload}
        answer = {"candidates": [{"content": {"role": "model", "parts": [part]},
                                  "finishReason": "STOP", "index": 0}],
                  "usageMetadata": {"promptTokenCount": USAGE["prompt_tokens"],
                                    "candidatesTokenCount": USAGE["completion_tokens"],
                                    "cachedContentTokenCount": USAGE["prompt_tokens_details"]["cached_tokens"],
                                    "totalTokenCount": USAGE["total_tokens"]},
                  "modelVersion": "mock-model"}
        if not stream:
            self.send_json(200, answer)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b"data: " + json.dumps(answer).encode() + b"\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True

    def answer_responses(self, body):
        """The Responses API, streamed as codex reads it."""
        st = self.state
        with st.lock:
            st.calls += 1
            n = st.calls
        limited = n <= st.rate_limit_first
        kind, payload = ("error", None) if limited else decide_responses(body, st.root)
        if st.log:
            items = body.get("input") or [{}]
            last = items[-1] if isinstance(items, list) and items else {}
            st.log.write(json.dumps({"n": n, "path": self.path, "stream": bool(body.get("stream")),
                                     "tools": tool_names(body), "last_type": last.get("type"),
                                     "last_output": last.get("output") if isinstance(last, dict) else None,
                                     "answer": kind, "payload": payload}) + "\n")
        if n == 1 and st.dump_prompt:
            users = [text_of(it.get("content")) for it in body.get("input") or []
                     if isinstance(it, dict) and it.get("role") == "user"]
            with open(st.dump_prompt, "w") as f:
                f.write(max(users, key=len, default=""))
        if limited:
            self.send_json(429, {"error": {"message": "mock rate limit", "type": "rate_limit_exceeded",
                                           "code": "rate_limit_exceeded"}}, [("Retry-After", "1")])
            return
        rid = "resp_" + uuid.uuid4().hex[:12]
        model = body.get("model") or "mock-model"
        if kind == "tool":
            name, args = payload
            item = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:8], "status": "completed",
                    "call_id": "call_" + uuid.uuid4().hex[:8], "name": name, "arguments": json.dumps(args)}
        else:
            item = {"type": "message", "id": "msg_" + uuid.uuid4().hex[:8], "role": "assistant",
                    "status": "completed", "content": [{"type": "output_text", "text": payload, "annotations": []}]}
        usage = {"input_tokens": USAGE["prompt_tokens"],
                 "input_tokens_details": {"cached_tokens": USAGE["prompt_tokens_details"]["cached_tokens"]},
                 "output_tokens": USAGE["completion_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": USAGE["total_tokens"]}
        response = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model,
                    "status": "in_progress", "output": []}
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()

        def event(kind, obj):
            obj = {"type": kind, **obj}
            self.wfile.write(f"event: {kind}\ndata: ".encode() + json.dumps(obj).encode() + b"\n\n")

        event("response.created", {"response": response})
        event("response.output_item.added", {"output_index": 0, "item": {**item, "status": "in_progress"}})
        if item["type"] == "message":
            event("response.output_text.delta", {"item_id": item["id"], "output_index": 0, "content_index": 0,
                                                 "delta": payload})
        event("response.output_item.done", {"output_index": 0, "item": item})
        event("response.completed", {"response": {**response, "status": "completed", "output": [item],
                                                  "usage": usage}})
        self.wfile.flush()
        self.close_connection = True


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True, help="the project folder (relative paths are made absolute in it)")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument("--log")
    p.add_argument("--rate-limit-first", type=int, default=0)
    p.add_argument("--dump-prompt")
    args = p.parse_args()
    Handler.state = State(args)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(f"{port}\n")
        import os
        os.replace(args.port_file + ".tmp", args.port_file)
    print(f"mock model server on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
