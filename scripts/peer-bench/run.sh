#!/usr/bin/env bash
# Per-task loop overhead: spectr (ours) vs ralph-tui (peer), 20 instant tasks.
# Usage: scripts/peer-bench/run.sh [ROUNDS] [SIZES...]   default: 5 rounds, sizes 1000 10000
# Needs: the release build (cargo build --release), npm (the registry only),
# git; /dev/shm for the repositories. Prints a table of medians and the ratios
# quoted in docs/src/benchmarks.md. KEEP_BIN=1 reuses the copied binaries.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PB=${SPECTR_PEER_BENCH_DIR:-/tmp/spectr-peer-bench}
SHM=/dev/shm/spectr-peer-bench
ROUNDS=${1:-5}; shift || true
SIZES=("${@:-1000 10000}"); SIZES=(${SIZES[@]})
NT=20
BUN_VER=1.4.5
RT_VER=0.11.0

mkdir -p "$PB/bin" "$PB/home" "$PB/npmg" "$SHM"
export HOME=$PB/home                       # ralph-tui writes ~/.config/ralph-tui; keep it isolated
export NPM_CONFIG_PREFIX=$PB/npmg
export PATH=$PB/bin:$PB/npmg/bin:/usr/local/bin:/usr/bin:/bin
# --- install peer (npm registry only) ---
[ -x "$PB/npmg/bin/bun" ] || npm i -g "bun@$BUN_VER" >/dev/null 2>&1
[ -x "$PB/npmg/bin/ralph-tui" ] || npm i -g "ralph-tui@$RT_VER" >/dev/null 2>&1
# --- shared fake agent, installed as `claude` for both tools ---
# Copies (not symlinks): a rebuild while it measures does not change what is measured.
# Set KEEP_BIN=1 to reuse an existing snapshot.
if [ -z "${KEEP_BIN:-}" ] || [ ! -x "$PB/bin/spectr" ]; then
  rm -f "$PB/bin/spectr" "$PB/bin/claude"
  cp -p "$ROOT"/target/release/spectr "$PB/bin/spectr"
  cp -p "$ROOT"/target/release/spectr-fake-agent "$PB/bin/claude"
fi
echo '{"default": ["write:out/{task}.txt=done", "complete"]}' > "$PB/fake.json"
export SPECTR_FAKE_SCRIPT=$PB/fake.json
unset SPECTR_FAKE_STATE

echo "# versions: spectr=$(spectr --version | awk '{print $2}') (snapshot of binary dated $(date -r "$PB/bin/spectr" +%FT%T); $ROOT HEAD $(git -C "$ROOT" rev-parse --short HEAD))" \
     "fake=$(claude --version | awk '{print $2}') ralph-tui=$(ralph-tui --version 2>/dev/null | grep -Eo '[0-9]+\.[0-9]+\.[0-9]+' | head -1)" \
     "bun=$(bun --version) git=$(git --version | awk '{print $3}') nproc=$(nproc)"
echo "# sha256: spectr=$(sha256sum "$PB/bin/spectr" | cut -c1-16) claude(fake)=$(sha256sum "$PB/bin/claude" | cut -c1-16); load at start: $(cut -d' ' -f1-3 /proc/loadavg)"

now_ns() { date +%s%N; }
RT_CMD=(ralph-tui run --prd ./prd.json --headless --no-setup --no-notify --iterations 0 --delay 0)

reset_s() { git reset -q --hard "$1" && git clean -qfd && rm -rf spectr/changes/c/.ralph spectr/changes/c/.ralph-session.json; }
reset_r() { git reset -q --hard "$1" && git clean -qfdx; }

