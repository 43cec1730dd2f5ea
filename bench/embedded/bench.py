"""The embedded (SQLite) store at scale, driven through the server's own CLI and HTTP API.

Run by bench/embedded.sh, which builds, writes the data and the in-memory evaluator's
answers, then calls:

    bench.py --bin BIN --jsonl FILE --rows N --queries QUERIES.jsonl --answers OURS.json
             --runs R --workdir DIR

Steps (issue 15, Acceptance): a fresh store with one team and an analytics-read key
(`team create`, `key create`); `import --kind autocomplete` of the JSONL, timed; the same
binary serving an empty store (its resident memory is the base); `serve` on the loaded
store, timed from spawn to a 200 from `GET /healthz` (polled every 20 ms), VmRSS once
healthy; Q1-Q6 as `POST /api/v1/Analytics`, medians of R runs, every answer compared value
by value with the in-memory evaluator's (AVG to 1e-12 relative); VmRSS again; SIGTERM and
a clean exit; then the size of the store's files. Prints a Markdown table and exits 1 if an
answer differs or a step fails (targets not met are reported, not failures).

The helpers (the CLI, `import`, `serve`, the queries over HTTP and the comparison of
answers) take the store as a `--store` spec (`sqlite:PATH` or a PostgreSQL URL) and are
shared with bench/postgres/bench.py.

Python standard library only.
"""
import argparse
import http.client
import json
import os
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time

POLL_S = 0.02
HEALTHY_TIMEOUT_S = 900
STOP_TIMEOUT_S = 120


# The tag of the progress lines on stderr; bench/postgres/bench.py sets its own.
TAG = "embedded"


class Failed(Exception):
    pass


def log(msg):
    print(f"[{TAG}] {msg}", file=sys.stderr, flush=True)


def cli(bin_, store, *args):
    """Runs one CLI command on the store (`sqlite:PATH` or a PostgreSQL URL); its stdout as
    JSON objects (one a line)."""
    cmd = [bin_, "--store", store, *args]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise Failed(f"`{' '.join(args[:2])}` failed (exit {p.returncode}): {p.stderr.strip()}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def setup_store(bin_, store):
    """A team and an analytics-read key in a fresh store: (team id, service key)."""
    team = cli(bin_, store, "team", "create", "--name", "bench")[0]["team_id"]
    key = cli(bin_, store, "key", "create", "--team", team, "--permissions", "analytics-read",
              "--name", "bench")[0]["service_key"]
    return team, key


def import_records(bin_, store, team, jsonl, rows):
    """`import --kind autocomplete` of the JSONL, timed: (wall s, CPU s of the process,
    records/s of its own summary line)."""
    log(f"import {rows:,} rows from {jsonl}")
    t, c = time.monotonic(), children_cpu_s()
    p = subprocess.run([bin_, "--store", store, "import", "--team", team,
                        "--kind", "autocomplete", jsonl], capture_output=True, text=True)
    wall = time.monotonic() - t
    cpu = children_cpu_s() - c
    if p.returncode != 0:
        raise Failed(f"import failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
    m = re.search(r"imported (\d+) autocomplete records in ([\d.]+) s \((\d+) records/s\)",
                  p.stderr)
    if not m:
        raise Failed(f"no summary line from import:\n{p.stderr[-2000:]}")
    imported, own_rate = int(m.group(1)), int(m.group(3))
    if imported != rows:
        raise Failed(f"import says {imported} records, expected {rows}")
    return wall, cpu, own_rate


def store_files(db):
    """The store's files (the database and its -wal/-shm/-journal), with sizes."""
    d, base = os.path.split(os.path.abspath(db))
    return {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))
            if f == base or f.startswith(base + "-")}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vm(pid, field):
    """A /proc/PID/status figure in bytes (VmRSS, VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise Failed(f"no {field} for pid {pid}")


def cpu_s(pid):
    """User + system CPU seconds a live process has used (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Server:
    """`usage-server serve` on a free port; stopped with SIGTERM."""

    def __init__(self, bin_, store, workdir, label, extra_args=()):
        self.port = free_port()
        self.label = label
        self.err_path = os.path.join(workdir, f"serve-{label}.stderr")
        self.err = open(self.err_path, "w")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [bin_, "--store", store, "serve", "--listen", f"127.0.0.1:{self.port}",
             # Far above what the benchmark sends: no 429 in the timings.
             "--rate-per-minute", "1000000", "--rate-burst", "100000", *extra_args],
            stdout=subprocess.DEVNULL, stderr=self.err)
        # For bench/embedded.sh's exit trap, should this process die without cleaning up.
        with open(os.path.join(workdir, "server.pids"), "a") as f:
            f.write(f"{self.proc.pid}\n")
        self.conn = None

    def stderr_tail(self):
        self.err.flush()
        with open(self.err_path) as f:
            return "".join(f.readlines()[-15:])

    def stderr_text(self):
        self.err.flush()
        with open(self.err_path) as f:
            return f.read()

    def wait_healthy(self):
        """Seconds from spawn to the first 200 of GET /healthz."""
        while True:
            if self.proc.poll() is not None:
                raise Failed(f"the {self.label} server exited ({self.proc.returncode}) before "
                             f"it was healthy:\n{self.stderr_tail()}")
            if time.monotonic() - self.t0 > HEALTHY_TIMEOUT_S:
                raise Failed(f"the {self.label} server was not healthy in {HEALTHY_TIMEOUT_S} s")
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/healthz")
                status = c.getresponse().status
                c.close()
                if status == 200:
                    return time.monotonic() - self.t0
            except OSError:
                pass
            time.sleep(POLL_S)

    def post(self, path, body):
        """(status, parsed JSON or text, seconds) over one keep-alive connection."""
        data = json.dumps(body).encode()
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
            try:
                t = time.perf_counter()
                self.conn.request("POST", path, data, {"Content-Type": "application/json"})
                r = self.conn.getresponse()
                raw = r.read()
                secs = time.perf_counter() - t
                break
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        try:
            return r.status, json.loads(raw), secs
        except ValueError:
            return r.status, raw.decode(errors="replace"), secs

    def rss(self):
        return vm(self.proc.pid, "VmRSS")

    def stop(self):
        """SIGTERM, then the exit code (the server closes the store on the way out)."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise Failed(f"the {self.label} server did not stop within {STOP_TIMEOUT_S} s "
                             "of SIGTERM (killed)")
        self.err.close()
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def same(a, b):
    """bench/report.py's rule: equal strings, or AVG-like decimals within 1e-12 relative."""
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError):
        return False
    return "." in a + b and abs(x - y) <= 1e-12 * max(abs(x), abs(y))


