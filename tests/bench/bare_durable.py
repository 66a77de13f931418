"""The floor a submit is measured against: a bare standard-library HTTP handler that does what
a submit must do at the least, and nothing else.

    python3 tests/bench/bare_durable.py LOG_DIR

It prints its port, then for each POST: reads the JSON body, parses it, writes it to a new
file in LOG_DIR durably (a temporary file fsynced, renamed, the folder fsynced), answers 200
with a small JSON body, and writes one JSON line to stdout, as the server writes the tool result
to its client. tests/bench/run.py times POST -> that line, beside the server's submit -> tool
result, in the same run and on the same disk.
"""

from __future__ import annotations

import http.server
import json
import os
import sys
import threading


def durable_write(folder: str, name: str, data: bytes) -> str:
    path = os.path.join(folder, name)
    with open(path + ".tmp", "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(path + ".tmp", path)
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return path


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    counter = 0
    lock = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with Handler.lock:
            Handler.counter += 1
            number = Handler.counter
        path = durable_write(self.server.folder, "bare-%d.json" % number, json.dumps(body).encode("utf-8"))
        reply = json.dumps({"ok": True}).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)
        line = json.dumps({"jsonrpc": "2.0", "id": number, "result": {"path": path, "answers": body}})
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def log_message(self, *args) -> None:
        pass


def main() -> int:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.folder = sys.argv[1]
    os.makedirs(server.folder, exist_ok=True)
    sys.stdout.write("%d\n" % server.server_address[1])
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
