#!/usr/bin/env python3
"""Soak test of usage-server on its embedded SQLite store (issue 14, point 7).

    python3 bench/soak/soak.py PATH/TO/usage-server [--duration SECONDS]

Loopback only, bounded in time and in requests. It makes a fresh temporary data dir, sets up
a team, its seed records and its keys with the server's own CLI, starts `usage-server serve`
on 127.0.0.1 with a free port, and for the duration runs at once:

- 8 keep-alive connections sending the six operations of the spec, paced together at twice
  the key's rate limit (so a share is answered 429: expected, counted, not an error);
- 1 keep-alive connection sending `Ingest` batches of autocomplete records with new
  identities (its own key, paced below that key's limit); every 200 answer's records count;
- `usage-server import` runs, one after another, into the same store file for the same
  team, each with new autocomplete identities; every record an import reports counts;
- 50 slow connections that dribble header bytes, one byte a second: the server must close
  each within its header timeout (10 s, contract section 11); the script reopens them so 50
  are always open.

Then it checks, and exits 1 if any fails:
- no 5xx, no status other than 200 and 429 on the mixed connections, no other status than
  200 or 429 on Ingest, and no connection error on any of the 9 normal connections;
- the limiter: some mixed requests got 429, and no more got 200 than the bucket allows;
- the team's autocomplete row count (an `Analytics` COUNT, shape 1: one item over all
  records) equals seed + every record acknowledged by Ingest + every record imported,
  within 6 s of the last write (contract 7: another process's writes show within 5 s);
- every slow connection was closed by the server within 20 s of its first byte;
- the server's peak resident memory (VmHWM) is at most --max-rss-mb (default 512 MiB);
- the server stops on SIGTERM within 15 s with exit code 0.

It prints the p50/p99 latency of the small query (one SUM over the autocomplete records) as
the client saw it, and a summary. The server process and the temp dir are removed on every
exit, also on failure or Ctrl-C; the server's log is printed (its tail) on failure.
Python 3 standard library only.
"""

import argparse
import datetime
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SLOW_CONNECTIONS = 50
MIXED_CONNECTIONS = 8
# The slow connections' request line; then one header byte a second.
SLOW_HEAD = b"POST /api/v1/Analytics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
# A slow connection the server has not closed this long after its first byte fails the run
# (its header timeout is 10 s; the rest is margin for a loaded 2-core machine).
SLOW_CLOSE_BOUND_S = 20.0
FINAL_COUNT_WINDOW_S = 6.0


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Failed(Exception):
    pass


