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
# DuckDB (one thread) on the same CSV, as bench/run.sh runs it: issue 16's pushdown target
# is PostgreSQL <= 10x DuckDB single-thread.
duckdb_version=2.0.0
if ! bench/.venv/bin/python -c "import duckdb, sys; sys.exit(duckdb.__version__ != '$duckdb_version')" 2>/dev/null; then
  python3 -m venv bench/.venv
  bench/.venv/bin/pip install --quiet "duckdb==$duckdb_version"
fi
duck=$root/bench/data/duck-$rows.json
bench/.venv/bin/python bench/duck.py "$csv" "$runs" "$duck" >&2
echo "- DuckDB $duckdb_version (Python package, SET threads=1) on the same CSV, medians of $runs runs"
echo
cargo bench -p usage-server --bench postgres --quiet -- --csv "$csv" --url "$url" --runs "$runs" --duck "$duck"
