"""What the front door's relay pays to read an owner's answer head: its own parse
(askrich._kept_answer_head) against http.client's (HTTPResponse.begin, the standard library's
way), on the same head, in the same run.

    python3 tests/bench/relay_head.py [--runs N]

The door relays the owner's answer byte for byte and keeps the connection when the owner says
so; http.client would do that job only by parsing every header through the email package and
writing the head out again. See tests/bench/README.md, "The front door's cost".
"""

from __future__ import annotations

import argparse
import http.client
import io
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import askrich  # noqa: E402

# An answer of the owner's to a submit through the door, as it comes: the headers our replies carry.
HEAD = (b"HTTP/1.0 200 OK\r\nServer: ask-user-rich/0.1.0\r\nDate: Sun, 06 Dec 2026 23:00:00 GMT\r\n"
        b"Content-Type: application/json\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
        b"Referrer-Policy: no-referrer\r\nX-Frame-Options: DENY\r\n"
        b"Content-Security-Policy: default-src 'none'; frame-ancestors 'none'\r\n"
        b"Content-Length: 120\r\nConnection: keep-alive\r\n\r\n")
BODY = b"x" * 120


class _Answer:
    """What HTTPResponse reads from: the answer as a file."""

    def makefile(self, mode):
        return io.BytesIO(HEAD + BODY)


def ours() -> None:
    data = HEAD + BODY
    end = data.find(b"\r\n\r\n")
    askrich._kept_answer_head(data[:end])


def standard() -> None:
    answer = http.client.HTTPResponse(_Answer())
    answer.begin()
    head = ["HTTP/1.0 %d %s" % (answer.status, answer.reason)]
    head += ["%s: %s" % pair for pair in answer.getheaders() if pair[0].lower() != "connection"]
    ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
    answer.read()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20000)
    runs = parser.parse_args(argv).runs
    figures = {}
    for _ in range(3):  # interleaved, the best of three
        for name, parse in (("ours", ours), ("http.client", standard)):
            started = time.perf_counter()
            for _ in range(runs):
                parse()
            took = (time.perf_counter() - started) / runs * 1e6
            figures[name] = min(figures.get(name, took), took)
    for name, took in figures.items():
        print("%-12s %6.1f us per answer head" % (name, took))
    print("http.client / ours: %.1fx" % (figures["http.client"] / figures["ours"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
