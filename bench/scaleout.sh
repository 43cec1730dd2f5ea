#!/usr/bin/env bash
# Scale-out as a deployment runs it (issue 30, point 5), in one run: the local Citus cluster
# of ../shared/citus (a coordinator and two workers), three `serve` instances on it behind
# HAProxy with team affinity (the service key hashed: docs/citus.md, "Behind a load
# balancer"), and one embedded server on the same rows for reference. It reports:
# - the import rate of ROWS autocomplete records into Citus (`usage-server import`);
# - Q1-Q6 over HTTP through HAProxy against the embedded server, medians of RUNS, every
#   answer compared with the in-memory evaluator's;
# - a 30 s mixed load (queries, Ingest, caps) through HAProxy with one instance killed
#   (SIGKILL) at 10 s: no acknowledged write may be lost, and every request after the kill
#   must get an answer (the client retries a request cut in flight once; the count is
#   printed).
#
#   bash bench/scaleout.sh                    # 1M rows, release build, 5 runs a query
#   ROWS=10000000 bash bench/scaleout.sh      # 10M rows
#   ROWS=100000 RUNS=3 bash bench/scaleout.sh # quicker
#   BIN=/path/to/usage-server bash bench/scaleout.sh
#   KEEP=1 bash bench/scaleout.sh             # leave the temporary files and database
#
# Needs Citus (bash .ci/citus builds it and starts the cluster) and HAProxy (installed
# from Debian's packages when missing). The run uses a fresh database `scaleout_PID` on
# every node of the cluster, dropped at the end. Prints machine facts and Markdown
# tables; exits non-zero if a step fails, an answer differs or a write is lost (targets
# missed are reported, not fatal).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
rows=${ROWS:-1000000}
runs=${RUNS:-5}
bin=${BIN:-}
citus=../shared/citus

script=bench/scaleout.sh
# shellcheck source=bench/common.sh
. bench/common.sh
db=
# The exit trap's share: the run's database goes from every node (bench/common.sh's
# `bench_cleanup`).
bench_cleanup_more() {
  if [ -n "$db" ]; then
    if [ -n "${KEEP:-}" ]; then
      echo "kept database $db" >&2
    else
      bash "$citus/cluster.sh" dropdb "$db" >/dev/null 2>&1 ||
        echo "bench/scaleout.sh: could not drop database $db" >&2
    fi
  fi
}

step="HAProxy"
if ! command -v haproxy >/dev/null; then
  apt-get update -qq && apt-get install -y -qq haproxy >/dev/null || fail "could not install haproxy"
fi

step="Citus cluster"
bash .ci/citus >&2 || fail
db=scaleout_$$
bash "$citus/cluster.sh" createdb "$db" || fail
url=$(bash "$citus/cluster.sh" url "$db")

bench_builds
bench_data
work=$(mktemp -d "${TMPDIR:-/tmp}/scaleout.XXXXXX")
bench_answers "$work"

step="scale-out"
echo "== $rows rows: $bin, 3 instances behind HAProxy on Citus" >&2
python3 bench/scaleout/bench.py --bin "$bin" --jsonl "$jsonl" --rows "$rows" \
  --queries "$work/queries.jsonl" --answers "$work/ours.json" --runs "$runs" \
  --workdir "$work" --url "$url" >"$work/report.md" &
py=$!
wait "$py" || { py=; fail "see the lines above"; }
py=

step="report"
echo "## Machine"
echo
bench_machine
echo "- server: $what ($("$bin" --version)); bench scripts at $(git rev-parse --short HEAD)"
echo "- Citus $(psql "$url" -AtqX -c "SELECT extversion FROM pg_extension WHERE extname = 'citus'") on PostgreSQL $(psql "$url" -AtqX -c 'SHOW server_version'): coordinator and 2 workers on this machine"
echo "- $(haproxy -v | head -1 | cut -d' ' -f1-3)"
echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- medians of $runs runs per query over HTTP (one keep-alive connection); answers compared value by value (AVG to 1e-12 relative)"
cat "$work/report.md"
