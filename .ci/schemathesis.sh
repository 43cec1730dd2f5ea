#!/usr/bin/env bash
# The OpenAPI document against the server (issue 17): validates docs/openapi.json with
# openapi-spec-validator, then runs schemathesis against a demo server built by the tests
# (target/debug/usage-server): every operation, positive and negative cases; fails on a 5xx,
# a status code, content type, header or body the document does not describe, or a
# request the document refuses that the server accepts. See docs/openapi.md.
#
# Extra arguments go to `schemathesis run` (e.g. --include-path-regex Ingest).
# Env: MAX_EXAMPLES (default 30 per operation and phase), SEEDS (default "1 2 3", or SEED: the
# whole run once per seed, each finding other cases), BIN.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.ci/.venv
bin=${BIN:-target/debug/usage-server}
# Pinned: a new release may add checks or change flags.
pins=(schemathesis==4.32.5 openapi-spec-validator==0.9.0)

if ! command -v python3 >/dev/null || ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  apt-get update -qq && apt-get install -y -qq python3 python3-venv >/dev/null
fi
if [ ! -x "$venv/bin/schemathesis" ] || ! "$venv/bin/pip" freeze 2>/dev/null | grep -qx "${pins[0]}"; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "${pins[@]}"
fi

echo "+ openapi-spec-validator docs/openapi.json"
"$venv/bin/openapi-spec-validator" docs/openapi.json

[ -x "$bin" ] || cargo build -p usage-server --locked
tmp=$(mktemp -d)
server=
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

"$bin" --store "sqlite:$tmp/s.db" serve --demo --listen 127.0.0.1:0 \
  --rate-per-minute 1000000 --rate-burst 100000 >"$tmp/out" 2>"$tmp/server.log" &
server=$!
for _ in $(seq 1 300); do
  [ -s "$tmp/out" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$tmp/server.log" >&2; echo "the server exited" >&2; exit 1; }
  sleep 0.2
done
read -r listen key < <(python3 -c 'import json,sys; d=json.loads(sys.stdin.readline()); print(d["listen"], d["service_key"])' <"$tmp/out")
echo "demo server on $listen"

# The hooks put the demo key into request bodies (.ci/schemathesis_hooks.py).
st() {
  USAGE_KEY=$key SCHEMATHESIS_HOOKS=schemathesis_hooks PYTHONPATH=.ci \
    "$venv/bin/schemathesis" run docs/openapi.json \
    --url "http://$listen" \
    --mode all \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance,negative_data_rejection \
    --max-examples "${MAX_EXAMPLES:-30}" \
    --seed "$seed" \
    --workers 1 \
    --request-timeout 30 \
    --max-failures 20 \
    --suppress-health-check all \
    --warnings off \
    --no-color "$@"
}
start=$(date +%s)
status=0
# One worker: with two threads, hypothesis's lambda descriptions run `ast.parse` at once on
# both, which CPython 3.11 does not support ("AST constructor recursion depth mismatch", a
# runtime error of schemathesis, seen in CI).
# Per seed: the POST operations and the service endpoints, then the v2 GETs. The coverage
# phase (about 7,400 cases, 10 minutes, the same cases whatever the seed) runs with the
# first seed only; the examples and the fuzzing, which the seed changes, with every seed.
phases=examples,coverage,fuzzing
for seed in ${SEEDS:-${SEED:-1 2 3}}; do
  echo "== seed $seed"
  st --phases "$phases" --exclude-path-regex '^/api/v2/' "$@" || status=$?
  phases=examples,fuzzing
  # The GET endpoints (query parameters) without the coverage phase: schemathesis 4.32's
  # coverage walk of query parameters crashes in hypothesis on this Python (its own
  # "AST constructor recursion depth mismatch", not an answer of the server).
  # A webhook's test delivery is left out: it waits up to 10 s for whatever host a generated
  # URL names (tests/server/webhooks.rs covers it).
  st --phases examples,fuzzing --include-path-regex '^/api/v2/' --exclude-path-regex '/test$' "$@" || status=$?
done
echo "schemathesis: exit $status in $(( $(date +%s) - start )) s"
echo "answers by operation and status (server log):"
grep -o 'method=[A-Z]* op=[^ ]* team=[^ ]* status=[0-9]*' "$tmp/server.log" |
  sed 's/ team=[^ ]*//' | sort | uniq -c | sort -k3,3 -k4,4 | sed 's/^/  /' || true
if grep -q ' status=5' "$tmp/server.log"; then
  echo "the server answered 5xx:" >&2
  grep ' status=5' "$tmp/server.log" | head -20 >&2
  status=1
fi
exit "$status"
