#!/usr/bin/env bash
# Server memory for one request full of errors (contract section 11, Error size): the peak
# RSS growth of `usage-server serve` (VmHWM before and after the request) and the size of
# the 400, for
#   a. a 1 MB Analytics body of 500,000 wrong-kind selections, no key;
#   b. a 2 MB Ingest body of 1,000,000 wrong-kind records, with a valid key.
# Each case runs on a fresh server (memory store, --demo key). Give binaries to compare:
#
#   bash bench/error_memory.sh                                  # target/release/usage-server
#   bash bench/error_memory.sh /tmp/usage-server-old target/release/usage-server
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- target/release/usage-server
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
pid=
ones() { yes 1 | head -n "$1" | paste -sd, -; }
printf '{"query_requests":[{"data_source":"QUERY_DATA_SOURCE_USER_DATA","selections":[%s]}]}' \
    "$(ones 500000)" >"$tmp/a.json"
printf '{"service_key":"KEY","kind":"autocomplete","records":[%s]}' "$(ones 1000000)" >"$tmp/b.json"
hwm() { awk '/^VmHWM/ {print int($2 / 1024)}' "/proc/$1/status"; }
printf '| binary | case | body | status | response | details | VmHWM before | after | growth |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
for bin in "$@"; do
    for case in a b; do
        "$bin" serve --store memory: --demo --listen 127.0.0.1:0 >"$tmp/out" 2>/dev/null &
        pid=$!
        until [ -s "$tmp/out" ]; do sleep 0.1; done
        addr=$(sed 's/.*"listen":"\([^"]*\)".*/\1/' "$tmp/out")
        key=$(sed 's/.*"service_key":"\([^"]*\)".*/\1/' "$tmp/out")
        if [ $case = a ]; then op=Analytics; body=$tmp/a.json; else
            op=Ingest; body=$tmp/b.json; sed -i "s/KEY/$key/" "$body"; fi
        before=$(hwm "$pid")
        status=$(curl -s -o "$tmp/resp" -w '%{http_code}' -X POST "http://$addr/api/v1/$op" \
            -H 'Content-Type: application/json' --data-binary @"$body")
        after=$(hwm "$pid")
        details=$(grep -o '"path"' "$tmp/resp" | wc -l)
        printf '| %s | %s | %s B | %s | %s B | %s | %s MB | %s MB | +%s MB |\n' "$bin" $case \
            "$(stat -c %s "$body")" "$status" "$(stat -c %s "$tmp/resp")" "$details" \
            "$before" "$after" $((after - before))
        [ $case = a ] || sed -i "s/$key/KEY/" "$body"
        kill "$pid"
        wait "$pid" 2>/dev/null || true
        : >"$tmp/out"
    done
done
