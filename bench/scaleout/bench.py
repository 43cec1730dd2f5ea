"""Scale-out (issue 30, point 5): three `serve` instances on a Citus database behind HAProxy
with team affinity, against one embedded server on the same rows.

Run by bench/scaleout.sh, which starts the cluster, makes a fresh database, builds, writes
the data and the in-memory evaluator's answers, then calls:

    bench.py --bin BIN --jsonl FILE --rows N --queries QUERIES.jsonl --answers OURS.json
             --runs R --workdir DIR --url CITUS_URL

Steps:
1. the embedded store (`sqlite:PATH`): `import`, `serve`, Q1-Q6 over HTTP (the reference);
2. Citus: `import` of the same rows, timed (target >= 150,000 records/s at 1M rows);
3. three `serve` instances on Citus behind HAProxy (docs/citus.md's configuration: the
   Bearer key or the body's `service_key` hashed, consistently, so each key's team is
   cached on one instance); the first Q1 through HAProxy starts the owning instance's load of the team,
   then Q1-Q6 warm through HAProxy (target <= 2x the embedded store), answers compared;
4. 30 s of mixed load through HAProxy by three small teams (Ingest of new records, a cap
   set and read back, a query), one instance killed with SIGKILL at 10 s. A request cut in
   flight (no answer, or HAProxy's 502/503/504) is retried once by the client and counted.
   Afterwards every acknowledged record and the last acknowledged cap of each team must
   read back, and every request after the kill must have had an answer.
Prints Markdown tables; exits 1 if an answer differs, a write is lost or a request after
the kill gets none (targets missed are reported, not failures).

The helpers are bench/embedded/bench.py's. Python standard library only.
"""
import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "embedded"))
import bench as emb  # noqa: E402  (bench/embedded/bench.py)
from bench import Failed, Server, cli, fmt_int, free_port, import_records, log, \
    run_queries, setup_store  # noqa: E402

emb.TAG = "scaleout"
IMPORT_TARGET = 150_000  # records/s at 1M rows
RATIO_TARGET = 2.0  # x the embedded store
INSTANCES = 3
LOAD_S = 30.0
KILL_AT_S = 10.0
TEAMS = 3
BATCH = 50
LOADED = re.compile(r"a team is loaded into the cache")
LOAD_TIMEOUT_S = 900

# HAProxy in front of the instances: the configuration docs/citus.md gives ("Behind a load
# balancer"), read from it, with this run's ports. Its comments there say why each line.
DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "citus.md")


def haproxy_cfg(port, server_ports):
    """docs/citus.md's HAProxy configuration, bound to `port`, over `server_ports`."""
    text = open(DOCS).read()
    m = re.search(r"<!-- haproxy:begin -->\n```haproxy\n(.*?)```\n<!-- haproxy:end -->", text, re.S)
    if not m:
        raise Failed("docs/citus.md has no HAProxy configuration block")
    lines, servers = [], []
    for line in m.group(1).splitlines():
        if line.strip().startswith("bind "):
            line = f"    bind 127.0.0.1:{port}"
        if line.strip().startswith("server "):
            servers.append(line)
            continue
        lines.append(line)
    if len(servers) != len(server_ports) or not any(l.strip().startswith("bind ") for l in lines):
        raise Failed("docs/citus.md's HAProxy block lacks its bind or server lines")
    lines += [f"    server s{i} 127.0.0.1:{p} check" for i, p in enumerate(server_ports)]
    return "\n".join(lines) + "\n"


class Proxy:
    """HAProxy's frontend, with bench.Server's `post` (one keep-alive connection)."""

    def __init__(self, port):
        self.port = port
        self.conn = None
        self.label = "haproxy"

    post = Server.post


def request(port, method, path, body):
    """One request on a new connection: (status, parsed JSON or None); (None, None) when
    the connection fails or is cut before an answer."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, data, {"Content-Type": "application/json"} if data else {})
        r = c.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, None
    except (http.client.HTTPException, OSError):
        return None, None
    finally:
        c.close()


class Load:
    """The mixed load's counters, shared by its threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.after_kill = 0
        self.retried = 0
        self.unanswered = []
        self.errors = []
        self.killed_at = None

    def call(self, port, path, body):
        """A request with one retry of a cut one; the answer, or None (counted)."""
        sent = time.monotonic()
        status, answer = request(port, "POST", path, body)
        retried = status is None or status in (502, 503, 504)
        if retried:
            status, answer = request(port, "POST", path, body)
        with self.lock:
            self.requests += 1
            self.retried += retried
            after = self.killed_at is not None and sent >= self.killed_at
            self.after_kill += after
            if status is None or status >= 500:
                if after:
                    self.unanswered.append(f"{path}: {status}")
                return None
            if status != 200:
                self.errors.append(f"{path}: {status} {str(answer)[:200]}")
                return None
        return answer


