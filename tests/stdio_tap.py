"""A recording tap for a stdio MCP server: `python3 stdio_tap.py RECORD -- COMMAND ARGS…` runs
the server and passes every line between the client and it unchanged, appending each to RECORD
as one JSON line `{"t": <unix time>, "from": "client" | "server", "message": <the JSON-RPC
message>}`. The session tests put it in front of our server to see exactly what a real client
sent and got (what tasks/get answered, how often it was asked), which neither the client's
screen nor our own log shows."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time


def main(argv):
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: stdio_tap.py RECORD -- COMMAND [ARGS…]")
    record = open(argv[0], "a", encoding="utf-8")
    lock = threading.Lock()
    server = subprocess.Popen(argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def note(side, line):
        try:
            message = json.loads(line.decode("utf-8"))
        except ValueError:
            message = line.decode("utf-8", "replace")
        with lock:
            record.write(json.dumps({"t": time.time(), "from": side, "message": message}) + "\n")
            record.flush()

    def server_to_client():
        for line in iter(server.stdout.readline, b""):
            note("server", line)
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()

    relay = threading.Thread(target=server_to_client, daemon=True)
    relay.start()
    for line in iter(sys.stdin.buffer.readline, b""):
        note("client", line)
        try:
            server.stdin.write(line)
            server.stdin.flush()
        except BrokenPipeError:
            break
    # The client closed our stdin: so does the server's, and it ends as it would untapped.
    try:
        server.stdin.close()
    except BrokenPipeError:
        pass
    code = server.wait()
    relay.join(5)
    sys.exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])