# run_one MODE DIR -> prints elapsed ms; verifies the work afterwards (outside the timing)
run_one() {
  local mode=$1 dir=$2 t0 t1 rc=0 want_out=$NT want_commits=0
  cd "$dir"
  case $mode in
    s_task|s_off|s_none) reset_s base-tag ;;
    s_task0|s_off0|s_none0) reset_s done-tag; want_out=0 ;;
    r_ac) reset_r ac-tag ;;
    r_off) reset_r base-tag ;;
    r_0) reset_r done-tag; want_out=0 ;;
  esac
  local before; before=$(git rev-list --count HEAD)
  t0=$(now_ns)
  case $mode in
    s_task|s_task0) spectr ralph c --commit task </dev/null >/dev/null 2>"$PB/last.err" || rc=$? ;;
    s_off|s_off0)   spectr ralph c --commit off </dev/null >/dev/null 2>"$PB/last.err" || rc=$? ;;
    s_none|s_none0) spectr ralph c --commit off --no-checkpoint </dev/null >/dev/null 2>"$PB/last.err" || rc=$? ;;
    r_ac|r_off|r_0) "${RT_CMD[@]}" </dev/null >/dev/null 2>"$PB/last.err" || rc=$? ;;
  esac
  t1=$(now_ns)
  [ "$mode" = s_task ] || [ "$mode" = r_ac ] && want_commits=$NT
  local outs commits
  outs=$( (git ls-files --others out; git ls-files out) | grep -c '\.txt$' || true)
  commits=$(( $(git rev-list --count HEAD) - before ))
  if [ $rc -ne 0 ] || [ "$outs" -ne "$want_out" ] || { [ $want_commits -gt 0 ] && [ "$commits" -ne $want_commits ]; }; then
    echo "FAIL $mode in $dir: rc=$rc outs=$outs commits=$commits" >&2; cat "$PB/last.err" >&2; exit 1
  fi
  echo $(( (t1 - t0) / 1000000 ))
}

MODES=(s_task s_off s_none s_task0 s_off0 s_none0 r_ac r_off r_0)
RES=$PB/results.tsv; : > "$RES"
for n in "${SIZES[@]}"; do
  sd=$SHM/s$n rd=$SHM/r$n
  "$HERE/mkrepo.sh" spectr "$sd" "$n" $NT
  "$HERE/mkrepo.sh" ralph  "$rd" "$n" $NT
  # one warm-up of every mode (page cache, git index, bun's transpile cache)
  for m in "${MODES[@]}"; do case $m in s_*) run_one $m "$sd" >/dev/null ;; *) run_one $m "$rd" >/dev/null ;; esac; done
  for ((r=1; r<=ROUNDS; r++)); do
    for m in "${MODES[@]}"; do
      case $m in s_*) d=$sd ;; *) d=$rd ;; esac
      printf '%s\t%s\t%s\t%s\n' "$n" "$r" "$m" "$(run_one $m "$d")" >> "$RES"
    done
  done
done

echo "# load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$RES" "$NT" <<'PY'
import sys, statistics as st, collections
rows=[l.split('\t') for l in open(sys.argv[1]).read().split('\n') if l]
nt=int(sys.argv[2])
d=collections.defaultdict(list)
for n,r,m,ms in rows: d[(int(n),m)].append(int(ms))
med=lambda n,m: st.median(d[(n,m)])
label={'s_task':'spectr --commit task','s_off':'spectr --commit off','s_none':'spectr --commit off --no-checkpoint',
       'r_ac':'ralph-tui autoCommit=true','r_off':'ralph-tui autoCommit=false'}
start={'s_task':'s_task0','s_off':'s_off0','s_none':'s_none0','r_ac':'r_0','r_off':'r_0'}
for n in sorted({k[0] for k in d}):
  print(f"\n## {n} files, {nt} tasks, median of {len(d[(n,'s_task')])} rounds (all runs ms: see {sys.argv[1]})")
  print(f"{'mode':40} {'run ms':>8} {'startup ms':>10} {'ms/task (run-startup)/N':>24} {'ms/task run/N':>14}  runs")
  pt={}
  for m in ['s_task','s_off','s_none','r_ac','r_off']:
    run=med(n,m); s0=med(n,start[m]); pt[m]=(run-s0)/nt
    print(f"{label[m]:40} {run:8.0f} {s0:10.0f} {pt[m]:24.1f} {run/nt:14.1f}  {sorted(d[(n,m)])}")
  print(f"ratio per-task overhead spectr --commit task / ralph-tui autoCommit=true        = {pt['s_task']/pt['r_ac']:.2f}")
  print(f"ratio per-task overhead spectr --commit off --no-checkpoint / ralph-tui no git  = {pt['s_none']/pt['r_off']:.2f}")
  print(f"ratio per-task overhead spectr --commit off / ralph-tui no git                  = {pt['s_off']/pt['r_off']:.2f}")
PY
