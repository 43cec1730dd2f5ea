# Shared steps of bench/embedded.sh, bench/postgres.sh and bench/scaleout.sh, sourced by
# each right after it sets `script` (its name, for messages), `root`, `rows`, `runs` and
# `bin`. They keep the current step in `step`, the Python driver's pid in `py` and the
# temporary folder in `work`.

step=setup
work=
py=

fail() { echo "$script: FAILED at step '$step'${1:+: $1}" >&2; exit 1; }

# The exit trap: stops the Python driver and the servers it started (`$work/server.pids`),
# runs the script's `bench_cleanup_more` if it has one (a schema or a database to drop),
# removes `work` unless KEEP is set, and exits with the script's status.
bench_cleanup() {
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
  if declare -F bench_cleanup_more >/dev/null; then bench_cleanup_more; fi
  if [ -n "$work" ] && [ -d "$work" ]; then
    if [ -n "${KEEP:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
  fi
  [ "$rc" -eq 0 ] || echo "$script: exit $rc (step '$step')" >&2
  exit "$rc"
}
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

case $rows in ''|*[!0-9]*) fail "ROWS must be a number of rows, got '$rows'" ;; esac
case $runs in ''|*[!0-9]*|0) fail "RUNS must be a positive number, got '$runs'" ;; esac
command -v python3 >/dev/null || fail "python3 is needed"

# The machine's facts, the first lines of a report.
bench_machine() {
  echo "- nproc: $(nproc)"
  echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "- RAM: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
}

eval_bench() { cargo bench -p usage-core --bench eval --quiet -- "$@"; }

# The eval bench built, and the server: the release build of this tree unless `bin` names
# one; sets `bin` (absolute) and `what` (which build, for the report).
bench_builds() {
  step="build the eval bench"
  cargo bench -p usage-core --bench eval --no-run --quiet || fail
  if [ -z "$bin" ]; then
    step="build the release server"
    cargo build --release -p usage-server --bin usage-server --quiet || fail
    bin=$root/target/release/usage-server
    what="this tree, $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' + uncommitted changes')"
  else
    what="BIN=$bin"
  fi
  step="server binary"
  [ -x "$bin" ] || fail "no executable at $bin"
  bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
}

# The CSV of the DuckDB benchmark and its JSONL load records for `rows` rows, cached under
# bench/data; sets `csv` and `jsonl`.
bench_data() {
  step="data"
  mkdir -p bench/data
  csv=$root/bench/data/autocomplete-$rows.csv
  jsonl=$root/bench/data/autocomplete-$rows.jsonl
  if [ ! -s "$csv" ]; then
    eval_bench gen --rows "$rows" --csv "$csv.tmp" || fail
    mv "$csv.tmp" "$csv"
  fi
  if [ ! -s "$jsonl" ] || [ "$jsonl" -ot "$csv" ]; then
    eval_bench jsonl --csv "$csv" --out "$jsonl.tmp" || fail
    mv "$jsonl.tmp" "$jsonl"
  fi
}

# The in-memory evaluator's answers and medians (`$1/ours.json`) and the six request bodies
# (`$1/queries.jsonl`).
bench_answers() {
  step="in-memory evaluator's answers"
  echo "== $rows rows: in-memory evaluator" >&2
  eval_bench run --csv "$csv" --runs "$runs" --out "$1/ours.json" || fail
  local first_day
  first_day=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["first_day"])' "$1/ours.json")
  eval_bench queries --first-day "$first_day" >"$1/queries.jsonl" || fail
  [ "$(wc -l <"$1/queries.jsonl")" -eq 6 ] || fail "expected 6 queries from the eval bench"
}
