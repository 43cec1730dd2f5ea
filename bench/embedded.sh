#!/usr/bin/env bash
# The embedded store (`sqlite:PATH`) at scale, as a new user meets it (issue 15, Acceptance):
# `usage-server import` of ROWS autocomplete records, bytes on disk per row, `serve` to a
# healthy `/healthz`, resident memory above an empty server's, and Q1-Q6 of QUERIES.md over
# HTTP with every answer compared to the in-memory evaluator's on the same rows.
#
#   bash bench/embedded.sh                          # 10M rows, release build, 5 runs a query
#   ROWS=2000000 bash bench/embedded.sh             # quicker
#   BIN=/path/to/usage-server bash bench/embedded.sh   # another build (e.g. an older commit)
#   RUNS=3 KEEP=1 bash bench/embedded.sh            # KEEP: leave the temporary store behind
#
# Data: the deterministic generator of usage-core/benches/eval.rs (`gen`, the CSV that
# bench/run.sh uses), rewritten as JSONL load records (`jsonl`), both cached under
# bench/data (ignored by git). The queries are printed by the same bench (`queries`), the
# reference answers written by its `run`. Prints machine facts and Markdown tables; exits
# non-zero if a step fails or an answer differs (targets missed are reported, not fatal).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
rows=${ROWS:-10000000}
runs=${RUNS:-5}
bin=${BIN:-}

step=setup
work=
py=
fail() { echo "bench/embedded.sh: FAILED at step '$step'${1:+: $1}" >&2; exit 1; }
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$py" ] && kill -0 "$py" 2>/dev/null; then
    kill -TERM "$py" 2>/dev/null || true
    wait "$py" 2>/dev/null || true
  fi
  if [ -n "$work" ] && [ -f "$work/server.pids" ]; then
    while read -r pid; do
      kill -KILL "$pid" 2>/dev/null || true
    done <"$work/server.pids"
  fi
  if [ -n "$work" ] && [ -d "$work" ]; then
    if [ -n "${KEEP:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
  fi
  [ "$rc" -eq 0 ] || echo "bench/embedded.sh: exit $rc (step '$step')" >&2
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

case $rows in ''|*[!0-9]*) fail "ROWS must be a number of rows, got '$rows'" ;; esac
case $runs in ''|*[!0-9]*|0) fail "RUNS must be a positive number, got '$runs'" ;; esac
command -v python3 >/dev/null || fail "python3 is needed"

# shellcheck source=bench/common.sh
. bench/common.sh
bench_builds

bench_data

work=$(mktemp -d "${TMPDIR:-/tmp}/embbench.XXXXXX")

bench_answers "$work"

step="store"
echo "== $rows rows: $bin" >&2
python3 bench/embedded/bench.py --bin "$bin" --jsonl "$jsonl" --rows "$rows" \
  --queries "$work/queries.jsonl" --answers "$work/ours.json" --runs "$runs" \
  --workdir "$work" >"$work/report.md" &
py=$!
wait "$py" || { py=; fail "see the lines above"; }
py=

step="report"
echo "## Machine"
echo
echo "- nproc: $(nproc)"
echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "- RAM: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "- rustc: $(rustc --version)"
echo "- server: $what ($("$bin" --version))"
echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- medians of $runs runs per query over HTTP (one keep-alive connection); answers compared value by value (AVG to 1e-12 relative)"
cat "$work/report.md"
