#!/usr/bin/env bash
# Opt-in, not part of `cargo test` (it needs the npm registry): runs spectr
# with real agent CLIs (codex, GitHub Copilot CLI, opencode, pi, Qwen Code),
# each against a scripted OpenAI-compatible model server on 127.0.0.1
# (scripts/mock-model-server.py: chat completions, and the Responses API
# codex speaks), so no account and no model is needed. For each agent it runs
# a three-task change and checks the files written, the statuses in
# tasks.jsonc and the receipts (tokens and cost as each agent reports them),
# then a one-task change with a 232 KB prompt.
#
# The ACP agents (`opencode-acp`: `opencode acp`, `qwen-acp`: `qwen --acp`,
# `gemini-acp`: `gemini --acp`, `claude-acp`: @zed-industries/claude-code-acp)
# run a change of their own: one task plain,
# one whose first attempt answers FAILED (retried), one that first runs a
# command spectr.yaml's `ralph: permissions:` denies (`rm -f keep.txt`: the
# run refuses it, keep.txt stays; the agent is prompted again and writes its
# file). Not run here: `codex-acp` (@zed-industries/codex-acp) is a native
# binary per platform whose package fetches it from GitHub at install.
# `claude` (Claude Code itself, which the adapter's SDK ships as cli.js) runs
# the same change with spectr.yaml's policy in its own flags
# (`--permission-mode dontAsk`, `--disallowedTools Bash(rm *)`: the command
# is denied by Claude itself, as root too); so does `copilot-policy`
# (`--agent copilot`, `--deny-tool=shell(rm:*)` instead of `--allow-all`).
#
#   scripts/real-agents.sh [--scratch DIR] [--keep] [--sandbox]
#                          [--agents "codex copilot ..."] [--spectr PATH]
#
# --scratch DIR   work there (the npm install is reused when its versions match)
# --keep          keep the scratch folder (it is removed on success otherwise)
# --sandbox       run spectr with --sandbox, the agents installed under a /tmp
#                 folder (npm's node_modules and .bin links, in
#                 /tmp/spectr-real-agents-npm, kept), TMPDIR under /tmp
#                 (/tmp/user/<uid>, as pam_tmpdir makes it) and opencode's
#                 config named by OPENCODE_CONFIG in a /tmp folder: what the
#                 sandbox's private /tmp must still show (issue 31). The
#                 scratch folder (projects, the agents' state) is then outside
#                 /tmp, as a user's are (codex refuses a CODEX_HOME under
#                 /tmp: it will not make its sandbox helper there)
# --agents LIST   the agents to run (default: copilot pi qwen; with
#                 --sandbox: codex copilot pi opencode); also opencode-acp,
#                 qwen-acp, gemini-acp, claude-acp, claude and
#                 copilot-policy
# --spectr PATH   run this spectr binary instead of building this one's (an
#                 older build, to compare)
#
# Needs node + npm, python3, git and the Rust toolchain (bubblewrap with
# --sandbox). Every agent's state (CODEX_HOME, COPILOT_HOME, XDG_CACHE_HOME,
# XDG_DATA_HOME, XDG_CONFIG_HOME, PI_CODING_AGENT_DIR, HOME) lives in the
# scratch folder: nothing of yours is read or written.
set -euo pipefail

CODEX_VERSION=0.171.0
COPILOT_VERSION=1.0.102
OPENCODE_VERSION=1.18.33
PI_VERSION=0.73.1
QWEN_VERSION=0.24.4
GEMINI_VERSION=0.61.0
CLAUDE_ACP_VERSION=0.16.2

repo="$(cd "$(dirname "$0")/.." && pwd)"
scratch=""
keep=0
sandbox=0
agents=""
spectr=""
usage="usage: $0 [--scratch DIR] [--keep] [--sandbox] [--agents LIST] [--spectr PATH]"
while [ $# -gt 0 ]; do
  case "$1" in
    --scratch) scratch="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --sandbox) sandbox=1; shift ;;
    --agents) agents="$2"; shift 2 ;;
    --spectr) spectr="$2"; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
if [ -z "$agents" ]; then
  if [ "$sandbox" = 1 ]; then agents="codex copilot pi opencode"; else agents="copilot pi qwen"; fi
