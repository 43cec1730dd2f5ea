#!/usr/bin/env bash
# The HTTP hot path (issue 15, point 3): requests/s of a small `Analytics` query (one SUM
# over the demo data of `serve --demo` on a SQLite store) against a bare warp JSON echo
# (bench/http/echo.rs) on the same machine, side by side in one run, alternating rounds.
# Target: ours >= 0.5x the echo.
#
#   bash bench/http.sh                                  # 3 rounds of 10 s each
#   ROUNDS=2 DURATION=5 bash bench/http.sh              # quicker
#   SERVER=/path/to/usage-server bash bench/http.sh     # another build of the server
#
# wrk (Debian package `wrk`, installed if missing): 1 thread, 16 connections, POST with the
# same JSON body shape for both. The server runs with its request log on /dev/null (the
# formatting is still paid) and a rate limit no run reaches. Exits 1 if any Analytics
# answer is not a 200 or the echo was not reached.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-16}

if ! command -v wrk >/dev/null; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get install -y -qq wrk >/dev/null 2>&1 ||
        { $sudo apt-get update -qq && $sudo apt-get install -y -qq wrk >/dev/null; }
fi
cargo build --release --locked --quiet -p usage-server --bin usage-server
cargo build --release --locked --quiet -p usage --example echo
SERVER=${SERVER:-target/release/usage-server}
ECHO=target/release/examples/echo

tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

# The server: demo data on a fresh SQLite store; its first stdout line has the address
# and a fresh key.
"$SERVER" --store "sqlite:$tmp/bench.db" serve --listen 127.0.0.1:0 --demo \
    --rate-per-minute 4000000000 --rate-burst 4000000000 >"$tmp/server.out" 2>/dev/null &
pids+=($!)
for _ in $(seq 600); do [ -s "$tmp/server.out" ] && break; sleep 0.1; done
read -r listen key < <(python3 -c '
import json, sys
line = json.loads(open(sys.argv[1]).readline())
print(line["listen"], line["service_key"])' "$tmp/server.out")

# The echo, on a free port.
echo_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$ECHO" "127.0.0.1:$echo_port" &
pids+=($!)

body=$(python3 -c '
import json, sys
print(json.dumps({"service_key": sys.argv[1], "query_requests": [{
    "data_source": "QUERY_DATA_SOURCE_USER_DATA",
    "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}]}]}))' "$key")
printf '%s' "$body" >"$tmp/body.json"
cat >"$tmp/post.lua" <<EOF
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("$tmp/body.json")
wrk.body = f:read("*a")
f:close()
EOF

# One request of each, checked, before measuring (and the echo given time to bind).
python3 - "$listen" "$echo_port" "$tmp/body.json" <<'EOF'
import json, sys, time, urllib.request
listen, echo_port, path = sys.argv[1:]
body = open(path, "rb").read()
def post(url):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, json.loads(r.read())
for _ in range(100):
    try:
        st, echoed = post(f"http://127.0.0.1:{echo_port}/")
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("the echo did not answer")
assert (st, echoed) == (200, json.loads(body)), (st, echoed)
st, answer = post(f"http://{listen}/api/v1/Analytics")
total = answer["queryResults"][0]["responseItems"][0]["item"]["sum_num_acceptances"]
assert st == 200 and int(total) > 0, (st, answer)
print(f"- the query answers 200 with sum_num_acceptances = {total}")
EOF

# Requests/s of one wrk run; fails on non-2xx answers or socket errors.
run() {
    local out
    out=$(wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s "$tmp/post.lua" "$1")
    if grep -qE 'Non-2xx|Socket errors' <<<"$out"; then
        echo "wrk against $1:" >&2
        echo "$out" >&2
        exit 1
    fi
    awk '/^Requests\/sec:/ {printf "%.0f", $2}' <<<"$out"
}

echo "- nproc: $(nproc); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $(rustc --version); $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)"
echo "- wrk -t1 -c$CONNECTIONS -d${DURATION}s, POST; server: $SERVER"
echo
echo "| round | echo req/s | Analytics req/s | Analytics / echo |"
echo "|---:|---:|---:|---:|"
sum_echo=0
sum_ours=0
for r in $(seq "$ROUNDS"); do
    e=$(run "http://127.0.0.1:$echo_port/")
    o=$(run "http://$listen/api/v1/Analytics")
    sum_echo=$((sum_echo + e))
    sum_ours=$((sum_ours + o))
    awk -v r="$r" -v e="$e" -v o="$o" 'BEGIN {printf "| %d | %d | %d | %.2fx |\n", r, e, o, o / e}'
done
awk -v e="$sum_echo" -v o="$sum_ours" -v n="$ROUNDS" \
    'BEGIN {printf "| mean | %d | %d | **%.2fx** |\n", e / n, o / n, o / e}'
