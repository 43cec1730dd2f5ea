"""The PostgreSQL store at scale (issue 16), driven through the server's own CLI and HTTP
API, next to the embedded store on the same rows.

Run by bench/postgres.sh, which builds, writes the data, the in-memory evaluator's answers
and DuckDB's medians, creates a fresh schema, then calls:

    bench.py --bin BIN --jsonl FILE --rows N --queries QUERIES.jsonl --answers OURS.json
             --runs R --workdir DIR --url POSTGRES_URL [--duck DUCK.json]

Steps, each with a team and an analytics-read key made by the CLI:
1. the embedded store (`sqlite:PATH`): `import` timed (the reference rate), `serve`, one
   first query (not in the medians), Q1-Q6 over HTTP;
2. the PostgreSQL store at URL: `import` timed (target >= 200,000 records/s);
3. `serve` with its columnar cache (the default): the first Q1 after a healthy `/healthz`,
   timed (target <= 2 s at 1M rows; the cache loads the team meanwhile and the query is
   pushed down to SQL); then the wait for the server's `a team is loaded into the cache`
   line (rows, bytes, seconds); then Q1-Q6 warm (target <= 2x the embedded store);
4. `serve --cache-bytes 0` (every query in SQL): Q1-Q6 (target <= 10x DuckDB, one thread).
Every answer is compared value by value with the in-memory evaluator's (AVG to 1e-12
relative). Prints Markdown tables; exits 1 if an answer differs or a step fails (targets
missed are reported, not failures).

The helpers are bench/embedded/bench.py's. Python standard library only.
"""
import argparse
import json
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "embedded"))
import bench as emb  # noqa: E402  (bench/embedded/bench.py)
from bench import Failed, Server, diff, fmt_int, import_records, log, rows_of, run_queries, \
    setup_store  # noqa: E402

emb.TAG = "postgres"
LOAD_TIMEOUT_S = 900
LOADED = re.compile(r"a team is loaded into the cache.*")
FIELD = re.compile(r"\b(rows|bytes|seconds)=([\d.]+)")
LOAD_FAILED = re.compile(r"a team exceeds the cache's budget|loading a team into the cache failed")

IMPORT_TARGET = 200_000  # records/s
COLD_TARGET_S = 2.0
WARM_TARGET = 2.0  # x the embedded store
PUSHDOWN_TARGET = 10.0  # x DuckDB, one thread


def yes(ok):
    return "**met**" if ok else "**not met**"


def mib(b):
    return f"{b / 2**20:,.1f} MiB"


def served(server):
    """Waits for /healthz; seconds from spawn."""
    s = server.wait_healthy()
    log(f"{server.label}: healthy after {s:.2f} s")
    return s


def stop(server):
    code = server.stop()
    if code != 0:
        raise Failed(f"the {server.label} server exited {code} after SIGTERM:\n"
                     f"{server.stderr_tail()}")


def one_query(server, key, q, ours):
    """One request: (seconds, problem or None)."""
    status, answer, secs = server.post("/api/v1/Analytics", dict(q["body"], service_key=key))
    if status != 200:
        raise Failed(f"{q['name']}: HTTP {status}: {str(answer)[:500]}")
    return secs, diff(rows_of(answer, q["columns"]), ours["queries"][q["name"]]["rows"])


