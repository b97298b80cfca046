#!/usr/bin/env bash
# Renders `spectr report --html` of a scripted run into docs/report.png (the
# picture README shows), with headless Chromium from the system's packages
# (`apt-get install chromium`). The run is the demo's (scripts/demo.sh): the
# sample change in a scratch copy, two lanes (`--jobs 2`), one failure
# retried, the scripted agent standing in for Claude Code. Its steps sleep a
# little so the timeline has something to show.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$repo/docs/report.png}"
browser="$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)"
if [ -z "$browser" ]; then
  echo "needs Chromium: apt-get install chromium (or put chromium on PATH)" >&2
  exit 2
fi
cargo build --quiet --manifest-path "$repo/Cargo.toml" --bins
bin="${CARGO_TARGET_DIR:-$repo/target}/debug"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/spectr-report.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
cp -R "$repo/spectr" "$scratch/spectr"
# The demo's script, each attempt a little slower (a sleep before its end).
sed 's/"complete"/"sleep:700", "complete"/; s/"fail:/"sleep:900", "fail:/' \
  "$repo/scripts/demo-agent.json" > "$scratch/.agent.json"
cd "$scratch"
find spectr/changes -mindepth 1 -maxdepth 1 ! -name add-greeting-cli ! -name archive -exec rm -rf {} +
printf '.bin/\n' > .gitignore
git init -q -b main
git -c user.name=demo -c user.email=demo@example.com add -A
git -c user.name=demo -c user.email=demo@example.com commit -qm "sample project"
mkdir -p .bin && ln -sf "$bin/spectr-fake-agent" .bin/claude && ln -sf "$bin/spectr" .bin/spectr
PATH="$scratch/.bin:$PATH" SPECTR_FAKE_SCRIPT="$scratch/.agent.json" SPECTR_FAKE_STATE="$scratch/.bin/state" \
  "$bin/spectr" ralph add-greeting-cli --agent claude --yes --jobs 2 --budget-usd 5 > /dev/null
"$bin/spectr" report add-greeting-cli --html "$scratch/report.html" > /dev/null
mkdir -p "$(dirname "$out")"
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
  --window-size=1000,1250 --screenshot="$out" "file://$scratch/report.html" 2> /dev/null
echo "Wrote $out"
