# Shared steps of bench/embedded.sh and bench/postgres.sh, sourced by both. They use the
# caller's `root`, `rows`, `runs`, `bin`, `step` and `fail`.

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
