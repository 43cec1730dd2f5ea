"""A webhook receiver for the server's tests (tests/server/webhooks.rs).

Verifies every delivery with the `standardwebhooks` package (PyPI), the reference
implementation of the Standard Webhooks specification, against the secret of the path it
came to, and logs it. Prints its port on the first line of stdout.

Control (JSON POSTs the test sends):
- /_secrets {"/path": "whsec_..."}: the secret of each path.
- /_fail {"n": N}: answer 500 to the next N deliveries.
- /_hold {"n": N, "seconds": S}: hold each of the next N deliveries S seconds, then 200.
- GET /_log: every delivery as JSON: path, id, verified, answered, held, body.
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook

state = {"secrets": {}, "fail": 0, "hold": 0, "hold_seconds": 0, "log": []}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b""):
        self.send_response(status)
        self.send_header("content-length", str(len(body)))
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/_log":
            with lock:
                body = json.dumps(state["log"]).encode()
            return self.reply(200, body)
        self.reply(404)

    def do_POST(self):
        n = int(self.headers.get("content-length", "0"))
        data = self.rfile.read(n)
        if self.path == "/_secrets":
            with lock:
                state["secrets"].update(json.loads(data))
            return self.reply(204)
        if self.path == "/_fail":
            with lock:
                state["fail"] = json.loads(data)["n"]
            return self.reply(204)
        if self.path == "/_hold":
            c = json.loads(data)
            with lock:
                state["hold"], state["hold_seconds"] = c["n"], c["seconds"]
            return self.reply(204)
        headers = {k: v for k, v in self.headers.items()}
        with lock:
            secret = state["secrets"].get(self.path)
        verified = False
        payload = None
        if secret is not None:
            try:
                payload = Webhook(secret).verify(data, headers)
                verified = True
            except Exception as e:  # a failed verification is logged, not answered 2xx
                payload = {"error": str(e)}
        with lock:
            if state["fail"] > 0:
                state["fail"] -= 1
                answered, held = 500, False
            elif state["hold"] > 0:
                state["hold"] -= 1
                answered, held = 200, True
            else:
                answered, held = (200 if verified else 400), False
            entry = {
                "path": self.path,
                "id": headers.get("webhook-id") or headers.get("Webhook-Id"),
                "verified": verified,
                "answered": answered,
                "held": held,
                "body": payload,
            }
            state["log"].append(entry)
            seconds = state["hold_seconds"]
        if held:
            time.sleep(seconds)
        self.reply(answered)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