def team_load(load, port, key, n, stop, acked, caps):
    """One team's loop: Ingest BATCH new records (one user each), set the cap to the next
    value and read it back, ask the team's totals."""
    i = 0
    while not stop.is_set():
        recs = [{"api_key": f"u{n}-{i}-{j}", "hour": "2025-06-01T10:00:00Z", "language": "GO",
                 "ide": "vscode", "version": "1.0.0", "num_acceptances": 1,
                 "num_lines_accepted": 1, "num_bytes_accepted": 1} for j in range(BATCH)]
        if load.call(port, "/api/v1/Ingest",
                     {"service_key": key, "kind": "autocomplete", "records": recs}) is not None:
            acked.update(r["api_key"] for r in recs)
        cap = 1000 + i
        if load.call(port, "/api/v1/UsageConfig",
                     {"service_key": key, "team_level": True,
                      "set_add_on_credit_cap": cap}) is not None:
            caps.append(cap)
        load.call(port, "/api/v1/GetUsageConfig", {"service_key": key, "team_level": True})
        load.call(port, "/api/v1/Analytics", {"service_key": key, "query_requests": [{
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [{"field": "distinct_users", "name": "u"}]}]})
        i += 1


def stored_users(port, key):
    """Every api_key the team stores, through HAProxy."""
    status, answer = request(port, "POST", "/api/v1/Analytics", {
        "service_key": key, "query_requests": [{
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [{"field": "num_acceptances", "aggregation_function":
                            "QUERY_AGGREGATION_SUM", "name": "a"}],
            "aggregations": [{"field": "api_key", "name": "k"}]}]})
    if status != 200:
        raise Failed(f"reading a team's users back: HTTP {status}: {str(answer)[:300]}")
    return {i["item"]["k"] for i in answer["queryResults"][0].get("responseItems", [])}


