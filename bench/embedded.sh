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

script=bench/embedded.sh
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
bench_machine
echo "- rustc: $(rustc --version)"
echo "- server: $what ($("$bin" --version))"
echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- medians of $runs runs per query over HTTP (one keep-alive connection); answers compared value by value (AVG to 1e-12 relative)"
cat "$work/report.md"
