#!/usr/bin/env bash
# The six queries of QUERIES.md on the PostgreSQL store against the in-memory evaluator,
# same rows, one run. Needs the local PostgreSQL (bash .ci/postgres makes it available).
#
#   bash bench/postgres.sh                       # 1M rows, 5 runs
#   ROWS=100000 RUNS=3 bash bench/postgres.sh
#   URL=postgres://user@host/db bash bench/postgres.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
rows=${ROWS:-1000000}
runs=${RUNS:-5}
url=${URL:-postgres://postgres@127.0.0.1:5432/test}
mkdir -p bench/data
csv=$root/bench/data/autocomplete-$rows.csv
[ -s "$csv" ] || cargo bench -p usage-core --bench eval --quiet -- gen --rows "$rows" --csv "$csv"
echo "- nproc: $(nproc); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); rustc: $(rustc --version)"
echo "- medians of $runs runs per query; answers compared value by value (AVG to 1e-12)"
echo
cargo bench -p usage-server --bench postgres --quiet -- --csv "$csv" --url "$url" --runs "$runs"
