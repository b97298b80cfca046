#!/usr/bin/env bash
# Opt-in, not part of `cargo test` (it needs the npm registry): runs spectr
# with the real GitHub Copilot CLI, pi and Qwen Code, each against a scripted
# OpenAI-chat-completions model server on 127.0.0.1 (scripts/mock-model-server.py),
# so no account and no model is needed. For each agent it runs a three-task
# change and checks the files written, the statuses in tasks.jsonc and the
# receipts (tokens and cost as each agent reports them).
#
#   scripts/real-agents.sh [--scratch DIR] [--keep]
#
# --scratch DIR  work there (the npm install is reused when its versions match)
# --keep         keep the scratch folder (it is removed on success otherwise)
#
# Needs node + npm, python3, git and the Rust toolchain. Every agent's state
# (COPILOT_HOME, XDG_CACHE_HOME, PI_CODING_AGENT_DIR, HOME) lives in the
# scratch folder: nothing of yours is read or written.
set -euo pipefail

COPILOT_VERSION=1.0.102
PI_VERSION=0.73.1
QWEN_VERSION=0.24.4

repo="$(cd "$(dirname "$0")/.." && pwd)"
scratch=""
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --scratch) scratch="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "usage: $0 [--scratch DIR] [--keep]" >&2; exit 2 ;;
  esac
done
if [ -z "$scratch" ]; then
  scratch="$(mktemp -d "${TMPDIR:-/tmp}/spectr-real-agents.XXXXXX")"
fi
mkdir -p "$scratch"
scratch="$(cd "$scratch" && pwd)"
echo "scratch: $scratch"

echo "== building spectr"
cargo build --quiet --manifest-path "$repo/Cargo.toml" --bin spectr
spectr="${CARGO_TARGET_DIR:-$repo/target}/debug/spectr"

npm_dir="$scratch/npm"
bin="$npm_dir/node_modules/.bin"
want="$COPILOT_VERSION $PI_VERSION $QWEN_VERSION"
if [ "$(cat "$npm_dir/.versions" 2>/dev/null)" != "$want" ]; then
  echo "== installing @github/copilot@$COPILOT_VERSION @mariozechner/pi-coding-agent@$PI_VERSION @qwen-code/qwen-code@$QWEN_VERSION"
  mkdir -p "$npm_dir"
  npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error \
    "@github/copilot@$COPILOT_VERSION" \
    "@mariozechner/pi-coding-agent@$PI_VERSION" \
    "@qwen-code/qwen-code@$QWEN_VERSION" >"$scratch/npm.log" 2>&1 || {
      cat "$scratch/npm.log" >&2; exit 1; }
  echo "$want" >"$npm_dir/.versions"
fi

# Everything the agents keep for themselves stays in here.
export HOME="$scratch/home"
export XDG_CACHE_HOME="$scratch/cache"
export COPILOT_HOME="$scratch/copilot-home"
export PI_CODING_AGENT_DIR="$scratch/pi-agent"
mkdir -p "$HOME" "$XDG_CACHE_HOME" "$COPILOT_HOME" "$PI_CODING_AGENT_DIR"
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
  local dir="$1" only="${2:-3}"
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
    if agent == "pi":
        if not cost or cost <= 0:
            problems.append(f"{tid}: pi reports dollars, the receipt has {cost}")
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
  case "$1" in
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
    qwen)
      export OPENAI_BASE_URL="$base" OPENAI_API_KEY="$key" OPENAI_MODEL=mock-model
      extra=(--agent-arg=--auth-type=openai)
      ;;
  esac
}

# `spectr ralph` on the project, NDJSON events to $2; returns spectr's exit code.
run_spectr() {
  local agent="$1" events="$2" code
  set +e
  (cd "$project" && "$spectr" ralph add-notes --agent "$agent" "${extra[@]}" --json \
    --max-retries 0 --task-timeout 5m --completion-grace 2s) >"$events" 2>>"$scratch/spectr-$agent.err"
  code=$?
  set -e
  echo "  spectr exited $code"
  if [ "$code" -ne 0 ]; then
    tail -5 "$scratch/spectr-$agent.err" | sed 's/^/  stderr: /' || true
    grep -h '"task_failed"' "$events" | head -3 | sed 's/^/  /' || true
  fi
  return "$code"
}

status=0
for agent in copilot pi qwen; do
  echo "== $agent ($($agent --version 2>&1 | head -1))"
  project="$scratch/project-$agent"

  make_project "$project"
  start_server "$project" "$scratch/server-$agent.log"
  configure "$agent"
  events="$scratch/events-$agent.ndjson"
  run_spectr "$agent" "$events" || status=1
  stop_server
  check_run "$agent" "$project" "$events" || status=1

  # Again, one task, with the 232 KB prompt.
  make_project "$project" 1
  big_template "$project/spectr/ralph-prompt.md"
  (cd "$project" && git add -A && git commit -qm "big prompt")
  start_server "$project" "$scratch/server-$agent-big.log" --dump-prompt "$scratch/sent-$agent.txt"
  configure "$agent"
  run_spectr "$agent" "$events.big" || status=1
  stop_server
  check_big "$events.big" "$project/spectr/ralph-prompt.md" "$scratch/sent-$agent.txt" || status=1
done

if [ "$status" -eq 0 ] && [ "$keep" -eq 0 ]; then
  rm -rf "$scratch"
  echo "all three agents passed (scratch removed)"
elif [ "$status" -eq 0 ]; then
  echo "all three agents passed (scratch kept: $scratch)"
else
  echo "FAILED (scratch kept: $scratch)"
fi
exit "$status"
