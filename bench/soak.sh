#!/usr/bin/env bash
# The soak test (issues 14, point 7, and 28), full length, on a release build of
# usage-server: 2 minutes of the six operations from 8 connections at twice a key's rate
# limit, with concurrent Ingest, concurrent CLI imports and 50 slow connections, for a light
# team, beside a heavy team on 16 connections (huge group-bys, 20-query raw requests, 1 MB
# unknown names, slow CSV export readers) and probes of the light team's small query and
# /healthz; loopback only.
#
#   bash bench/soak.sh                 # 120 s
#   DURATION=30 bash bench/soak.sh     # shorter
#   bash bench/soak.sh --no-heavy      # without the heavy team, for comparison
#
# Prints the requests by status, the records acknowledged, imported and counted, the heavy
# requests by kind and status, the server's peak RSS and the p50/p99 of the light team's small
# query and /healthz; exits 1 on any 5xx, a lost record, a connection error, an answer of
# the heavy team other than expected, a light p99 over 500 ms, or a peak RSS over 1 GiB (see
# bench/soak/soak.py). `.ci/run` runs a 20-second version against the debug binary that the
# tests built.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p usage-server --locked --quiet
echo "- nproc: $(nproc); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $(rustc --version)"
exec python3 bench/soak/soak.py target/release/usage-server --duration "${DURATION:-120}" "$@"