def rows_of(answer, columns):
    """The Analytics answer's items as rows of strings, in `columns` order."""
    results = answer.get("queryResults") if isinstance(answer, dict) else None
    if not results:
        raise Failed(f"no queryResults in the answer: {str(answer)[:300]}")
    items = results[0].get("responseItems", [])
    return [[str(i.get("item", {}).get(c, "")) for c in columns] for i in items]


def diff(got, want):
    if len(got) != len(want):
        return f"{len(got)} rows vs {len(want)}"
    for i, (r, s) in enumerate(zip(got, want)):
        if len(r) != len(s) or not all(same(x, y) for x, y in zip(r, s)):
            return f"row {i}: {r} vs {s}"
    return None


def run_queries(server, key, queries, ours, runs):
    """Each query `runs` times over HTTP, every answer compared with the in-memory
    evaluator's: ([(name, median s, result rows, problem or None)], any answer differs)."""
    results, failed = [], False
    for q in queries:
        body = dict(q["body"], service_key=key)
        want = ours["queries"][q["name"]]["rows"]
        times, problem, n = [], None, 0
        for _ in range(runs):
            status, answer, secs = server.post("/api/v1/Analytics", body)
            if status != 200:
                raise Failed(f"{q['name']}: HTTP {status}: {str(answer)[:500]}")
            times.append(secs)
            got = rows_of(answer, q["columns"])
            n = len(got)
            problem = problem or diff(got, want)
        failed |= problem is not None
        results.append((q["name"], statistics.median(times), n, problem))
        log(f"{q['name']}: {statistics.median(times) * 1e3:.1f} ms, {n} rows, "
            f"{'equal' if problem is None else 'DIFFER: ' + problem}")
    return results, failed


def fmt_int(n):
    return f"{n:,.0f}"