fi
if [ -z "$scratch" ]; then
  if [ "$sandbox" = 1 ]; then
    scratch="$(mktemp -d /var/tmp/spectr-real-agents.XXXXXX)"
  else
    scratch="$(mktemp -d "${TMPDIR:-/tmp}/spectr-real-agents.XXXXXX")"
  fi
fi
mkdir -p "$scratch"
scratch="$(cd "$scratch" && pwd)"
echo "scratch: $scratch"

if [ -z "$spectr" ]; then
  echo "== building spectr"
  cargo build --quiet --manifest-path "$repo/Cargo.toml" --bin spectr
  spectr="${CARGO_TARGET_DIR:-$repo/target}/debug/spectr"
fi
spectr_args=()
if [ "$sandbox" = 1 ]; then
  spectr_args=(--sandbox)
  npm_dir="/tmp/spectr-real-agents-npm"
  tmp_config="$(mktemp -d /tmp/spectr-real-agents-config.XXXXXX)"
  export TMPDIR="/tmp/user/$(id -u)"
  mkdir -p "$TMPDIR"
  chmod 700 "$TMPDIR"
else
  npm_dir="$scratch/npm"
  tmp_config="$scratch/config"
  mkdir -p "$tmp_config"
fi
echo "spectr: $spectr ${spectr_args[*]:-}"

bin="$npm_dir/node_modules/.bin"
want="$CODEX_VERSION $COPILOT_VERSION $OPENCODE_VERSION $PI_VERSION $QWEN_VERSION $GEMINI_VERSION $CLAUDE_ACP_VERSION"
if [ "$(cat "$npm_dir/.versions" 2>/dev/null)" != "$want" ]; then
  echo "== installing into $npm_dir: @openai/codex@$CODEX_VERSION @github/copilot@$COPILOT_VERSION opencode-ai@$OPENCODE_VERSION @mariozechner/pi-coding-agent@$PI_VERSION @qwen-code/qwen-code@$QWEN_VERSION @google/gemini-cli@$GEMINI_VERSION @zed-industries/claude-code-acp@$CLAUDE_ACP_VERSION"
  mkdir -p "$npm_dir"
  npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error \
    "@openai/codex@$CODEX_VERSION" \
    "@github/copilot@$COPILOT_VERSION" \
    "opencode-ai@$OPENCODE_VERSION" \
    "@mariozechner/pi-coding-agent@$PI_VERSION" \
    "@qwen-code/qwen-code@$QWEN_VERSION" \
    "@google/gemini-cli@$GEMINI_VERSION" \
    "@zed-industries/claude-code-acp@$CLAUDE_ACP_VERSION" >"$scratch/npm.log" 2>&1 || {
      cat "$scratch/npm.log" >&2; exit 1; }
  echo "$want" >"$npm_dir/.versions"
fi

# Everything the agents keep for themselves stays in here.
export HOME="$scratch/home"
export XDG_CACHE_HOME="$scratch/cache"
export XDG_DATA_HOME="$scratch/data"
export XDG_CONFIG_HOME="$scratch/config-home"
export CODEX_HOME="$scratch/codex-home"
export COPILOT_HOME="$scratch/copilot-home"
export PI_CODING_AGENT_DIR="$scratch/pi-agent"
mkdir -p "$HOME" "$XDG_CACHE_HOME" "$XDG_DATA_HOME" "$XDG_CONFIG_HOME" "$CODEX_HOME" \
  "$COPILOT_HOME" "$PI_CODING_AGENT_DIR"
export PATH="$bin:$PATH"
export NO_COLOR=1
export GIT_AUTHOR_NAME=real-agents GIT_AUTHOR_EMAIL=real-agents@example.com
export GIT_COMMITTER_NAME=real-agents GIT_COMMITTER_EMAIL=real-agents@example.com
# A key unlike any word: copilot masks its value wherever it appears in its output.
key="mock-key-9f3c2a7e51d04b68"

server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
}
trap cleanup EXIT

