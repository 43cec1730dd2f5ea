#!/usr/bin/env bash
# The soak test (issue 14, point 7), full length, on a release build of usage-server:
# 2 minutes of the six operations from 8 connections at twice a key's rate limit, with
# concurrent Ingest, concurrent CLI imports and 50 slow connections; loopback only.
#
#   bash bench/soak.sh                 # 120 s
#   DURATION=30 bash bench/soak.sh     # shorter
#
# Prints the requests by status, the records acknowledged, imported and counted, the
# server's peak RSS and the p50/p99 of a small query; exits 1 on any 5xx, a lost record, a
# connection error, or a peak RSS over the bound (see bench/soak/soak.py). `.ci/run` runs a
# 20-second version against the debug binary that the tests built.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p usage-server --locked --quiet
echo "- nproc: $(nproc); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $(rustc --version)"
exec python3 bench/soak/soak.py target/release/usage-server --duration "${DURATION:-120}" "$@"