def main():
    ap = argparse.ArgumentParser()
    for a in ("--bin", "--jsonl", "--queries", "--answers", "--workdir"):
        ap.add_argument(a, required=True)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--runs", type=int, default=5)
    o = ap.parse_args()

    queries = [json.loads(l) for l in open(o.queries) if l.strip()]
    ours = json.load(open(o.answers))
    if ours["rows"] != o.rows:
        raise Failed(f"the in-memory evaluator loaded {ours['rows']} rows, not {o.rows}")

    # 1. Empty store: the base of resident memory.
    empty_db = os.path.join(o.workdir, "empty", "usage.db")
    os.makedirs(os.path.dirname(empty_db))
    setup_store(o.bin, f"sqlite:{empty_db}")
    log("empty store: serve")
    s = Server(o.bin, f"sqlite:{empty_db}", o.workdir, "empty")
    try:
        empty_healthy = s.wait_healthy()
        empty_rss = s.rss()
        code = s.stop()
    finally:
        s.kill()
    if code != 0:
        raise Failed(f"the empty server exited {code} after SIGTERM")

    # 2. Import.
    db = os.path.join(o.workdir, "store", "usage.db")
    os.makedirs(os.path.dirname(db))
    team, key = setup_store(o.bin, f"sqlite:{db}")
    import_s, import_cpu, own_rate = import_records(o.bin, f"sqlite:{db}", team, o.jsonl, o.rows)
    after_import = sum(store_files(db).values())
    log(f"imported in {import_s:.1f} s; {after_import / o.rows:.1f} B/row on disk")

    # 3. Serve to healthy, memory, Q1-Q6.
    log("loaded store: serve")
    s = Server(o.bin, f"sqlite:{db}", o.workdir, "loaded")
    try:
        healthy_s = s.wait_healthy()
        rss_start = s.rss()
        healthy_cpu = cpu_s(s.proc.pid)
        log(f"healthy after {healthy_s:.2f} s, VmRSS {rss_start / 2**20:.1f} MiB")
        # The first request, not in the medians: a store that opens teams on first use
        # loads the rows here.
        first = queries[0]
        status, answer, first_s = s.post("/api/v1/Analytics", dict(first["body"], service_key=key))
        if status != 200:
            raise Failed(f"{first['name']}: HTTP {status}: {str(answer)[:500]}")
        to_answer_s = time.monotonic() - s.t0
        rss_first = s.rss()
        log(f"first answer ({first['name']}) in {first_s:.2f} s, {to_answer_s:.2f} s after "
            f"spawn, VmRSS {rss_first / 2**20:.1f} MiB")
        results, failed = run_queries(s, key, queries, ours, o.runs)
        rss_queries = s.rss()
        hwm = vm(s.proc.pid, "VmHWM")
        code = s.stop()
    finally:
        s.kill()
    if code != 0:
        raise Failed(f"the server exited {code} after SIGTERM:\n{s.stderr_tail()}")

    # 4. The store's files after a clean stop.
    files = store_files(db)
    disk = sum(files.values())

    n = o.rows
    rate = n / import_s
    per_row_disk = disk / n
    rss_row = (rss_start - empty_rss) / n
    rss_first_row = (rss_first - empty_rss) / n
    rss_q_row = (rss_queries - empty_rss) / n
    yes = lambda ok: "**met**" if ok else "**not met**"
    mib = lambda b: f"{b / 2**20:,.1f} MiB"
    print(f"\n### {n:,} autocomplete rows, `sqlite:` store\n")
    print("| figure | measured | target | |")
    print("|---|---:|---:|---|")
    print(f"| import (`usage-server import`, wall clock) | {fmt_int(rate)} records/s "
          f"({import_s:.1f} s, CPU {import_cpu:.1f} s; its own line: {fmt_int(own_rate)} records/s) "
          f"| >= 500,000 records/s | {yes(rate >= 500_000)} |")
    print(f"| store files after a clean stop | {per_row_disk:.1f} B/row ({mib(disk)}; "
          f"{after_import / n:.1f} B/row right after import) | <= 40 B/row "
          f"| {yes(per_row_disk <= 40)} |")
    print(f"| `serve` to healthy `/healthz` | {healthy_s:.2f} s (CPU {healthy_cpu:.2f} s; empty store: "
          f"{empty_healthy:.2f} s) | <= 3 s | {yes(healthy_s <= 3)} |")
    print(f"| resident memory after start, above an empty server's | {rss_row:.1f} B/row "
          f"({mib(rss_start)} - {mib(empty_rss)}) | <= 45 B/row | {yes(rss_row <= 45)} |")
    print(f"| the same after the first answer | {rss_first_row:.1f} B/row ({mib(rss_first)}) "
          f"| <= 45 B/row | {yes(rss_first_row <= 45)} |")
    print(f"| the same after Q1-Q6 (peak VmHWM {mib(hwm)}) | {rss_q_row:.1f} B/row "
          f"({mib(rss_queries)}) | | |")
    print(f"| first answer after start ({queries[0]['name']}, not in the medians) "
          f"| {first_s * 1e3:,.0f} ms ({to_answer_s:.2f} s from spawn) | | |")
    print()
    print(f"| query | over HTTP (ms, median of {o.runs}) | in-memory evaluator (ms) "
          "| result rows | answers |")
    print("|---|---:|---:|---:|---|")
    for name, med, rows, problem in results:
        mem = ours["queries"][name]["median_s"] * 1e3
        print(f"| {name} | {med * 1e3:.1f} | {mem:.1f} | {rows:,} | "
              f"{'equal' if problem is None else 'DIFFER: ' + problem} |")
    print()
    print("Store files: " + ", ".join(f"`{f}` {b:,} B" for f, b in files.items()))
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
        print(f"[{TAG}] FAILED: {e}", file=sys.stderr)
        sys.exit(1)
