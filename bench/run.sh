#!/usr/bin/env bash
# Benchmark of the columnar evaluator against DuckDB (one thread) on the six queries of
# QUERIES.md, on the same synthetic autocomplete rows, in one run.
#
#   bash bench/run.sh                 # 1M and 10M rows, 5 runs each
#   ROWS=1000000 RUNS=3 bash bench/run.sh
#
# Installs the pinned DuckDB into bench/.venv, writes the data once as CSV under
# bench/data (both ignored by git), prints the machine facts and a Markdown table of
# medians, ratios, load times and memory per row, and fails if any answer differs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
duckdb_version=2.0.0
rows_list=${ROWS:-"1000000 10000000"}
runs=${RUNS:-5}

if ! bench/.venv/bin/python -c "import duckdb, sys; sys.exit(duckdb.__version__ != '$duckdb_version')" 2>/dev/null; then
  python3 -m venv bench/.venv
  bench/.venv/bin/pip install --quiet "duckdb==$duckdb_version"
fi
mkdir -p bench/data
cargo bench -p usage-core --bench eval --no-run --quiet
bench() { cargo bench -p usage-core --bench eval --quiet -- "$@"; }

pairs=()
for rows in $rows_list; do
  csv=$root/bench/data/autocomplete-$rows.csv
  [ -s "$csv" ] || bench gen --rows "$rows" --csv "$csv"
  echo "== $rows rows: usage-core" >&2
  bench run --csv "$csv" --runs "$runs" --out "$root/bench/data/ours-$rows.json"
  echo "== $rows rows: DuckDB $duckdb_version" >&2
  bench/.venv/bin/python bench/duck.py "$csv" "$runs" "$root/bench/data/duck-$rows.json"
  pairs+=("$root/bench/data/ours-$rows.json" "$root/bench/data/duck-$rows.json")
done

echo "## Machine"
echo
echo "- nproc: $(nproc)"
echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "- RAM: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "- rustc: $(rustc --version)"
echo "- duckdb: $(bench/.venv/bin/python -c 'import duckdb; print(duckdb.__version__)') (Python package, SET threads=1)"
echo "- medians of $runs runs per query; answers compared row by row"
bench/.venv/bin/python bench/report.py "${pairs[@]}"