# One project per agent: a three-task change, each task writing one file
# (only the first task when $2 is 1).
make_project() {
  local dir="$1" only="${2:-3}" acp="${3:-}"
  rm -rf "$dir"
  mkdir -p "$dir/spectr/changes/add-notes"
  printf '# Project\n\nA scratch project for spectr with a real agent.\n' >"$dir/spectr/project.md"
  printf '# Change: Add notes\n\n## Why\n\nThree notes.\n\n## What Changes\n\n- one.txt, two.txt, three.txt\n' \
    >"$dir/spectr/changes/add-notes/proposal.md"
  cat >"$dir/spectr/changes/add-notes/tasks.jsonc" <<'EOF'
// Spectr Tasks File (JSONC)
{
  "version": 1,
  "tasks": [
    {"id": "1.1", "section": "Notes", "description": "Create one.txt containing the line: one", "status": "pending"},
    {"id": "1.2", "section": "Notes", "description": "Create two.txt containing the line: two", "status": "pending"},
    {"id": "1.3", "section": "Notes", "description": "Create three.txt containing the line: three", "status": "pending"}
  ]
}
EOF
  if [ -n "$acp" ]; then
    python3 - "$dir/spectr/changes/add-notes/tasks.jsonc" "$acp" <<'EOF'
import sys
p, outside = sys.argv[1:3]
text = open(p).read()
text = text.replace("Create two.txt", "Fail once, then create two.txt")
text = text.replace("Create three.txt", "Try to run `rm -f keep.txt` first, then create three.txt")
open(p, "w").write(text)
EOF
    printf 'kept\n' >"$dir/keep.txt"
    printf 'ralph:\n  permissions:\n    commands:\n      deny: ["rm *"]\n' >"$dir/spectr.yaml"
  fi
  if [ "$only" = 1 ]; then
    python3 - "$dir/spectr/changes/add-notes/tasks.jsonc" <<'EOF'
import sys
p = sys.argv[1]
lines = [l for l in open(p) if '"1.2"' not in l and '"1.3"' not in l]
open(p, "w").write("".join(lines).replace('"pending"},', '"pending"}'))
EOF
  fi
  (cd "$dir" && git init -q -b main && git add -A && git commit -qm "scratch project")
}

start_server() {
  local root="$1" log="$2"
  shift 2
  rm -f "$scratch/port"
  python3 "$repo/scripts/mock-model-server.py" --root "$root" --port-file "$scratch/port" --log "$log" "$@" \
    2>>"$scratch/server.err" &
  server_pid=$!
  for _ in $(seq 1 100); do
    [ -s "$scratch/port" ] && break
    sleep 0.05
  done
  port="$(cat "$scratch/port")"
}

