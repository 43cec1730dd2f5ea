# Shared steps of bench/embedded.sh and bench/postgres.sh, sourced by both. They use the
# caller's `root`, `rows`, `runs`, `step`, `fail` and `eval_bench`.

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
