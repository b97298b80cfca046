#!/usr/bin/env bash
# The README's first command: runs `spectr ralph` end to end on the bundled sample
# change, in a scratch copy (the repository stays clean), with the bundled scripted
# agent standing in for Claude Code. Needs only the Rust toolchain and git.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
# A first build takes a few minutes: say so, and let cargo show its progress
# (on stderr, as cargo's own output always is).
echo "Building spectr and the scripted agent (cargo build --bins; the first build takes a few minutes)..." >&2
cargo build --manifest-path "$repo/Cargo.toml" --bins
bin="${CARGO_TARGET_DIR:-$repo/target}/debug"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/spectr-demo.XXXXXX")"
cp -R "$repo/spectr" "$scratch/spectr"
cp "$repo/scripts/demo-agent.json" "$scratch/.demo-agent.json"
cd "$scratch"
# Only the sample change: this project's own changes stay out of the demo.
find spectr/changes -mindepth 1 -maxdepth 1 ! -name add-greeting-cli ! -name archive -exec rm -rf {} +
printf '.demo-bin/\n' > .gitignore
git init -q -b main
# Each completed task becomes a commit made as you (`--commit task`): the
# scratch repository gets an identity of its own.
git config user.name demo
git config user.email demo@example.com
git add -A
git commit -qm "sample project"
# The scripted agent answers as `claude` (stream-json), found first on PATH.
mkdir -p .demo-bin && ln -sf "$bin/spectr-fake-agent" .demo-bin/claude
echo "Scratch project: $scratch"
PATH="$scratch/.demo-bin:$PATH" SPECTR_FAKE_SCRIPT="$scratch/.demo-agent.json" SPECTR_FAKE_STATE="$scratch/.demo-bin/state" \
  "$bin/spectr" ralph add-greeting-cli --agent claude --yes "$@"
echo
git log --oneline
echo
"$bin/spectr" list
