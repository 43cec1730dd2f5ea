#!/usr/bin/env python3
"""Issue 28, finding 1, measured: a long unknown name against usage-server.

    python3 bench/robustness/names.py PATH/TO/usage-server [PATH/TO/other-usage-server ...]

For each binary: a fresh SQLite store in a temp dir, a team and an `analytics-read` key made
with the server's CLI, `serve` on a free loopback port. Then two requests at once, each with
a selection `"date " + "a" * 1_000_000` (an unknown zone of a megabyte), while `GET
/healthz` is sent every 100 ms on a connection of its own. Printed per binary: the status,
time and size of each answer, and the most and the median `/healthz` took meanwhile. The
binaries run one after another in one run, so their figures compare (contract section 11:
no request costs more than its answer is worth; no tenant slows another).

Python 3 standard library only; the server and the temp dir are removed on exit.
"""

import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def cli(binary, store, *args):
    out = subprocess.run([binary, "--store", store, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def measure(binary):
    tmp = tempfile.mkdtemp(prefix="usage-names-")
    store = f"sqlite:{os.path.join(tmp, 'usage.db')}"
    server = None
    try:
        team = cli(binary, store, "team", "create", "--name", "names")["team_id"]
        key = cli(binary, store, "key", "create", "--team", team, "--permissions", "analytics-read")["service_key"]
        server = subprocess.Popen(
            [binary, "--store", store, "serve", "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        port = int(json.loads(server.stdout.readline())["listen"].rsplit(":", 1)[1])
        body = json.dumps({"service_key": key, "query_requests": [{
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [{"field": "date " + "a" * 1_000_000}]}]}).encode()
        answers = []
        done = threading.Event()

        def send():
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            t0 = time.perf_counter()
            c.request("POST", "/api/v1/Analytics", body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
            answers.append((r.status, time.perf_counter() - t0, len(data)))
            c.close()

        health = []

        def probe():
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            while not done.is_set():
                t0 = time.perf_counter()
                c.request("GET", "/healthz")
                c.getresponse().read()
                health.append(time.perf_counter() - t0)
                time.sleep(0.1)
            c.close()

        p = threading.Thread(target=probe)
        p.start()
        senders = [threading.Thread(target=send) for _ in range(2)]
        for s in senders:
            s.start()
        for s in senders:
            s.join()
        done.set()
        p.join()
        return answers, health
    finally:
        if server:
            server.terminate()
            server.wait(15)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for binary in sys.argv[1:]:
        answers, health = measure(binary)
        print(f"{binary}:")
        for status, took, size in sorted(answers):
            print(f"  answer {status} in {took:.3f} s, {size:,} bytes")
        print(f"  /healthz meanwhile: {len(health)} probes, median {statistics.median(health) * 1000:.1f} ms, "
              f"max {max(health) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