def main():
    ap = argparse.ArgumentParser()
    for a in ("--bin", "--jsonl", "--queries", "--answers", "--workdir", "--url"):
        ap.add_argument(a, required=True)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--runs", type=int, default=5)
    o = ap.parse_args()
    queries = [json.loads(line) for line in open(o.queries) if line.strip()]
    ours = json.load(open(o.answers))
    n = o.rows
    failed = False

    # 1. The embedded store: the reference.
    db = os.path.join(o.workdir, "sqlite", "usage.db")
    os.makedirs(os.path.dirname(db))
    sqlite = f"sqlite:{db}"
    team, key = setup_store(o.bin, sqlite)
    import_records(o.bin, sqlite, team, o.jsonl, n)
    s = Server(o.bin, sqlite, o.workdir, "sqlite")
    try:
        s.wait_healthy()
        s.post("/api/v1/Analytics", dict(queries[0]["body"], service_key=key))
        emb_results, f = run_queries(s, key, queries, ours, o.runs)
        failed |= f
        s.stop()
    finally:
        s.kill()

    # 2. Citus: import.
    team, key = setup_store(o.bin, o.url)
    cit_import = import_records(o.bin, o.url, team, o.jsonl, n)
    log(f"citus: imported in {cit_import[0]:.1f} s")

    # 3. Three instances behind HAProxy.
    servers = [Server(o.bin, o.url, o.workdir, f"citus-{i}") for i in range(INSTANCES)]
    proxy_port = free_port()
    cfg = os.path.join(o.workdir, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write(haproxy_cfg(proxy_port, [s.port for s in servers]))
    haproxy_err = os.path.join(o.workdir, "haproxy.stderr")
    haproxy = subprocess.Popen(["haproxy", "-f", cfg, "-db"], stdout=subprocess.DEVNULL,
                               stderr=open(haproxy_err, "w"))
    with open(os.path.join(o.workdir, "server.pids"), "a") as f:
        f.write(f"{haproxy.pid}\n")
    try:
        for s in servers:
            s.wait_healthy()
        proxy = Proxy(proxy_port)
        t = time.monotonic()
        while True:
            if haproxy.poll() is not None:
                raise Failed(f"haproxy exited ({haproxy.returncode}):\n"
                             f"{open(haproxy_err).read()[-2000:]}")
            status, _ = request(proxy_port, "POST", "/api/v1/Analytics",
                                dict(queries[0]["body"], service_key=key))
            if status == 200:
                break
            if time.monotonic() - t > 30:
                raise Failed(f"HAProxy answered {status} for 30 s:\n"
                             f"{open(haproxy_err).read()[-2000:]}")
            time.sleep(0.2)
        t = time.monotonic()
        owner = None
        while owner is None:
            owner = next((s for s in servers if LOADED.search(s.stderr_text())), None)
            if time.monotonic() - t > LOAD_TIMEOUT_S:
                raise Failed("no instance loaded the team into its cache")
            time.sleep(0.1)
        log(f"{owner.label} holds the team, loaded {time.monotonic() - t:.1f} s after the first query")
        lb_results, f = run_queries(proxy, key, queries, ours, o.runs)
        failed |= f
        others = [s.label for s in servers if s is not owner and LOADED.search(s.stderr_text())]
        if others:
            log(f"note: {', '.join(others)} loaded the team too")

        # 4. Mixed load with one instance killed.
        load = Load()
        teams = []
        for i in range(TEAMS):
            t_id = cli(o.bin, o.url, "team", "create", "--name", f"load{i}", "--plan",
                       "enterprise")[0]["team_id"]
            k = cli(o.bin, o.url, "key", "create", "--team", t_id, "--permissions",
                    "analytics-read,usage-write,billing-read,billing-write")[0]["service_key"]
            teams.append((k, set(), []))
        stop = threading.Event()
        threads = [threading.Thread(target=team_load,
                                    args=(load, proxy_port, k, i, stop, acked, caps))
                   for i, (k, acked, caps) in enumerate(teams)]
        start = time.monotonic()
        for th in threads:
            th.start()
        victim = servers[1]
        time.sleep(KILL_AT_S)
        with load.lock:
            load.killed_at = time.monotonic()
        victim.kill()
        log(f"killed {victim.label} at {time.monotonic() - start:.1f} s")
        time.sleep(max(0.0, LOAD_S - (time.monotonic() - start)))
        stop.set()
        for th in threads:
            th.join()
        lost = []
        for i, (k, acked, caps) in enumerate(teams):
            stored = stored_users(proxy_port, k)
            missing = acked - stored
            if missing:
                lost.append(f"team {i}: {len(missing)} acknowledged records missing")
            status, answer = request(proxy_port, "POST", "/api/v1/GetUsageConfig",
                                     {"service_key": k, "team_level": True})
            if caps and (status != 200 or answer.get("addOnCreditCap") != caps[-1]):
                lost.append(f"team {i}: cap {answer} after the last acknowledged {caps[-1]}")
        acked_records = sum(len(a) for _, a, _ in teams)
        for s in servers:
            if s is not victim:
                s.stop()
    finally:
        for s in servers:
            s.kill()
        haproxy.send_signal(signal.SIGTERM)
        haproxy.wait()

    ratios = []
    print(f"\n### {n:,} autocomplete rows: Citus, 3 instances behind HAProxy\n")
    rate = n / cit_import[0]
    print(f"Import into Citus (`usage-server import`, wall clock): **{fmt_int(rate)} records/s** "
          f"({cit_import[0]:.1f} s; target >= {IMPORT_TARGET:,} at 1M rows: "
          f"{'met' if rate >= IMPORT_TARGET else 'not met'}).\n")
    print(f"| query | through HAProxy (ms) | embedded (ms) | ratio | <= {RATIO_TARGET:g}x "
          "| rows | answers |")
    print("|---|---:|---:|---:|---|---:|---|")
    for (name, lb, rows, p), (_, e, _, _) in zip(lb_results, emb_results):
        ratios.append(lb / e)
        print(f"| {name} | {lb * 1e3:.1f} | {e * 1e3:.1f} | {lb / e:.2f}x "
              f"| {'met' if lb / e <= RATIO_TARGET else 'not met'} | {rows} "
              f"| {'equal' if p is None else 'DIFFER: ' + p} |")
    print(f"\nMixed load, {LOAD_S:.0f} s, {TEAMS} teams, {victim.label} killed at "
          f"{KILL_AT_S:.0f} s: {load.requests:,} requests ({load.after_kill:,} sent after the "
          f"kill), {load.retried} retried once by the client after a cut or a 502/503/504, "
          f"{len(load.unanswered)} without an answer after the kill; "
          f"{acked_records:,} records acknowledged, "
          f"{'none lost' if not lost else 'LOST: ' + '; '.join(lost)}; "
          f"{len(load.errors)} 4xx answers{': ' + load.errors[0] if load.errors else ''}.")
    failed |= bool(lost) or bool(load.unanswered) or bool(load.errors)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    try:
        main()
    except Failed as e:
        log(f"FAILED: {e}")
        sys.exit(1)