stop_server() {
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

# A prompt of 232 KB that starts with `-` (no argument could carry it, and pi
# would read it as an option): the project's prompt template.
big_template() {
  python3 - "$1" <<'EOF'
import sys
filler = "".join(f"- {i:06} the quick brown fox jumps over the lazy dog, and on.\n" for i in range(232 * 1024 // 56 + 1))
open(sys.argv[1], "w").write(filler + "\nTask ID: {{task_id}}\nDescription: {{description}}\nTasks file: {{tasks_file}}\n"
    "End with <promise>COMPLETE</promise> when done.\n")
EOF
}

# Checks the big-prompt run: completed, and what the agent sent the model
# holds the whole prompt (each CLI wraps it in context of its own).
check_big() {
  python3 - "$1" "$2" "$3" <<'EOF'
import json, sys
events_path, template_path, sent_path = sys.argv[1:4]
events = [json.loads(l) for l in open(events_path) if l.startswith("{")]
done = [e for e in events if e.get("event") == "task_completed"]
template = open(template_path).read()
filler = template[: template.index("\nTask ID:")]
sent = open(sent_path).read()
whole = filler in sent and "Task ID: 1.1\nDescription: Create one.txt" in sent
at = sent.find(filler)
print(f"  {len(filler.encode())}-byte prompt starting with '-': {'completed' if done else 'NOT completed'}; "
      f"the model got it {'whole' if whole else 'NOT whole'} (at byte {at} of a {len(sent.encode())}-byte message)")
sys.exit(0 if len(done) == 1 and whole else 1)
EOF
}

# Checks one run: statuses, files, receipts. Prints a line per task.
check_run() {
  local agent="$1" dir="$2" events="$3"
  python3 - "$agent" "$dir" "$events" <<'EOF'
import json, re, sys
agent, root, events_path = sys.argv[1:4]
events = [json.loads(l) for l in open(events_path) if l.startswith("{")]
print(f"  attempts: {len([e for e in events if e.get('event') == 'task_started'])}")
text = open(f"{root}/spectr/changes/add-notes/tasks.jsonc").read()
tasks = json.loads("\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//")))["tasks"]
problems = []
want = {"1.1": ("one.txt", "one"), "1.2": ("two.txt", "two"), "1.3": ("three.txt", "three")}
started = [e for e in events if e.get("event") == "run_started"]
if started:
    print(f"  agent: {started[0]['agent']}")
for t in tasks:
    if t["status"] != "completed":
        problems.append(f"task {t['id']} is {t['status']}")
for tid, (name, line) in want.items():
    try:
        got = open(f"{root}/{name}").read()
    except OSError as e:
        problems.append(f"{name}: {e}")
        continue
    if got.strip() != line:
        problems.append(f"{name} holds {got!r}, not {line!r}")
done = {e["task"]: e for e in events if e.get("event") == "task_completed"}
for tid in want:
    e = done.get(tid)
    if not e:
        problems.append(f"no task_completed for {tid}")
        continue
    r = e["receipt"]
    t = r.get("tokens")
    cost = r.get("cost_usd")
    shown = f"  {tid}: {e['outcome']['via']} · turns {r.get('turns')} · tokens {t} · cost {cost} · model {r.get('model')}"
    print(shown)
    if t is None:
        problems.append(f"{tid}: no tokens in the receipt")
    else:
        # The server answers 123 prompt tokens (23 of them cached) and 45
        # completion tokens per call: input excludes the cached ones.
        calls = t["output"] // 45
        if calls < 1 or t["output"] != 45 * calls or t["cache_read"] != 23 * calls or t["input"] != 100 * calls:
            problems.append(f"{tid}: tokens {t} are not {calls} calls of 100 uncached + 23 cached in, 45 out")
    if agent in ("pi", "opencode"):
        if not cost or cost <= 0:
            problems.append(f"{tid}: {agent} reports dollars, the receipt has {cost}")
    elif cost is not None:
        problems.append(f"{tid}: {agent} reports no dollars, the receipt has {cost}")
if problems:
    print("  FAILED:\n   - " + "\n   - ".join(problems))
    sys.exit(1)
print(f"  ok: 3 tasks completed, 3 files written, receipts as {agent} reports them")
EOF
}

# Points `$1` at the server on $port; sets `extra`, its arguments for spectr.
configure() {
  local base="http://127.0.0.1:$port/v1"
  extra=()
  local name="${1%-acp}"
  case "${name%-policy}" in
    codex)
      # codex 0.171 speaks only the Responses API (`wire_api = "chat"` is
      # refused), which the mock server answers too.
      cat >"$CODEX_HOME/config.toml" <<EOF
model = "mock-model"
model_provider = "mock"

[model_providers.mock]
name = "mock"
base_url = "$base"
env_key = "MOCK_API_KEY"
wire_api = "responses"
EOF
      export MOCK_API_KEY="$key"
      ;;
    opencode)
      # Its provider, in a file OPENCODE_CONFIG names (under /tmp with --sandbox).
      cat >"$tmp_config/opencode.json" <<EOF
{"\$schema": "https://opencode.ai/config.json", "model": "mock/mock-model",
 "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
   "options": {"baseURL": "$base", "apiKey": "$key"},
   "models": {"mock-model": {"name": "Mock model",
     "cost": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}}}}},
 "permission": {"edit": "$opencode_edit", "bash": "$opencode_edit"}}
