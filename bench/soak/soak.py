#!/usr/bin/env python3
"""Soak test of usage-server on its embedded SQLite store (issues 14, point 7, and 28).

    python3 bench/soak/soak.py PATH/TO/usage-server [--duration SECONDS] [--no-heavy]

Loopback only, bounded in time and in requests. It makes a fresh temporary data dir, sets up
two teams with the server's own CLI: a light team (its seed records and keys) and a heavy
team (its keys, one per heavy connection, and --heavy-records (400,000) autocomplete
records with a new identity each: 2,000 api keys, one hour after another, 8 languages,
4 IDEs, 91 versions). It starts `usage-server serve` on 127.0.0.1 with a free port and the
default limits (query slots, result items, body size), and for the duration runs at once:

- the light team: 8 keep-alive connections sending the six operations of the spec, paced
  together at twice the key's rate limit (so a share is answered 429: expected, counted,
  not an error);
- the light team: 1 keep-alive connection sending `Ingest` batches of autocomplete records
  with new identities (its own key, paced below that key's limit); every 200 answer's
  records count;
- the light team: `usage-server import` runs, one after another, into the same store file,
  each with new autocomplete identities; every record an import reports counts;
- the light team's latency probes, on a key and connections of their own: the small query
  (one SUM over the team's autocomplete records) and `GET /healthz`, each
  --probe-per-second times a second;
- 50 slow connections that dribble header bytes, one byte a second: the server must close
  each within its header timeout (10 s, contract section 11); the script reopens them so 50
  are always open;
- the heavy team (not with --no-heavy), on --heavy-connections keep-alive connections with
  a key each, as fast as the server answers, each connection cycling through:
  - a huge group-by: a SUM by api_key, hour, language, version and ide, more groups than
    the result limit (100,000 items): 400 `too_many` at `query_requests[0]`;
  - a raw request of 20 queries of 12,000 rows each (several fields, no aggregation),
    together over the limit: 400 `too_many` at `query_requests[8]`;
  - a raw request of 2 such queries, under the limit: 200 with all 24,000 items;
  - a long unknown name, the field `date aaa...` of a 1,000,000-byte zone: 400 at
    `query_requests[0].selections[0].field`, an answer under 8 KiB;
  and --export-readers of those connections instead export a raw query of --export-rows
  rows (98,000; 20,000 with --duration 30 or less) of --export-fields as CSV (`Accept:
  text/csv`) and read it at --export-rate bytes a second (64 KiB), 4 KiB a read, to its
  end; a new export starts only while it can end near the run's end. (On loopback the
  kernel holds a few MB of an answer, the server's send buffer growing to 4 MiB: the
  default 2.1 MB export is buffered whole and the server never waits on the reader; with
  `hour` among the fields it is 5 MB, and the server waits, holding one of the heavy
  team's query slots.)
  429 answers are counted, not errors.

Then it checks, and exits 1 if any fails:
- no 5xx anywhere; no status other than 200 and 429 on the mixed connections and on
  Ingest, none other than 200 on the probes; every heavy answer is the one expected of its
  kind (or 429); no connection error on any normal connection (mixed, Ingest, probes,
  heavy);
- the limiter: some mixed requests got 429, and no more got 200 than the bucket allows;
- the light team's autocomplete row count (an `Analytics` COUNT, shape 1: one item over
  all records) equals seed + every record acknowledged by Ingest + every record imported,
  within 6 s of the last write (contract 7: another process's writes show within 5 s);
- every CSV export arrived whole: status 200, `text/csv`, a chunked body that ends with its
  last chunk, the header row and exactly one line per row;
- the heavy load ran (runs of 10 s or more): every kind got an answer other than 429, and
  at least one export was read whole;
- every slow connection was closed by the server within 20 s of its first byte;
- fairness: the p99 of the light team's small query and of `GET /healthz`, as the probes
  saw them, is at most --light-p99-ms (default 500 ms);
- the server's peak resident memory (VmHWM) is at most --max-rss-mb (default 1024 MiB,
  issue 28's bound with the default limits);
- the server stops on SIGTERM within 15 s with exit code 0.

It prints the setup time, the probes' p50/p99/max, the p50/p99 latency of the small query
on the mixed connections, the heavy requests by kind and status, the most queries running
and waiting (`usage_queries` of `GET /metrics`), the peak memory, and a summary. The
server process and the temp dir are removed on every exit, also on failure or Ctrl-C; the
server's log is printed (its tail) on failure. Python 3 standard library only.
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

# The heavy team's data: record n has api key n % HEAVY_API_KEYS and hour n // HEAVY_API_KEYS
# (from HEAVY_BASE_HOUR on), so a range of whole hours holds a known number of records.
HEAVY_API_KEYS = 2000
HEAVY_BASE_HOUR = datetime.datetime(2001, 1, 1, tzinfo=datetime.timezone.utc)
HEAVY_LANGUAGES = ["PYTHON", "GO", "RUST", "TYPESCRIPT", "JAVA", "CPP", "RUBY", "KOTLIN"]
HEAVY_IDES = ["vscode", "jetbrains", "vim", "emacs"]
# The server's default `--max-result-items`: the items of a whole Analytics request.
RESULT_ITEMS = 100_000
# The heavy raw query: the rows of this many hours (12,000), 20 of them in one request (over
# the limit) or 2 (under it).
RAW_HOURS = 6
RAW_OVER_COPIES = 20
RAW_UNDER_COPIES = 2
# The unknown zone of the long name, and the bound of an error answer's body.
LONG_NAME_BYTES = 1_000_000
SMALL_ANSWER = 8 << 10
# What the heavy connections cycle through (the export readers run `export` only).
HEAVY_KINDS = ["group_by", "raw_over", "raw_under", "long_name"]
# The export's columns by default: about 22 bytes a row, 2.1 MB for 98,000 rows.
EXPORT_FIELDS = "api_key,language,version,num_acceptances"
EXPORT_READ = 4096  # bytes per read of a slow export reader


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


# The small query: one SUM over the team's autocomplete records.
SMALL_QUERY = {"query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA",
                                   "selections": [{"field": "num_acceptances",
                                                   "aggregation_function": "QUERY_AGGREGATION_SUM"}]}]}
JSON_HEADERS = {"Content-Type": "application/json"}
# A heavy request may wait behind the heavy team's others (its slots are few): past this, a hang.
HEAVY_TIMEOUT_S = 120
# A slow export reader starts another export only if the last one's time fits before the
# end of the run plus this.
EXPORT_OVERRUN_S = 5.0


def heavy_lines(records):
    """The heavy team's autocomplete records as JSONL lines: record n a new identity, from
    HEAVY_API_KEYS api keys, one hour after another, 8 languages, 4 IDEs and 91 versions,
    so a group-by of its five dimensions has a group per record."""
    hours = [heavy_hour(h) for h in range(records // HEAVY_API_KEYS + 1)]
    languages, ides = len(HEAVY_LANGUAGES), len(HEAVY_IDES)
    for n in range(records):
        h, k = divmod(n, HEAVY_API_KEYS)
        yield (f'{{"api_key":"h-{k}","hour":"{hours[h]}","language":"{HEAVY_LANGUAGES[(h + n) % languages]}",'
               f'"ide":"{HEAVY_IDES[(n // 3) % ides]}","version":"1.{n % 13}.{n % 7}",'
               f'"num_acceptances":{n % 7},"num_lines_accepted":{n % 11},"num_bytes_accepted":{n % 101}}}\n')


def heavy_hour(h):
    """The start of the heavy team's h-th hour, RFC 3339 UTC."""
    return (HEAVY_BASE_HOUR + datetime.timedelta(hours=h)).strftime("%Y-%m-%dT%H:00:00Z")


