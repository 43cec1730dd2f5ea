#!/usr/bin/env bash
# The HTTP hot path (issue 15, point 3): requests/s of a small `Analytics` query (one SUM
# over the demo data of `serve --demo` on a SQLite store) against a bare warp JSON echo
# (bench/http/echo.rs) on the same machine, side by side in one run, alternating rounds.
# Target: ours >= 0.5x the echo.
#
# And the credit check an assistant's backend makes before a costly request
# (`GET /api/v2/credits/users/{email}`, contract section 12) against the same Analytics
# query in the same rounds. Targets: >= 0.8x the Analytics query's requests/s, p99 within
# 2 ms at 16 connections (wrk's latency distribution).
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
# A user of the demo team, for the credit check (its first in e-mail order).
email=$(python3 - "$listen" "$key" <<'EOF'
import json, sys, urllib.request
listen, key = sys.argv[1:]
req = urllib.request.Request(f"http://{listen}/api/v2/credits/users?limit=1",
                             headers={"Authorization": f"Bearer {key}"})
with urllib.request.urlopen(req, timeout=10) as r:
    print(json.loads(r.read())["data"][0]["email"])
EOF
)
check_path="/api/v2/credits/users/${email//@/%40}"
cat >"$tmp/check.lua" <<EOF
wrk.method = "GET"
wrk.headers["Authorization"] = "Bearer $key"
EOF
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
python3 - "$listen" "$key" "$check_path" <<'EOF'
import json, sys, urllib.request
listen, key, path = sys.argv[1:]
req = urllib.request.Request(f"http://{listen}{path}", headers={"Authorization": f"Bearer {key}"})
with urllib.request.urlopen(req, timeout=10) as r:
    st, c = r.status, json.loads(r.read())
assert st == 200 and "has_access" in c, (st, c)
print(f"- the check answers 200 for {c['email']}: has_access {c['has_access']}, add_on_credits_used {c['add_on_credits_used']}")
EOF

# "requests/s p99-in-ms" of one wrk run of script $2 (default: the POST); fails on non-2xx
# answers or socket errors.
run() {
    local out
    out=$(wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "${2:-$tmp/post.lua}" "$1")
    if grep -qE 'Non-2xx|Socket errors' <<<"$out"; then
        echo "wrk against $1:" >&2
        echo "$out" >&2
        exit 1
    fi
    awk '/^Requests\/sec:/ {rps = $2}
         /^ +99%/ {v = $2; ms = v + 0; if (v ~ /us$/) ms /= 1000; else if (v ~ /[0-9]s$/) ms *= 1000}
         END {printf "%.0f %.3f", rps, ms}' <<<"$out"
}

echo "- nproc: $(nproc); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $(rustc --version); $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)"
echo "- wrk -t1 -c$CONNECTIONS -d${DURATION}s, POST; server: $SERVER"
echo
echo "| round | echo req/s | Analytics req/s | Analytics / echo | check req/s | check / Analytics | p99 ms: echo | Analytics | check |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
sum_echo=0
sum_ours=0
sum_check=0
worst_p99=0
for r in $(seq "$ROUNDS"); do
    # Assigned first, so that a failed run stops the script (set -e).
    re=$(run "http://127.0.0.1:$echo_port/")
    ro=$(run "http://$listen/api/v1/Analytics")
    rc=$(run "http://$listen$check_path" "$tmp/check.lua")
    read -r e e99 <<<"$re"
    read -r o o99 <<<"$ro"
    read -r c c99 <<<"$rc"
    sum_echo=$((sum_echo + e))
    sum_ours=$((sum_ours + o))
    sum_check=$((sum_check + c))
    worst_p99=$(awk -v a="$worst_p99" -v b="$c99" 'BEGIN {print (b > a) ? b : a}')
    awk -v r="$r" -v e="$e" -v o="$o" -v c="$c" -v e99="$e99" -v o99="$o99" -v c99="$c99" \
        'BEGIN {printf "| %d | %d | %d | %.2fx | %d | %.2fx | %.2f | %.2f | %.2f |\n", r, e, o, o / e, c, c / o, e99, o99, c99}'
done
awk -v e="$sum_echo" -v o="$sum_ours" -v c="$sum_check" -v n="$ROUNDS" -v w="$worst_p99" \
    'BEGIN {printf "| mean | %d | %d | **%.2fx** | %d | **%.2fx** | | | worst **%.2f** |\n", e / n, o / n, o / e, c / n, c / o, w}'