EOF
      export OPENCODE_CONFIG="$tmp_config/opencode.json"
      ;;
    copilot)
      export COPILOT_PROVIDER_BASE_URL="$base" COPILOT_PROVIDER_TYPE=openai \
        COPILOT_PROVIDER_API_KEY="$key" COPILOT_MODEL=mock-model COPILOT_OFFLINE=true
      ;;
    pi)
      cat >"$PI_CODING_AGENT_DIR/models.json" <<EOF
{"providers": {"mock": {"baseUrl": "$base", "api": "openai-completions", "apiKey": "$key",
  "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
  "models": [{"id": "mock-model", "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}]}}}
EOF
      printf '{"defaultProvider": "mock", "defaultModel": "mock-model"}\n' >"$PI_CODING_AGENT_DIR/settings.json"
      ;;
    claude)
      # Anthropic's API, which the server speaks too; an API key, no login.
      export ANTHROPIC_BASE_URL="http://127.0.0.1:$port" ANTHROPIC_API_KEY="$key" \
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1
      # The adapter starts Claude Code allowing --dangerously-skip-permissions,
      # which Claude refuses as root outside a sandbox it is told of (these
      # machines are one).
      if [ "$(id -u)" = 0 ]; then export IS_SANDBOX=1; fi
      ;;
    gemini)
      # Google's API, which the server speaks too; an API key, no login.
      export GOOGLE_GEMINI_BASE_URL="http://127.0.0.1:$port" GEMINI_API_KEY="$key" GEMINI_MODEL=mock-model
      mkdir -p "$HOME/.gemini"
      printf '{"security": {"auth": {"selectedType": "gemini-api-key"}}, "model": {"name": "mock-model"}}\n' \
        >"$HOME/.gemini/settings.json"
      ;;
    qwen)
      export OPENAI_BASE_URL="$base" OPENAI_API_KEY="$key" OPENAI_MODEL=mock-model
      if [ "$1" = qwen ]; then extra=(--agent-arg=--auth-type=openai); fi
      ;;
  esac
}

# `spectr ralph` on the project, NDJSON events to $2; returns spectr's exit code.
run_spectr() {
  local agent="$1" events="$2" code start
  start=$(date +%s%N)
  set +e
  (cd "$project" && "$spectr" ralph add-notes --agent "${agent%-policy}" "${extra[@]}" "${spectr_args[@]}" --json \
    --max-retries "${retries:-0}" --task-timeout 5m --completion-grace 2s) >"$events" 2>>"$scratch/spectr-$agent.err"
  code=$?
  set -e
  echo "  spectr exited $code after $(( ($(date +%s%N) - start) / 1000000 )) ms"
  if [ "$code" -ne 0 ]; then
    tail -5 "$scratch/spectr-$agent.err" | sed 's/^/  stderr: /' || true
    grep -h '"task_failed"' "$events" | head -3 | sed 's/^/  /' || true
  fi
  return "$code"
}

# Checks an ACP agent's run: every task completed and its file written, the
# FAILED attempt retried, the denied command refused (keep.txt still there),
# each permission an event and counted in the receipts.
check_acp_run() {
  python3 - "$1" "$2" "$3" "$4" <<'EOF'
import json, os, sys
agent, root, events_path, outside = sys.argv[1:5]
events = [json.loads(l) for l in open(events_path) if l.startswith("{")]
problems = []
started = [f"{e['task']}#{e['attempt']}" for e in events if e.get("event") == "task_started"]
print(f"  attempts: {' '.join(started)}")
text = open(f"{root}/spectr/changes/add-notes/tasks.jsonc").read()
tasks = json.loads("\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//")))["tasks"]
for t in tasks:
    if t["status"] != "completed":
        problems.append(f"task {t['id']} is {t['status']}")
for name, line in [("one.txt", "one"), ("two.txt", "two"), ("three.txt", "three")]:
    try:
        got = open(f"{root}/{name}").read()
        if got.strip() != line:
            problems.append(f"{name} holds {got!r}")
    except OSError as e:
        problems.append(f"{name}: {e}")
failed = [e for e in events if e.get("event") == "task_failed"]
if [f"{e['task']}#{e['attempt']}" for e in failed] != ["1.2#1"]:
    problems.append(f"failed attempts: {[(e['task'], e['attempt'], e['outcome']) for e in failed]}")
if "1.2#2" not in started:
    problems.append("1.2 was not retried")
perms = [e["agent"] for e in events if e.get("event") == "agent_event" and e.get("agent", {}).get("kind") == "permission"]
if agent in ("claude", "copilot-policy"):
    # The CLI itself refuses (its own flags): a tool result saying so.
    perms = [{"allowed": False, "tool": e["agent"].get("summary")} for e in events
             if e.get("event") == "agent_event" and e.get("agent", {}).get("kind") == "tool_result"
             and e["agent"].get("is_error") and "denied" in (e["agent"].get("summary") or "")]