def wait_loaded(server):
    """The fields of the server's `a team is loaded into the cache` line, once it is logged."""
    t = time.monotonic()
    while True:
        text = server.stderr_text()
        m = LOADED.search(text)
        if m:
            fields = {k: float(v) for k, v in FIELD.findall(m.group(0))}
            if {"rows", "bytes", "seconds"} - fields.keys():
                raise Failed(f"the cache's load line lacks a field: {m.group(0)}")
            return fields, time.monotonic() - t
        bad = LOAD_FAILED.search(text)
        if bad:
            raise Failed(f"the team was not loaded into the cache: {bad.group(0)}\n"
                         f"{server.stderr_tail()}")
        if server.proc.poll() is not None:
            raise Failed(f"the {server.label} server exited ({server.proc.returncode}) "
                         f"before the team was loaded:\n{server.stderr_tail()}")
        if time.monotonic() - t > LOAD_TIMEOUT_S:
            raise Failed(f"no team loaded into the cache within {LOAD_TIMEOUT_S} s")
        time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    for a in ("--bin", "--jsonl", "--queries", "--answers", "--workdir", "--url"):
        ap.add_argument(a, required=True)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--duck")
    o = ap.parse_args()

    queries = [json.loads(l) for l in open(o.queries) if l.strip()]
    ours = json.load(open(o.answers))
    if ours["rows"] != o.rows:
        raise Failed(f"the in-memory evaluator loaded {ours['rows']} rows, not {o.rows}")
    duck = json.load(open(o.duck))["queries"] if o.duck else {}
    failed = False
    n = o.rows

    # 1. The embedded store: import rate and Q1-Q6, the references of the warm target.
    db = os.path.join(o.workdir, "sqlite", "usage.db")
    os.makedirs(os.path.dirname(db))
    sqlite = f"sqlite:{db}"
    team, key = setup_store(o.bin, sqlite)
    sq_import = import_records(o.bin, sqlite, team, o.jsonl, n)
    log(f"sqlite: imported in {sq_import[0]:.1f} s")
    s = Server(o.bin, sqlite, o.workdir, "sqlite")
    try:
        served(s)
        # Not in the medians: the embedded store opens a team on its first query.
        first_s, problem = one_query(s, key, queries[0], ours)
        failed |= problem is not None
        log(f"sqlite: first answer in {first_s:.2f} s")
        emb_results, f = run_queries(s, key, queries, ours, o.runs)
        failed |= f
        stop(s)
    finally:
        s.kill()

    # 2. The PostgreSQL store: import.
    team, key = setup_store(o.bin, o.url)
    pg_import = import_records(o.bin, o.url, team, o.jsonl, n)
    log(f"postgres: imported in {pg_import[0]:.1f} s")

    # 3. Served with the columnar cache: cold first query, the load, warm Q1-Q6.
    s = Server(o.bin, o.url, o.workdir, "pg-cache")
    try:
        pg_healthy = served(s)
        cold_s, cold_problem = one_query(s, key, queries[0], ours)
        failed |= cold_problem is not None
        log(f"pg-cache: cold first {queries[0]['name']} in {cold_s * 1e3:.0f} ms, "
            f"{'equal' if cold_problem is None else 'DIFFER: ' + cold_problem}")
        load, waited = wait_loaded(s)
        log(f"pg-cache: loaded {load['rows']:,.0f} rows, {mib(load['bytes'])} in "
            f"{load['seconds']:.2f} s")
        warm_results, f = run_queries(s, key, queries, ours, o.runs)
        failed |= f
        rss = s.rss()
        stop(s)
    finally:
        s.kill()
    if int(load["rows"]) != n:
        raise Failed(f"the cache loaded {load['rows']:.0f} rows, expected {n}")

    # 4. Served without a cache: every query pushed down to SQL.
    s = Server(o.bin, o.url, o.workdir, "pg-pushdown", ["--cache-bytes", "0"])
    try:
        served(s)
        push_results, f = run_queries(s, key, queries, ours, o.runs)
        failed |= f
        if LOADED.search(s.stderr_text()):
            raise Failed("`--cache-bytes 0` loaded a team into the cache")
        stop(s)
    finally:
        s.kill()

    # Report.
    answers = lambda p: "equal" if p is None else "DIFFER: " + p
    print(f"\n### {n:,} autocomplete rows: PostgreSQL store over HTTP\n")
    print("| import (`usage-server import`, wall clock) | records/s | seconds | CPU s "
          "| its own line (records/s) | target |")
    print("|---|---:|---:|---:|---:|---|")
    for name, (wall, cpu, own), target in (
            ("PostgreSQL", pg_import, f">= {IMPORT_TARGET:,}: {yes(n / pg_import[0] >= IMPORT_TARGET)}"),
            ("embedded (`sqlite:`), for reference", sq_import, "")):
        print(f"| {name} | {fmt_int(n / wall)} | {wall:.1f} | {cpu:.1f} | {fmt_int(own)} "
              f"| {target} |")

    print(f"\nWith the columnar cache (default `--cache-bytes`): healthy `/healthz` "
          f"{pg_healthy:.2f} s after spawn; first {queries[0]['name']} after that "
          f"**{cold_s * 1e3:,.0f} ms** ({answers(cold_problem)}; pushed down while the "
          f"team loads); the team loaded in **{load['seconds']:.2f} s** "
          f"({load['rows']:,.0f} rows, {mib(load['bytes'])}, "
          f"{load['bytes'] / n:.1f} B/row; logged {waited:.2f} s after the first answer); "
          f"VmRSS after Q1-Q6 {mib(rss)}.\n")
    print(f"| query | PostgreSQL, cache warm (ms) | embedded (ms) | ratio | <= {WARM_TARGET:g}x "
          "| result rows | answers |")
    print("|---|---:|---:|---:|---|---:|---|")
    warm_ratios = []
    for (name, warm, rows, p), (_, e, _, _) in zip(warm_results, emb_results):
        r = warm / e
        warm_ratios.append((r, name))
        print(f"| {name} | {warm * 1e3:.1f} | {e * 1e3:.1f} | {r:.2f}x | {yes(r <= WARM_TARGET)} "
              f"| {rows:,} | {answers(p)} |")

    print(f"\nWithout the cache (`serve --cache-bytes 0`: every query in SQL):\n")
    print(f"| query | PostgreSQL pushdown (ms) | DuckDB, 1 thread (ms) | ratio "
          f"| <= {PUSHDOWN_TARGET:g}x | result rows | answers |")
    print("|---|---:|---:|---:|---|---:|---|")
    push_ratios = []
    for name, push, rows, p in push_results:
        d = duck.get(name, {}).get("median_s")
        if d:
            r = push / d
            push_ratios.append((r, name))
            cells = f"{d * 1e3:.1f} | {r:.2f}x | {yes(r <= PUSHDOWN_TARGET)}"
        else:
            cells = "n/a | n/a | n/a"
        print(f"| {name} | {push * 1e3:.1f} | {cells} | {rows:,} | {answers(p)} |")

    print(f"\nThe embedded store (`sqlite:`) on the same rows, the reference of the warm "
          f"ratios (its first answer after start, not in the medians: {first_s * 1e3:,.0f} ms):\n")
    print(f"| query | embedded over HTTP (ms) | in-memory evaluator (ms) | result rows | answers |")
    print("|---|---:|---:|---:|---|")
    for name, e, rows, p in emb_results:
        print(f"| {name} | {e * 1e3:.1f} | {ours['queries'][name]['median_s'] * 1e3:.1f} "
              f"| {rows:,} | {answers(p)} |")

    print("\n### Issue 16 targets\n")
    print("| target | measured | |")
    print("|---|---|---|")
    rate = n / pg_import[0]
    print(f"| import into PostgreSQL >= {IMPORT_TARGET:,} records/s | {fmt_int(rate)} records/s "
          f"| {yes(rate >= IMPORT_TARGET)} |")
    scale = "" if n == 1_000_000 else f" (measured at {n:,} rows; the target is at 1,000,000)"
    print(f"| cold first query <= {COLD_TARGET_S:g} s{scale} | {cold_s:.2f} s "
          f"| {yes(cold_s <= COLD_TARGET_S)} |")
    wr, wn = max(warm_ratios)
    print(f"| cache warm <= {WARM_TARGET:g}x the embedded store, Q1-Q6 | worst {wn} {wr:.2f}x "
          f"({sum(r <= WARM_TARGET for r, _ in warm_ratios)} of 6 within) "
          f"| {yes(wr <= WARM_TARGET)} |")
    if len(push_ratios) == len(queries):
        pr, pn = max(push_ratios)
        print(f"| pushdown <= {PUSHDOWN_TARGET:g}x DuckDB one thread, Q1-Q6 | worst {pn} "
              f"{pr:.2f}x ({sum(r <= PUSHDOWN_TARGET for r, _ in push_ratios)} of 6 within) "
              f"| {yes(pr <= PUSHDOWN_TARGET)} |")
    else:
        print(f"| pushdown <= {PUSHDOWN_TARGET:g}x DuckDB one thread | no DuckDB report | |")
    print(f"| every answer equal to the in-memory evaluator's | "
          f"{'yes' if not failed else 'NO'} | {yes(not failed)} |")
    if failed:
        print("\nANSWERS DIFFER", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    # SIGTERM (the script's trap) unwinds through the `finally`s that stop the servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        sys.exit(main())
    except Failed as e:
        print(f"[postgres] FAILED: {e}", file=sys.stderr)
        sys.exit(1)
