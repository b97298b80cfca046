#!/usr/bin/env bash
# mkrepo.sh KIND DIR NFILES NTASKS   (KIND = spectr | ralph)
set -euo pipefail
kind=$1 dir=$2 nfiles=$3 ntasks=$4
rm -rf "$dir"; mkdir -p "$dir"; cd "$dir"
git init -q -b main .
git config user.name bench; git config user.email bench@example.com
git config commit.gpgsign false
for ((i=0;i<nfiles;i++)); do
  m=$((i/100)); mkdir -p src/m$m
  printf 'pub fn f%d() -> u32 { %d }\n' "$i" "$i" > src/m$m/f$i.rs
done
mkdir -p out; : > out/.keep
if [ "$kind" = spectr ]; then
  mkdir -p spectr/changes/c
  printf '# Change c\n\n## Why\nBenchmark.\n\n## What Changes\n- tasks\n' > spectr/changes/c/proposal.md
  { echo '{ "version": 1, "tasks": ['
    for ((t=1;t<=ntasks;t++)); do
      sep=,; [ $t -eq $ntasks ] && sep=
      echo "  { \"id\": \"1.$t\", \"section\": \"S\", \"description\": \"d\", \"status\": \"pending\" }$sep"
    done
    echo '] }'; } > spectr/changes/c/tasks.jsonc
else
  mkdir -p .ralph-tui
  # description line "Task ID: <id>" lets the shared fake agent know its task
  { echo '{ "name": "bench", "userStories": ['
    for ((t=1;t<=ntasks;t++)); do
      sep=,; [ $t -eq $ntasks ] && sep=
      echo "  { \"id\": \"T$t\", \"title\": \"t$t\", \"description\": \"Task ID: T$t\", \"acceptanceCriteria\": [], \"priority\": 1, \"passes\": false, \"dependsOn\": [] }$sep"
    done
    echo '] }'; } > prd.json
  cat > .ralph-tui/config.toml <<'T'
defaultAgent = "claude"
defaultTracker = "json"
maxIterations = 0
iterationDelay = 0
autoCommit = false
configVersion = "2.1"
T
fi
git add -A; git commit -qm base; git tag base-tag
if [ "$kind" = spectr ]; then
  sed -i 's/"pending"/"completed"/' spectr/changes/c/tasks.jsonc
  git commit -qam done; git tag done-tag
else
  sed -i 's/"passes": false/"passes": true/' prd.json
  git commit -qam done; git tag done-tag
  git checkout -q base-tag
  sed -i 's/^autoCommit = false$/autoCommit = true/' .ralph-tui/config.toml
  git commit -qam autocommit; git tag ac-tag
fi
git checkout -q main; git reset -q --hard base-tag