def percentile(sorted_values, p):
    """The nearest-rank percentile of a sorted list (None when empty)."""
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, int(-(-p * len(sorted_values) // 100)) - 1))
    return sorted_values[k]


BASE_HOUR = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
LANGUAGES = ["PYTHON", "GO", "RUST", "TYPESCRIPT"]


def autocomplete(source, n):
    """The n-th autocomplete record of `source`: a new identity (api_key, hour, language, ide,
    version) for every n and source, from 500 api keys of the source and one hour after
    another, so the text columns stay as small as real data's (every value unique would
    measure dictionaries, not records)."""
    hour = BASE_HOUR + datetime.timedelta(hours=n // 500)
    return {
        "api_key": f"k-{source}-{n % 500}",
        "hour": hour.strftime("%Y-%m-%dT%H:00:00Z"),
        "language": LANGUAGES[n % len(LANGUAGES)],
        "ide": "vscode",
        "version": "1.10.0",
        "num_acceptances": n % 7,
        "num_lines_accepted": n % 11,
        "num_bytes_accepted": n % 101,
    }


class Stats:
    """Counters shared by the worker threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.by_status = {}  # (group, op, status) -> count
        self.latency = {}  # op -> [seconds] of 200 answers
        self.conn_errors = []  # (group, message)
        self.unexpected = []  # (group, op, status, body excerpt)
        self.ingest_acked = 0
        self.ingest_batches_ok = 0
        self.imported = 0
        self.imports_ok = 0
        self.import_seconds = []
        self.import_failures = []
        self.slow_opened = 0
        self.slow_closed_by_server = 0
        self.slow_answers = {}  # status line -> count
        self.slow_lifetimes = []
        self.slow_overdue = []
        self.worker_errors = []  # a worker thread that stopped on an exception

    def count(self, group, op, status):
        with self.lock:
            key = (group, op, status)
            self.by_status[key] = self.by_status.get(key, 0) + 1

    def statuses(self, group=None):
        out = {}
        with self.lock:
            for (g, _op, status), n in self.by_status.items():
                if group is None or g == group:
                    out[status] = out.get(status, 0) + n
        return out


class Soak:
    def __init__(self, args):
        self.args = args
        self.binary = os.path.abspath(args.binary)
        self.dir = tempfile.mkdtemp(prefix="usage-soak-")
        self.store = f"sqlite:{os.path.join(self.dir, 'soak.db')}"
        self.server = None
        self.server_log = None
        self.port = None
        self.stats = Stats()
        self.stop = threading.Event()
        self.peak_rss_kb = 0
        self.rss_samples = []  # (seconds, VmRSS kB, records written so far)
        self.last_write = time.monotonic()
        self.server_latency = {}

    # --- CLI -----------------------------------------------------------------------------

    def cli(self, *argv, stdin_path=None, timeout=120):
        cmd = [self.binary, "--store", self.store, *argv]
        stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
        try:
            p = subprocess.run(cmd, stdin=stdin, capture_output=True, timeout=timeout)
        finally:
            if stdin_path:
                stdin.close()
        if p.returncode != 0:
            raise Failed(
                f"`usage-server {' '.join(argv)}` exited {p.returncode}: "
                f"{p.stderr.decode(errors='replace').strip()}"
            )
        return json.loads(p.stdout)

    def write_jsonl(self, name, records):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
        return path

    def setup(self):
        self.team = self.cli("team", "create", "--name", "soak")["team_id"]
        self.mixed_key = self.cli(
            "key", "create", "--team", self.team, "--name", "mixed",
            "--permissions", "analytics-read,teams-read,billing-read,billing-write",
        )["service_key"]
        self.ingest_key = self.cli(
            "key", "create", "--team", self.team, "--name", "ingest", "--permissions", "usage-write"
        )["service_key"]
        # The final count has a key of its own, so the mixed key's empty bucket cannot delay it.
        self.count_key = self.cli(
            "key", "create", "--team", self.team, "--name", "count", "--permissions", "analytics-read"
        )["service_key"]
        seed = {
            "groups": [{"group_id": "g-eng", "group_name": "eng"}],
            "users": [
                {"email": "ana@a", "name": "Ana", "api_key": "k-ana", "groups": ["g-eng"]},
                {"email": "bob@a", "name": "Bob", "api_key": "k-bob", "groups": ["g-eng"]},
                {"email": "cy@a", "name": "Cy", "api_key": "k-cy"},
            ],
            "autocomplete": [dict(autocomplete("seed", i), api_key=k) for i, k in enumerate(["k-ana", "k-bob", "k-cy"])],
            "agent_lines": [
                {"api_key": "k-ana", "day": "2025-05-01", "ide_type": "editor", "lines_suggested": 10, "lines_accepted": 4},
                {"api_key": "k-bob", "day": "2025-05-02", "ide_type": "plugin", "lines_suggested": 5, "lines_accepted": 1},
            ],
        }
        for kind, records in seed.items():
            out = self.cli("import", "--team", self.team, "--kind", kind, self.write_jsonl(f"seed-{kind}.jsonl", records))
            if out != {"kind": kind, "records": len(records)}:
                raise Failed(f"seed import of {kind}: {out}")
        self.seed = len(seed["autocomplete"])

    # --- server --------------------------------------------------------------------------

    def start_server(self):
        self.server_log_path = os.path.join(self.dir, "server.log")
        self.server_log = open(self.server_log_path, "wb")
        self.server = subprocess.Popen(
            [
                self.binary, "--store", self.store, "serve", "--listen", "127.0.0.1:0",
                "--rate-per-minute", str(self.args.rate_per_minute),
                "--rate-burst", str(self.args.rate_burst),
            ],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.server_log,
        )
        ready, _, _ = select.select([self.server.stdout], [], [], 60)
        if not ready:
            raise Failed("the server printed no listen line within 60 s")
        line = self.server.stdout.readline()
        if not line:
            raise Failed(f"the server exited before listening (code {self.server.wait()})")
        host, _, port = json.loads(line)["listen"].rpartition(":")
        if host != "127.0.0.1":
            raise Failed(f"the server listens on {host}, not loopback")
        self.port = int(port)
        deadline = time.monotonic() + 30
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/healthz")
                r = c.getresponse()
                body = r.read()
                c.close()
                if r.status == 200 and json.loads(body).get("status") == "ok":
                    break
            except (OSError, http.client.HTTPException, ValueError):
                pass
            if time.monotonic() > deadline:
                raise Failed("GET /healthz did not answer 200 within 30 s")
            time.sleep(0.2)
        log(f"server pid {self.server.pid} on 127.0.0.1:{self.port}, store {self.store}")

    def read_rss(self):
        """(VmRSS, VmHWM) of the server in kB, or None once it has exited."""
        try:
            with open(f"/proc/{self.server.pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])
        except (OSError, KeyError, ValueError):
            return None

    def stop_server(self):
        """SIGTERM, then the exit code (contract 10: drain, exit 0). Kills after 15 s."""
        if self.server is None or self.server.poll() is not None:
            return self.server.returncode if self.server else None
        self.server.send_signal(signal.SIGTERM)
        try:
            return self.server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()
            return "did not exit within 15 s of SIGTERM"

    def cleanup(self):
        if self.server is not None and self.server.poll() is None:
            self.server.kill()
            self.server.wait()
        if self.server is not None and self.server.stdout:
            self.server.stdout.close()
        if self.server_log:
            self.server_log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def server_log_tail(self, lines=15):
        """The server's WARN and ERROR lines (at most 40), then its last lines."""
        try:
            with open(self.server_log_path, "rb") as f:
                all_lines = f.read().decode(errors="replace").splitlines()
        except (OSError, AttributeError):
            return ""
        bad = [l for l in all_lines if " WARN " in l or " ERROR " in l][:40]
        return "\n".join(bad + ["..."] + all_lines[-lines:])

    def logged_latency(self):
        """op -> [ms] of the 200 answers in the server's request log (its own timing, without
        the client's): informative only, an empty dict when the log's form differs."""
        out = {}
        pattern = re.compile(r' op="(\w+)" .*status=200 latency_ms=([0-9.]+)')
        try:
            with open(self.server_log_path, errors="replace") as f:
                for line in f:
                    m = pattern.search(line)
                    if m:
                        out.setdefault(m.group(1), []).append(float(m.group(2)) / 1000)
        except OSError:
            pass
        return out

    def guarded(self, name, target, *args):
        """Runs a worker; an exception that escapes it fails the run instead of vanishing."""
        def run():
            try:
                target(*args)
            except Exception as e:  # noqa: BLE001 - reported as a failure of the run
                with self.stats.lock:
                    self.stats.worker_errors.append(f"{name}: {type(e).__name__}: {e}")
        return threading.Thread(target=run, name=name, daemon=True)

    # --- workers -------------------------------------------------------------------------

    def post(self, conn, op, key, body):
        body = dict(body, service_key=key)
        conn.request("POST", f"/api/v1/{op}", body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        return r.status, data

    def mixed_worker(self, i, interval, deadline):
        # Each operation of the spec; the small query (one SUM) three times in eight.
        small = {"query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA",
                                     "selections": [{"field": "num_acceptances",
                                                     "aggregation_function": "QUERY_AGGREGATION_SUM"}]}]}
        ops = [
            ("Analytics", small),
            ("UserPageAnalytics", {}),
            ("Analytics", small),
            ("AgentAnalytics", {"query_requests": [{"agent_lines": {}}, {"agent_tool_usage": {}}]}),
            ("Analytics", small),
            ("GetUsageConfig", {"team_level": True}),
            ("UsageConfig", None),
            ("GetTeamCreditBalance", {}),
        ]
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        start = time.monotonic() + interval * i / MIXED_CONNECTIONS
        n = 0
        while not self.stop.is_set():
            at = start + n * interval
            if at >= deadline:
                break
            delay = at - time.monotonic()
            if delay > 0 and self.stop.wait(delay):
                break
            op, body = ops[(n + i) % len(ops)]
            if body is None:
                body = {"group_id": "g-eng", "set_add_on_credit_cap": 1000 + n} if n % 3 else {"team_level": True, "clear_add_on_credit_cap": True}
            n += 1
            t0 = time.perf_counter()
            try:
                status, data = self.post(conn, op, self.mixed_key, body)
            except (OSError, http.client.HTTPException) as e:
                with self.stats.lock:
                    self.stats.conn_errors.append((f"mixed-{i}", f"{op}: {type(e).__name__}: {e}"))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                continue
            took = time.perf_counter() - t0
            self.stats.count("mixed", op, status)
            if status == 200:
                try:
                    answer = json.loads(data)
                    if op == "Analytics":
                        int(answer["queryResults"][0]["responseItems"][0]["item"]["sum_num_acceptances"])
                except (ValueError, KeyError, IndexError, TypeError):
                    self.unexpected_answer("mixed", op, status, data)
                    continue
                with self.stats.lock:
                    self.stats.latency.setdefault(op, []).append(took)
            elif status != 429:
                self.unexpected_answer("mixed", op, status, data)
        conn.close()

    def unexpected_answer(self, group, op, status, data):
        with self.stats.lock:
            self.stats.unexpected.append((group, op, status, data[:300].decode(errors="replace")))

    def ingest_worker(self, deadline):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        interval = 1.0 / self.args.ingest_per_second
        start = time.monotonic()
        n = 0
        serial = 0
        while not self.stop.is_set():
            at = start + n * interval
            if at >= deadline:
                break
            delay = at - time.monotonic()
            if delay > 0 and self.stop.wait(delay):
                break
            n += 1
            records = [autocomplete("ingest", serial + j) for j in range(self.args.ingest_batch)]
            # A refused batch's identities are never sent again: only acknowledged ones count.
            serial += len(records)
            try:
                status, data = self.post(conn, "Ingest", self.ingest_key, {"kind": "autocomplete", "records": records})
            except (OSError, http.client.HTTPException) as e:
                with self.stats.lock:
                    self.stats.conn_errors.append(("ingest", f"Ingest: {type(e).__name__}: {e}"))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                continue
            self.stats.count("ingest", "Ingest", status)
            if status == 200:
                try:
                    accepted = json.loads(data)["accepted"]
                except (ValueError, KeyError):
                    self.unexpected_answer("ingest", "Ingest", status, data)
                    continue
                if accepted != len(records):
                    self.unexpected_answer("ingest", "Ingest", status, data)
                with self.stats.lock:
                    self.stats.ingest_acked += accepted
                    self.stats.ingest_batches_ok += 1
                self.last_write = time.monotonic()
            elif status != 429:
                self.unexpected_answer("ingest", "Ingest", status, data)
        conn.close()

    def import_worker(self, deadline):
        serial = 0
        while not self.stop.is_set() and time.monotonic() < deadline:
            records = [autocomplete("import", serial + j) for j in range(self.args.import_records)]
            serial += len(records)
            path = self.write_jsonl("import.jsonl", records)
            t0 = time.monotonic()
            try:
                out = self.cli("import", "--team", self.team, "--kind", "autocomplete", path)
            except (Failed, subprocess.TimeoutExpired, ValueError) as e:
                with self.stats.lock:
                    self.stats.import_failures.append(str(e))
                continue
            finally:
                self.last_write = time.monotonic()
            with self.stats.lock:
                self.stats.import_seconds.append(time.monotonic() - t0)
                if out.get("kind") == "autocomplete" and out.get("records") == len(records):
                    self.stats.imported += out["records"]
                    self.stats.imports_ok += 1
                else:
                    self.stats.import_failures.append(f"import printed {out}, expected {len(records)} records")
            self.stop.wait(max(0.0, min(self.args.import_pause, deadline - time.monotonic())))

    def slow_worker(self, deadline):
        """Keeps SLOW_CONNECTIONS sockets open, each sending one header byte a second."""
        socks = {}  # socket -> [first byte time, next byte time]

        def open_one():
            s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            s.setblocking(False)
            s.send(SLOW_HEAD)
            now = time.monotonic()
            socks[s] = [now, now + 1.0]
            with self.stats.lock:
                self.stats.slow_opened += 1

        def closed(s, answer=None):
            lifetime = time.monotonic() - socks.pop(s)[0]
            s.close()
            with self.stats.lock:
                self.stats.slow_closed_by_server += 1
                self.stats.slow_lifetimes.append(lifetime)
                if answer:
                    self.stats.slow_answers[answer] = self.stats.slow_answers.get(answer, 0) + 1

        try:
            while not self.stop.is_set() and time.monotonic() < deadline:
                while len(socks) < SLOW_CONNECTIONS:
                    open_one()
                readable, _, _ = select.select(list(socks), [], [], 0.1)
                for s in readable:
                    try:
                        data = s.recv(4096)
                    except ConnectionResetError:
                        data = b""
                    except BlockingIOError:
                        continue
                    # The server closes (EOF or reset); an answer it sends first is kept.
                    closed(s, data.split(b"\r\n", 1)[0].decode(errors="replace") if data else None)
                now = time.monotonic()
                for s, (born, due) in list(socks.items()):
                    if now - born > SLOW_CLOSE_BOUND_S:
                        with self.stats.lock:
                            self.stats.slow_overdue.append(now - born)
                        socks.pop(s)
                        s.close()
                    elif now >= due:
                        socks[s][1] = due + 1.0
                        try:
                            s.send(b"a")
                        except (BrokenPipeError, ConnectionResetError):
                            closed(s)
                        except BlockingIOError:
                            pass
        finally:
            now = time.monotonic()
            for s, (born, _) in socks.items():
                if now - born > SLOW_CLOSE_BOUND_S:
                    with self.stats.lock:
                        self.stats.slow_overdue.append(now - born)
                s.close()

    def memory_worker(self):
        t0 = time.monotonic()
        while not self.stop.wait(0.5):
            rss = self.read_rss()
            if rss:
                with self.stats.lock:
                    written = self.stats.ingest_acked + self.stats.imported
                self.rss_samples.append((time.monotonic() - t0, rss[0], written))
                self.peak_rss_kb = max(self.peak_rss_kb, rss[1])

    # --- the run -------------------------------------------------------------------------

    def count_records(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            status, data = self.post(conn, "Analytics", self.count_key, {"query_requests": [{
                "data_source": "QUERY_DATA_SOURCE_USER_DATA",
                "selections": [{"field": "api_key", "aggregation_function": "QUERY_AGGREGATION_COUNT"}]}]})
        except (OSError, http.client.HTTPException) as e:
            raise Failed(f"the final count: {type(e).__name__}: {e}") from e
        finally:
            conn.close()
        if status != 200:
            raise Failed(f"the final count answered {status}: {data[:300]!r}")
        return int(json.loads(data)["queryResults"][0]["responseItems"][0]["item"]["count_api_key"])

    def run(self):
        a = self.args
        self.setup()
        self.start_server()
        rss0 = self.read_rss()
        interval = MIXED_CONNECTIONS * 60.0 / (2 * a.rate_per_minute)
        log(f"{a.duration:g} s: {MIXED_CONNECTIONS} connections at {2 * a.rate_per_minute}/min in total "
            f"(one request every {interval:.2f} s each), Ingest {a.ingest_batch} records x {a.ingest_per_second:g}/s, "
            f"imports of {a.import_records} records, {SLOW_CONNECTIONS} slow connections")
        begin = time.monotonic()
        deadline = begin + a.duration
        threads = [self.guarded(f"mixed-{i}", self.mixed_worker, i, interval, deadline)
                   for i in range(MIXED_CONNECTIONS)]
        threads += [
            self.guarded("ingest", self.ingest_worker, deadline),
            self.guarded("import", self.import_worker, deadline),
            self.guarded("slow", self.slow_worker, deadline),
        ]
        memory = self.guarded("memory", self.memory_worker)
        memory.start()
        for t in threads:
            t.start()
        # Every request has a socket timeout (30/60 s) and an import 120 s: past that, a hang.
        for t in threads:
            t.join(timeout=max(0.0, deadline + 180 - time.monotonic()))
            if t.is_alive():
                self.stop.set()
                raise Failed(f"worker {t.name} did not finish within 180 s of the end: the server hangs")
        elapsed = time.monotonic() - begin
        self.stop.set()
        memory.join()
        if self.server.poll() is not None:
            raise Failed(f"the server exited during the run (code {self.server.returncode}); "
                         f"worker errors: {self.stats.worker_errors[:3]}, connection errors: {self.stats.conn_errors[:3]}")

        # The final count: the imports were written by another process; the server sees them
        # within 5 s (contract 7), so it may take up to FINAL_COUNT_WINDOW_S after the last write.
        s = self.stats
        expected = self.seed + s.ingest_acked + s.imported
        while True:
            counted = self.count_records()
            if counted == expected or time.monotonic() - self.last_write > FINAL_COUNT_WINDOW_S:
                break
            time.sleep(0.25)
        rss = self.read_rss()
        if rss:
            self.peak_rss_kb = max(self.peak_rss_kb, rss[1])
        exit_code = self.stop_server()
        self.server_latency = self.logged_latency()
        return self.report(elapsed, expected, counted, rss0, rss, exit_code)

    def report(self, elapsed, expected, counted, rss0, rss_end, exit_code):
        a, s = self.args, self.stats
        failures = []
        mixed = s.statuses("mixed")
        ingest = s.statuses("ingest")
        everything = s.statuses()
        fives = {k: v for k, v in everything.items() if k >= 500}
        if fives:
            failures.append(f"5xx answers: {fives}")
        if s.conn_errors:
            failures.append(f"{len(s.conn_errors)} connection errors, first: {s.conn_errors[:3]}")
        if s.unexpected:
            failures.append(f"{len(s.unexpected)} unexpected answers, first: {s.unexpected[:3]}")
        if s.worker_errors:
            failures.append(f"workers stopped on an exception: {s.worker_errors}")
        if s.import_failures:
            failures.append(f"{len(s.import_failures)} failed imports, first: {s.import_failures[:2]}")
        if counted != expected:
            failures.append(f"counted {counted} records, expected {expected} = seed {self.seed} + "
                            f"ingest {s.ingest_acked} + imported {s.imported}")
        # The limiter: paced at twice the rate, some requests must be refused, and no more may
        # pass than the bucket holds plus what it refills (one extra token of slack).
        allowed = a.rate_burst + a.rate_per_minute / 60.0 * elapsed + 1
        if mixed.get(200, 0) > allowed:
            failures.append(f"{mixed.get(200, 0)} mixed requests got 200, the limiter allows at most {allowed:.0f}")
        if a.duration >= 10 and not mixed.get(429):
            failures.append("no mixed request got 429: the load did not reach twice the rate limit")
        if s.slow_overdue:
            failures.append(f"{len(s.slow_overdue)} slow connections open longer than {SLOW_CLOSE_BOUND_S:g} s")
        if a.duration >= 15 and s.slow_closed_by_server < SLOW_CONNECTIONS:
            failures.append(f"the server closed only {s.slow_closed_by_server} slow connections")
        peak_mib = self.peak_rss_kb / 1024
        if peak_mib > a.max_rss_mb:
            failures.append(f"peak RSS {peak_mib:.1f} MiB over the bound of {a.max_rss_mb} MiB")
        if exit_code != 0:
            failures.append(f"the server's exit after SIGTERM: {exit_code}")

        small = sorted(s.latency.get("Analytics", []))
        ms = lambda v: "n/a" if v is None else f"{v * 1000:.1f} ms"
        lines = [
            f"duration: {elapsed:.1f} s (binary {self.binary})",
            f"mixed requests ({MIXED_CONNECTIONS} connections, paced at {2 * a.rate_per_minute}/min; "
            f"limit {a.rate_per_minute}/min, burst {a.rate_burst}): {sum(mixed.values())} "
            + json.dumps({str(k): v for k, v in sorted(mixed.items())}),
            "  by operation: " + ", ".join(
                f"{op} {n}" for op, n in sorted(self._by_op("mixed").items())),
            f"ingest: {sum(ingest.values())} requests " + json.dumps({str(k): v for k, v in sorted(ingest.items())})
            + f", {s.ingest_acked} records acknowledged in {s.ingest_batches_ok} batches",
            f"imports: {s.imports_ok} runs, {s.imported} records imported"
            + (f", {percentile(sorted(s.import_seconds), 50):.2f} s median per run" if s.import_seconds else ""),
            f"records: seed {self.seed} + ingest {s.ingest_acked} + imported {s.imported} = {expected}; "
            f"counted {counted}",
            f"slow connections: {s.slow_opened} opened, {s.slow_closed_by_server} closed by the server "
            + (f"after {min(s.slow_lifetimes):.1f}-{max(s.slow_lifetimes):.1f} s" if s.slow_lifetimes else "(none)")
            + (f", answers before closing: {s.slow_answers}" if s.slow_answers else ", none answered"),
            f"server memory: RSS {(rss0[0] / 1024) if rss0 else float('nan'):.1f} MiB at start, "
            f"{(rss_end[0] / 1024) if rss_end else float('nan'):.1f} MiB at the end, "
            f"peak (VmHWM) {peak_mib:.1f} MiB (bound {a.max_rss_mb} MiB)",
            "  RSS along the run (s: MiB, records written): " + ", ".join(
                f"{t:.0f}: {kb / 1024:.0f}, {w}" for t, kb, w in self.rss_quarters()),
            f"small query (Analytics, one SUM over the autocomplete records), {len(small)} answers: "
            f"p50 {ms(percentile(small, 50))}, p99 {ms(percentile(small, 99))}, max {ms(small[-1] if small else None)}",
            "  the same in the server's request log (its own timing): " + (
                f"p50 {ms(percentile(sorted(self.server_latency.get('Analytics', [])), 50))}, "
                f"p99 {ms(percentile(sorted(self.server_latency.get('Analytics', [])), 99))}, "
                f"Ingest p50 {ms(percentile(sorted(self.server_latency.get('Ingest', [])), 50))}, "
                f"p99 {ms(percentile(sorted(self.server_latency.get('Ingest', [])), 99))}"),
            "  other operations (p50/p99): " + ", ".join(
                f"{op} {ms(percentile(sorted(v), 50))}/{ms(percentile(sorted(v), 99))}"
                for op, v in sorted(s.latency.items()) if op != "Analytics"),
            f"server exit after SIGTERM: {exit_code}",
        ]
        print("== soak summary")
        for line in lines:
            print(line)
        if failures:
            print("== FAILED")
            for f in failures:
                print(f"- {f}")
            print("== server log (tail)")
            print(self.server_log_tail())
            return 1
        print("== passed")
        return 0

    def rss_quarters(self):
        """The memory samples nearest to each quarter of the run."""
        if not self.rss_samples:
            return []
        end = self.rss_samples[-1][0]
        return [min(self.rss_samples, key=lambda x: abs(x[0] - end * q / 4)) for q in range(1, 5)]

    def _by_op(self, group):
        out = {}
        with self.stats.lock:
            for (g, op, _status), n in self.stats.by_status.items():
                if g == group:
                    out[op] = out.get(op, 0) + n
        return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("binary", help="the usage-server binary")
    p.add_argument("--duration", type=float, default=120, help="seconds of load (default 120)")
    p.add_argument("--rate-per-minute", type=int, default=600, help="the key's rate limit (section 9 default: 600)")
    p.add_argument("--rate-burst", type=int, default=60, help="the key's burst (section 9 default: 60)")
    p.add_argument("--ingest-batch", type=int, default=250, help="records per Ingest request")
    p.add_argument("--ingest-per-second", type=float, default=4, help="Ingest requests a second (its key allows 10)")
    p.add_argument("--import-records", type=int, default=5000, help="records per CLI import")
    p.add_argument("--import-pause", type=float, default=1.0, help="seconds between imports")
    p.add_argument("--max-rss-mb", type=float, default=512, help="bound of the server's peak RSS in MiB")
    args = p.parse_args()
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"not an executable: {args.binary}")

    # A SIGTERM to the script cleans up like Ctrl-C does.
    def on_term(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    soak = Soak(args)
    try:
        code = soak.run()
    except Failed as e:
        print(f"== FAILED: {e}")
        print("== server log (tail)")
        print(soak.server_log_tail())
        code = 1
    except KeyboardInterrupt:
        print("== interrupted")
        code = 1
    finally:
        soak.stop.set()
        soak.cleanup()
    sys.exit(code)


if __name__ == "__main__":
    main()
