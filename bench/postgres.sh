#!/usr/bin/env bash
# The PostgreSQL store at scale, as a user meets it (issue 16, Acceptance), in one run:
# `usage-server import` of ROWS autocomplete records into PostgreSQL (and, for reference,
# into the embedded store); the embedded store's Q1-Q6 over HTTP; `serve` on PostgreSQL with
# its columnar cache (the first query while the team loads, the load's seconds and bytes
# from the server's log, Q1-Q6 warm against the embedded store); `serve --cache-bytes 0`
# (every query in SQL) against DuckDB on one thread. Every answer is compared with the
# in-memory evaluator's on the same rows. Needs the local PostgreSQL (bash .ci/postgres
# makes it available).
#
#   bash bench/postgres.sh                          # 1M rows, release build, 5 runs a query
#   ROWS=100000 RUNS=3 bash bench/postgres.sh       # quicker
#   URL=postgres://user@host/db bash bench/postgres.sh
#   BIN=/path/to/usage-server bash bench/postgres.sh   # another build (e.g. an older commit)
#   KEEP=1 bash bench/postgres.sh                   # leave the temporary files and schema behind
#   INPROC=1 bash bench/postgres.sh                 # also the in-process bench
#                                                   # (usage-server/benches/postgres.rs)
#
# Data: as bench/embedded.sh (the generator of usage-core/benches/eval.rs, cached under
# bench/data). The run uses a fresh schema `bench_PID` of the database at URL, dropped at
# the end. Prints machine facts and Markdown tables; exits non-zero if a step fails or an
# answer differs (targets missed are reported, not fatal).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
rows=${ROWS:-1000000}
runs=${RUNS:-5}
url=${URL:-postgres://postgres@127.0.0.1:5432/test}
bin=${BIN:-}

script=bench/postgres.sh
# shellcheck source=bench/common.sh
. bench/common.sh
schema=
# The exit trap's share: the run's schema goes (bench/common.sh's `bench_cleanup`).
bench_cleanup_more() {
  if [ -n "$schema" ]; then
    if [ -n "${KEEP:-}" ]; then
      echo "kept schema $schema" >&2
    else
      psql "$url" -qX -c "SET client_min_messages = warning" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null ||
        echo "bench/postgres.sh: could not drop schema $schema" >&2
    fi
  fi
}
command -v psql >/dev/null || fail "psql is needed"

step="PostgreSQL"
psql "$url" -qX -c "SELECT 1" >/dev/null || fail "no PostgreSQL at $url"

bench_builds

bench_data

work=$(mktemp -d "${TMPDIR:-/tmp}/pgbench.XXXXXX")

bench_answers "$work"

# DuckDB (one thread) on the same CSV, as bench/run.sh runs it: issue 16's pushdown target
# is PostgreSQL <= 10x DuckDB single-thread.
step="DuckDB"
duckdb_version=2.0.0
if ! bench/.venv/bin/python -c "import duckdb, sys; sys.exit(duckdb.__version__ != '$duckdb_version')" 2>/dev/null; then
  python3 -m venv bench/.venv || fail
  bench/.venv/bin/pip install --quiet "duckdb==$duckdb_version" || fail
fi
echo "== $rows rows: DuckDB" >&2
duck=$work/duck.json
bench/.venv/bin/python bench/duck.py "$csv" "$runs" "$duck" >&2 || fail

step="schema"
schema=bench_$$
psql "$url" -qX -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" -c "DROP SCHEMA IF EXISTS $schema CASCADE" -c "CREATE SCHEMA $schema" >/dev/null || fail
case $url in *\?*) sep='&' ;; *) sep='?' ;; esac
store_url="$url${sep}options=-csearch_path%3D$schema"

step="stores"
echo "== $rows rows: $bin" >&2
python3 bench/postgres/bench.py --bin "$bin" --jsonl "$jsonl" --rows "$rows" \
  --queries "$work/queries.jsonl" --answers "$work/ours.json" --runs "$runs" \
  --workdir "$work" --url "$store_url" --duck "$duck" >"$work/report.md" &
py=$!
wait "$py" || { py=; fail "see the lines above"; }
py=

if [ -n "${INPROC:-}" ]; then
  step="in-process bench"
  cargo bench -p usage-server --bench postgres --quiet -- --csv "$csv" --url "$url" \
    --runs "$runs" --duck "$duck" >"$work/inproc.md" || fail
fi

step="report"
echo "## Machine"
echo
bench_machine
echo "- rustc: $(rustc --version)"
echo "- server: $what ($("$bin" --version)); bench scripts at $(git rev-parse --short HEAD)"
echo "- PostgreSQL: $(psql "$url" -AtqX -c 'SHOW server_version') at ${url%%\?*}"
echo "- DuckDB $duckdb_version (Python package, SET threads=1) on the same CSV"
echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- medians of $runs runs per query over HTTP (one keep-alive connection); answers compared value by value (AVG to 1e-12 relative)"
cat "$work/report.md"
if [ -n "${INPROC:-}" ]; then
  echo
  echo "### In-process (usage-server/benches/postgres.rs: the store's calls, no HTTP)"
  echo
  cat "$work/inproc.md"
fi