for p in perms:
    print(f"  permission: {json.dumps(p)[:300]}")
refused = [p for p in perms if not p.get("allowed")]
if not refused:
    problems.append("no permission was refused")
if not os.path.exists(f"{root}/keep.txt"):
    problems.append("keep.txt was removed: the refusal did not hold")
ends = [e for e in events if e.get("event") in ("task_completed", "task_failed")]
asked = sum((e["receipt"].get("permissions") or {}).get("asked", 0) for e in ends)
denied = sum((e["receipt"].get("permissions") or {}).get("refused", 0) for e in ends)
print(f"  receipts: {asked} permissions asked, {denied} refused")
if agent.endswith("-acp") and (denied != len(refused) or asked != len(perms)):
    problems.append(f"receipts count {asked} asked / {denied} refused, the events {len(perms)} / {len(refused)}")
if problems:
    print("  FAILED:\n   - " + "\n   - ".join(problems))
    sys.exit(1)
print(f"  ok: 3 tasks completed, the FAILED attempt retried, {len(refused)} of {len(perms)} permissions refused (the denied command)")
EOF
}

status=0
for agent in $agents; do
  case "$agent" in
    *-acp|claude|copilot-policy)
      if [ "$agent" = claude ] && [ ! -x "$bin/claude" ]; then
        printf '#!/bin/sh\nexec node "%s" "$@"\n' "$npm_dir/node_modules/@anthropic-ai/claude-agent-sdk/cli.js" >"$bin/claude"
        chmod +x "$bin/claude"
      fi
      if [ "$agent" = claude-acp ]; then
        echo "== $agent (@zed-industries/claude-code-acp $CLAUDE_ACP_VERSION, over ACP)"
      elif [ "$agent" = claude ] || [ "$agent" = copilot-policy ]; then
        echo "== ${agent%-policy} ($(${agent%-policy} --version 2>&1 | head -1), its own flags for ralph: permissions:)"
      else
        echo "== $agent (${agent%-acp} $(${agent%-acp} --version 2>&1 | head -1), over ACP)"
      fi
      project="$scratch/project-$agent"
      outside="$scratch/outside-$agent.txt"
      rm -f "$outside"
      make_project "$project" 3 "$outside"
      start_server "$project" "$scratch/server-$agent.log"
      opencode_edit=ask configure "$agent"
      events="$scratch/events-$agent.ndjson"
      retries=1 run_spectr "$agent" "$events" || status=1
      stop_server
      check_acp_run "$agent" "$project" "$events" "$outside" || status=1
      continue
      ;;
  esac
  echo "== $agent ($($agent --version 2>&1 | head -1))"
  project="$scratch/project-$agent"

  make_project "$project"
  start_server "$project" "$scratch/server-$agent.log"
  opencode_edit=allow configure "$agent"
  events="$scratch/events-$agent.ndjson"
  run_spectr "$agent" "$events" || status=1
  stop_server
  check_run "$agent" "$project" "$events" || status=1

  # Again, one task, with the 232 KB prompt.
  make_project "$project" 1
  big_template "$project/spectr/ralph-prompt.md"
  (cd "$project" && git add -A && git commit -qm "big prompt")
  start_server "$project" "$scratch/server-$agent-big.log" --dump-prompt "$scratch/sent-$agent.txt"
  opencode_edit=allow configure "$agent"
  run_spectr "$agent" "$events.big" || status=1
  stop_server
  check_big "$events.big" "$project/spectr/ralph-prompt.md" "$scratch/sent-$agent.txt" || status=1
done

if [ "$status" -eq 0 ] && [ "$keep" -eq 0 ]; then
  rm -rf "$scratch"
  if [ "$sandbox" = 1 ]; then rm -rf "$tmp_config"; fi
  echo "all agents passed ($agents; scratch removed)"
elif [ "$status" -eq 0 ]; then
  echo "all agents passed ($agents; scratch kept: $scratch)"
else
  echo "FAILED (scratch kept: $scratch)"
fi
exit "$status"