def heavy_raw(fields, hours):
    """A raw query of the heavy team's records of its first `hours` hours
    (hours x HEAVY_API_KEYS rows)."""
    return {"data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [{"field": f} for f in fields],
            "filters": [{"name": "hour", "filter": "QUERY_FILTER_LESS_THAN", "value": heavy_hour(hours)}]}


def heavy_bodies():
    """kind -> the request body (without its key) of each kind the heavy connections cycle
    through."""
    raw = heavy_raw(["api_key", "hour", "language", "version", "num_acceptances"], RAW_HOURS)
    return {
        "group_by": {"query_requests": [{
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}],
            "aggregations": [{"field": f, "name": f} for f in ["api_key", "hour", "language", "version", "ide"]],
        }]},
        "raw_over": {"query_requests": [raw] * RAW_OVER_COPIES},
        "raw_under": {"query_requests": [raw] * RAW_UNDER_COPIES},
        "long_name": {"query_requests": [{
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [{"field": "date " + "a" * LONG_NAME_BYTES}]}]},
    }


def error_details(data):
    """[(path, rule)] of an error answer's details, or None when it is not one."""
    try:
        return [(d["path"], d["rule"]) for d in json.loads(data)["details"]]
    except (ValueError, KeyError, TypeError):
        return None


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
        self.heavy_latency = {}  # heavy kind -> [seconds] of its answers, whatever the status
        self.exports = []  # (rows, bytes, seconds) of every CSV export read whole
        self.probe = {"query": [], "healthz": []}  # seconds of the light probes' 200 answers
        self.queries_max = {"running": 0, "waiting": 0}  # from GET /metrics

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
        self.started = time.monotonic()
        self.setup_seconds = 0.0
        self.heavy_team = None
        self.heavy_keys = []
        self.heavy_import_seconds = 0.0

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
        # The light probes have a key of their own too: their latency is not the mixed key's 429s.
        self.probe_key = self.cli(
            "key", "create", "--team", self.team, "--name", "probe", "--permissions", "analytics-read"
        )["service_key"]
        for kind, records in seed.items():
            out = self.cli("import", "--team", self.team, "--kind", kind, self.write_jsonl(f"seed-{kind}.jsonl", records))
            if out != {"kind": kind, "records": len(records)}:
                raise Failed(f"seed import of {kind}: {out}")
        self.seed = len(seed["autocomplete"])
        if not self.args.no_heavy:
            self.setup_heavy()

    def setup_heavy(self):
        """The heavy team: a key per heavy connection (so the load meets the server's
        fairness, not one key's rate limit) and its records, imported once."""
        a = self.args
        self.heavy_team = self.cli("team", "create", "--name", "heavy")["team_id"]
        self.heavy_keys = [
            self.cli("key", "create", "--team", self.heavy_team, "--name", f"heavy-{i}",
                     "--permissions", "analytics-read")["service_key"]
            for i in range(a.heavy_connections)
        ]
        path = os.path.join(self.dir, "heavy.jsonl")
        with open(path, "w") as f:
            f.writelines(heavy_lines(a.heavy_records))
        t0 = time.monotonic()
        out = self.cli("import", "--team", self.heavy_team, "--kind", "autocomplete", path, timeout=600)
        self.heavy_import_seconds = time.monotonic() - t0
        os.remove(path)
        if out != {"kind": "autocomplete", "records": a.heavy_records}:
            raise Failed(f"the heavy team's import: {out}")
        log(f"heavy team: {a.heavy_records} records imported in {self.heavy_import_seconds:.1f} s, "
            f"{len(self.heavy_keys)} keys")

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
        """op -> [seconds] of the light team's 200 answers in the server's request log (its own
        timing, without the client's): informative only, an empty dict when the log's form
        differs."""
        out = {}
        pattern = re.compile(r' op="(\w+)" .*status=200 latency_ms=([0-9.]+)')
        team = re.compile(r' team="([^"]*)"')
        try:
            with open(self.server_log_path, errors="replace") as f:
                for line in f:
                    m = pattern.search(line)
                    t = team.search(line)
                    if m and (t is None or t.group(1) == self.team):  # the light team's only
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
        small = SMALL_QUERY
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
        for n in self.paced(start, interval, deadline):
            op, body = ops[(n + i) % len(ops)]
            if body is None:
                body = {"group_id": "g-eng", "set_add_on_credit_cap": 1000 + n} if n % 3 else {"team_level": True, "clear_add_on_credit_cap": True}
            t0 = time.perf_counter()
            try:
                status, data = self.post(conn, op, self.mixed_key, body)
            except (OSError, http.client.HTTPException) as e:
                conn = self.reconnect(conn, f"mixed-{i}", f"{op}: ", e, 30)
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

    def paced(self, start, interval, deadline):
        """Yields 0, 1, 2, ... at `start`, `start + interval`, ... until `deadline` or the stop
        flag."""
        n = 0
        while not self.stop.is_set():
            at = start + n * interval
            if at >= deadline:
                return
            delay = at - time.monotonic()
            if delay > 0 and self.stop.wait(delay):
                return
            yield n
            n += 1

    def reconnect(self, conn, who, what, error, timeout):
        """Counts a connection error of `who` (doing `what`) and returns a new connection."""
        with self.stats.lock:
            self.stats.conn_errors.append((who, f"{what}{type(error).__name__}: {error}"))
        conn.close()
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def unexpected_answer(self, group, op, status, data):
        with self.stats.lock:
            self.stats.unexpected.append((group, op, status, data[:300].decode(errors="replace")))

    def ingest_worker(self, deadline):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        interval = 1.0 / self.args.ingest_per_second
        start = time.monotonic()
        serial = 0
        for _ in self.paced(start, interval, deadline):
            records = [autocomplete("ingest", serial + j) for j in range(self.args.ingest_batch)]
            # A refused batch's identities are never sent again: only acknowledged ones count.
            serial += len(records)
            try:
                status, data = self.post(conn, "Ingest", self.ingest_key, {"kind": "autocomplete", "records": records})
            except (OSError, http.client.HTTPException) as e:
                conn = self.reconnect(conn, "ingest", "Ingest: ", e, 60)
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

    def heavy_worker(self, i, bodies, deadline):
        """A heavy connection: the kinds of HEAVY_KINDS one after another, as fast as the
        server answers, each answer checked against what its kind expects."""
        key = self.heavy_keys[i]
        requests = {kind: json.dumps(dict(body, service_key=key)).encode() for kind, body in bodies.items()}
        per_query = RAW_HOURS * HEAVY_API_KEYS
        over_at = f"query_requests[{RESULT_ITEMS // per_query}]"
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=HEAVY_TIMEOUT_S)
        n = i
        while not self.stop.is_set() and time.monotonic() < deadline:
            kind = HEAVY_KINDS[n % len(HEAVY_KINDS)]
            n += 1
            t0 = time.perf_counter()
            try:
                conn.request("POST", "/api/v1/Analytics", body=requests[kind], headers=JSON_HEADERS)
                r = conn.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException) as e:
                conn = self.reconnect(conn, f"heavy-{i}", f"{kind}: ", e, HEAVY_TIMEOUT_S)
                continue
            took = time.perf_counter() - t0
            self.stats.count("heavy", kind, r.status)
            with self.stats.lock:
                self.stats.heavy_latency.setdefault(kind, []).append(took)
            if r.status == 429:
                self.stop.wait(0.5)
                continue
            if kind == "raw_under":
                ok = r.status == 200 and data.count(b'{"item":') == RAW_UNDER_COPIES * per_query
            elif r.status != 400:
                ok = False
            elif kind == "group_by":
                ok = error_details(data) == [("query_requests[0]", "too_many")]
            elif kind == "raw_over":
                ok = error_details(data) == [(over_at, "too_many")]
            else:  # long_name
                details = error_details(data)
                ok = (len(data) < SMALL_ANSWER and details is not None and len(details) == 1
                      and details[0][0] == "query_requests[0].selections[0].field")
            if not ok:
                self.unexpected_answer("heavy", kind, r.status, data)
        conn.close()

    def export_worker(self, i, j, deadline):
        """A slow export reader (the j-th): a raw query of the heavy team's first hours as
        CSV, read at --export-rate bytes a second in small reads, to its end; checked whole."""
        a = self.args
        hours = a.export_rows // HEAVY_API_KEYS
        rows = hours * HEAVY_API_KEYS
        fields = a.export_fields.split(",")
        body = json.dumps({"service_key": self.heavy_keys[i],
                           "query_requests": [heavy_raw(fields, hours)]}).encode()
        header = ",".join(fields).encode() + b"\r\n"
        headers = dict(JSON_HEADERS, Accept="text/csv")

        def connect():
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=HEAVY_TIMEOUT_S)
            if a.export_recv_buffer:
                # A small receive buffer: the reader's kernel holds little of the answer (the
                # server's send buffer, up to 4 MiB on loopback, still holds its share).
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.export_recv_buffer)
                s.settimeout(HEAVY_TIMEOUT_S)
                s.connect(("127.0.0.1", self.port))
                conn.sock = s
            return conn

        # The readers start spread over the first half of the run.
        if self.stop.wait(a.duration / 2 * j / max(1, a.export_readers)):
            return
        conn = None
        last = None
        while not self.stop.is_set() and time.monotonic() < deadline:
            if last is not None and time.monotonic() + last > deadline + EXPORT_OVERRUN_S:
                break
            t0 = time.monotonic()
            try:
                conn = conn or connect()
                conn.request("POST", "/api/v1/Analytics", body=body, headers=headers)
                r = conn.getresponse()
                if r.status != 200:
                    data = r.read()
                    self.stats.count("heavy", "export", r.status)
                    if r.status != 429:
                        self.unexpected_answer("heavy", "export", r.status, data)
                    self.stop.wait(0.5)
                    continue
                got, lines, first, tail = 0, 0, b"", b""
                t_read = time.monotonic()
                while True:
                    chunk = r.read(EXPORT_READ)
                    if not chunk:
                        break
                    got += len(chunk)
                    lines += chunk.count(b"\n")  # a CRLF may straddle two reads
                    if len(first) < len(header):
                        first += chunk[:len(header)]
                    tail = (tail + chunk)[-2:]
                    pause = t_read + got / a.export_rate - time.monotonic()
                    if pause > 0 and self.stop.wait(pause):
                        return
            except (OSError, http.client.HTTPException) as e:
                with self.stats.lock:
                    self.stats.conn_errors.append((f"export-{j}", f"export: {type(e).__name__}: {e}"))
                if conn:
                    conn.close()
                conn = None
                continue
            last = time.monotonic() - t0
            self.stats.count("heavy", "export", 200)
            whole = (r.chunked and (r.getheader("Content-Type") or "").startswith("text/csv")
                     and first[:len(header)] == header and lines == rows + 1 and tail == b"\r\n")
            if whole:
                with self.stats.lock:
                    self.stats.exports.append((rows, got, last))
            else:
                self.unexpected_answer("heavy", "export", 200, (
                    f"not the whole CSV: chunked {r.chunked}, Content-Type {r.getheader('Content-Type')}, "
                    f"{got} bytes, {lines} lines (expected {rows + 1}), first {first[:80]!r}, "
                    f"last {tail!r}").encode())
        if conn:
            conn.close()

    def probe_worker(self, what, deadline):
        """The light team's latency as a client sees it: the small query (`query`) or
        `GET /healthz` (`healthz`), --probe-per-second times a second on a connection of its own."""
        interval = 1.0 / self.args.probe_per_second
        body = json.dumps(dict(SMALL_QUERY, service_key=self.probe_key)).encode()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        start = time.monotonic() + (interval / 2 if what == "healthz" else 0.0)
        for _ in self.paced(start, interval, deadline):
            t0 = time.perf_counter()
            try:
                if what == "query":
                    conn.request("POST", "/api/v1/Analytics", body=body, headers=JSON_HEADERS)
                else:
                    conn.request("GET", "/healthz")
                r = conn.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException) as e:
                conn = self.reconnect(conn, f"probe-{what}", "", e, 30)
                continue
            took = time.perf_counter() - t0
            self.stats.count("probe", what, r.status)
            try:
                answer = json.loads(data) if r.status == 200 else None
                if what == "query":
                    int(answer["queryResults"][0]["responseItems"][0]["item"]["sum_num_acceptances"])
                elif answer["status"] != "ok":
                    raise ValueError("not ok")
            except (ValueError, KeyError, IndexError, TypeError):
                self.unexpected_answer("probe", what, r.status, data)
                continue
            with self.stats.lock:
                self.stats.probe[what].append(took)
        conn.close()

    def memory_worker(self):
        """Samples the server's memory, and its queries running and waiting (`GET /metrics`),
        every 0.5 s."""
        t0 = time.monotonic()
        conn = None
        gauge = re.compile(r'^usage_queries\{state="(running|waiting)"\} ([0-9.]+)$', re.M)
        while not self.stop.wait(0.5):
            rss = self.read_rss()
            if rss:
                with self.stats.lock:
                    written = self.stats.ingest_acked + self.stats.imported
                self.rss_samples.append((time.monotonic() - t0, rss[0], written))
                self.peak_rss_kb = max(self.peak_rss_kb, rss[1])
            try:  # informative only: an error here fails nothing
                conn = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                conn.request("GET", "/metrics")
                text = conn.getresponse().read().decode(errors="replace")
            except (OSError, http.client.HTTPException):
                if conn:
                    conn.close()
                conn = None
                continue
            with self.stats.lock:
                for state, value in gauge.findall(text):
                    self.stats.queries_max[state] = max(self.stats.queries_max[state], int(float(value)))
        if conn:
            conn.close()

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
        t0 = time.monotonic()
        self.setup()
        self.start_server()
        self.setup_seconds = time.monotonic() - t0
        rss0 = self.read_rss()
        interval = MIXED_CONNECTIONS * 60.0 / (2 * a.rate_per_minute)
        log(f"setup took {self.setup_seconds:.1f} s. {a.duration:g} s: {MIXED_CONNECTIONS} connections at "
            f"{2 * a.rate_per_minute}/min in total "
            f"(one request every {interval:.2f} s each), Ingest {a.ingest_batch} records x {a.ingest_per_second:g}/s, "
            f"imports of {a.import_records} records, {SLOW_CONNECTIONS} slow connections, "
            f"probes {a.probe_per_second:g}/s each")
        if not a.no_heavy:
            log(f"heavy team: {a.heavy_connections - a.export_readers} connections cycling through "
                f"{', '.join(HEAVY_KINDS)}; {a.export_readers} slow export readers of "
                f"{a.export_rows // HEAVY_API_KEYS * HEAVY_API_KEYS} rows at {a.export_rate / 1024:g} KiB/s")
        begin = time.monotonic()
        deadline = begin + a.duration
        threads = [self.guarded(f"mixed-{i}", self.mixed_worker, i, interval, deadline)
                   for i in range(MIXED_CONNECTIONS)]
        threads += [
            self.guarded("ingest", self.ingest_worker, deadline),
            self.guarded("import", self.import_worker, deadline),
            self.guarded("slow", self.slow_worker, deadline),
            self.guarded("probe-query", self.probe_worker, "query", deadline),
            self.guarded("probe-healthz", self.probe_worker, "healthz", deadline),
        ]
        if not a.no_heavy:
            bodies = heavy_bodies()
            threads += [self.guarded(f"export-{i}", self.export_worker, i, i, deadline)
                        for i in range(a.export_readers)]
            threads += [self.guarded(f"heavy-{i}", self.heavy_worker, i, bodies, deadline)
                        for i in range(a.export_readers, a.heavy_connections)]
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
        # Fairness: the light team's small query and /healthz, whatever the heavy team does.
        for what in ("query", "healthz"):
            seen = sorted(s.probe[what])
            p99 = percentile(seen, 99)
            if a.duration >= 5 and not seen:
                failures.append(f"the {what} probe got no answer")
            elif p99 is not None and p99 * 1000 > a.light_p99_ms:
                failures.append(f"the light team's {what} p99 {p99 * 1000:.1f} ms over the bound of "
                                f"{a.light_p99_ms:g} ms (max {seen[-1] * 1000:.1f} ms, {len(seen)} answers)")
        heavy = self._heavy_by_kind()
        if not a.no_heavy and a.duration >= 10:
            idle = [k for k in HEAVY_KINDS if not any(st != 429 for st in heavy.get(k, {}))]
            if idle:
                failures.append(f"the heavy load did not run: no answer but 429 to {', '.join(idle)}")
            if a.export_readers and not s.exports:
                failures.append("no CSV export was read whole")

        small = sorted(s.latency.get("Analytics", []))
        ms = lambda v: "n/a" if v is None else f"{v * 1000:.1f} ms"
        dist = lambda v: (f"p50 {ms(percentile(sorted(v), 50))}, p99 {ms(percentile(sorted(v), 99))}, "
                          f"max {ms(max(v) if v else None)}")
        heavy_lines_out = []
        if a.no_heavy:
            heavy_lines_out.append("heavy team: none (--no-heavy)")
        else:
            heavy_lines_out += [
                f"heavy team: {a.heavy_records} records (imported in {self.heavy_import_seconds:.1f} s), "
                f"{a.heavy_connections} connections with a key each: "
                f"{a.heavy_connections - a.export_readers} cycling, {a.export_readers} export readers; "
                f"{sum(sum(v.values()) for v in heavy.values())} requests",
            ] + [
                f"  {kind}: " + json.dumps({str(k): v for k, v in sorted(heavy.get(kind, {}).items())})
                + f", latency {dist(s.heavy_latency.get(kind, []))}"
                for kind in HEAVY_KINDS
            ] + [
                f"  export (CSV, {a.export_rows // HEAVY_API_KEYS * HEAVY_API_KEYS} rows of "
                f"{a.export_fields} read at {a.export_rate / 1024:g} KiB/s): "
                + json.dumps({str(k): v for k, v in sorted(heavy.get("export", {}).items())})
                + f", {len(s.exports)} read whole"
                + (f", receive buffer {a.export_recv_buffer} B" if a.export_recv_buffer else "")
                + (f", {min(b for _, b, _ in s.exports) / 1e6:.2f} MB each, in "
                   f"{min(t for _, _, t in s.exports):.1f}-{max(t for _, _, t in s.exports):.1f} s"
                   if s.exports else ""),
            ]
        probe_query, probe_healthz = s.probe["query"], s.probe["healthz"]
        lines = [
            f"duration: {elapsed:.1f} s of load after {self.setup_seconds:.1f} s of setup; "
            f"wall time {time.monotonic() - self.started:.1f} s (binary {self.binary})",
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
        ] + heavy_lines_out + [
            f"queries in the server's slots (usage_queries of GET /metrics, every 0.5 s): at most "
            f"{s.queries_max['running']} running, {s.queries_max['waiting']} waiting",
            f"light team's probes ({a.probe_per_second:g}/s each, bound of the p99 {a.light_p99_ms:g} ms): "
            f"small query {len(probe_query)} answers, {dist(probe_query)}; "
            f"GET /healthz {len(probe_healthz)} answers, {dist(probe_healthz)}",
            f"small query on the mixed connections (Analytics, one SUM over the autocomplete records), "
            f"{len(small)} answers: "
            f"p50 {ms(percentile(small, 50))}, p99 {ms(percentile(small, 99))}, max {ms(small[-1] if small else None)}",
            "  the light team's in the server's request log (its own timing): Analytics " + (
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

    def _heavy_by_kind(self):
        """heavy kind -> {status: count}."""
        out = {}
        with self.stats.lock:
            for (g, op, status), n in self.stats.by_status.items():
                if g == "heavy":
                    out.setdefault(op, {})[status] = n
        return out

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
    p.add_argument("--max-rss-mb", type=float, default=1024,
                   help="bound of the server's peak RSS in MiB (default 1024, issue 28)")
    p.add_argument("--light-p99-ms", type=float, default=500,
                   help="bound of the p99 of the light team's small query and of /healthz (default 500)")
    p.add_argument("--probe-per-second", type=float, default=4,
                   help="requests a second of each light probe (default 4)")
    p.add_argument("--no-heavy", action="store_true", help="run without the heavy team (for comparison)")
    p.add_argument("--heavy-records", type=int, default=400_000,
                   help="the heavy team's autocomplete records (default 400,000; at least 120,000)")
    p.add_argument("--heavy-connections", type=int, default=16,
                   help="the heavy team's connections, a key each, the export readers among them (default 16)")
    p.add_argument("--export-readers", type=int, default=2,
                   help="heavy connections that read CSV exports slowly (default 2)")
    p.add_argument("--export-rows", type=int, default=None,
                   help="rows of an export, rounded down to whole hours of 2,000 (default 98,000; "
                        "20,000 with --duration 30 or less, so an export ends near the run's end)")
    p.add_argument("--export-rate", type=float, default=64 * 1024,
                   help="bytes a second a slow export reader reads (default 64 KiB)")
    p.add_argument("--export-fields", default=EXPORT_FIELDS,
                   help=f"the export's columns (default {EXPORT_FIELDS}: 2.1 MB for 98,000 rows, which "
                        "the kernel's buffers hold on loopback; add `hour` for 5 MB, more than they "
                        "hold, so the server waits on the reader with one of the team's slots)")
    p.add_argument("--export-recv-buffer", type=int, default=0,
                   help="SO_RCVBUF of an export reader's socket in bytes, e.g. 4096 (default 0: the "
                        "kernel's, which on loopback grows to megabytes)")
    args = p.parse_args()
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"not an executable: {args.binary}")
    if args.export_rows is None:
        args.export_rows = 20_000 if args.duration <= 30 else 98_000
    if not args.no_heavy:
        if args.heavy_records < 120_000:
            sys.exit("--heavy-records: at least 120,000 (the group-by must pass 100,000 groups)")
        if not 0 <= args.export_readers < args.heavy_connections:
            sys.exit("--export-readers: fewer than --heavy-connections")
        if not HEAVY_API_KEYS <= args.export_rows <= min(RESULT_ITEMS, args.heavy_records):
            sys.exit(f"--export-rows: from {HEAVY_API_KEYS} to {RESULT_ITEMS:,} and at most --heavy-records")

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
