"""Helpers for the inbox's tests and its screenshot: agents as real server processes on one
log folder, each in a folder of its own, and a reader of the inbox's live stream that tests
wait on (a gate on the events themselves, never a timer)."""

from __future__ import annotations

import os
import socket

from helpers.support import WAIT, EventsReader, SubprocessServer


def free_port() -> int:
    """A port nothing listens on now (the tests' own inbox port: never the well-known one)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def read_key(log_dir) -> str:
    with open(os.path.join(str(log_dir), "inbox.key"), encoding="ascii") as handle:
        return handle.read().strip()


class Agent:
    """One `python3 askrich.py` as a client named `name` starts it in `folder`, with one
    interview asked (and left waiting for the user: no browser opens in tests)."""

    def __init__(self, log_dir, port: int, name: str, folder, title: str, questions: int = 3,
                 env=None) -> None:
        os.makedirs(str(folder), exist_ok=True)
        self.folder = str(folder)
        settings = {"ASK_USER_RICH_INBOX_PORT": str(port)}
        settings.update(env or {})
        self.server = SubprocessServer(log_dir, env=settings, cwd=self.folder)
        self.server.call("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": name, "version": "1"},
        })
        self.server.notify("notifications/initialized")
        self.title = title
        self.pid = self.server.process.pid
        self.url = None
        self.session = None
        if title is not None:
            self.ask(title, questions)

    def ask(self, title: str, questions: int = 3) -> dict:
        reply = self.server.tool("ask_user_rich", {
            "title": title,
            "questions": [{"id": "q%d" % n, "header": "Question %d?" % n,
                           "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]}
                          for n in range(1, questions + 1)],
        })
        structured = reply["result"]["structuredContent"]
        assert structured["status"] == "awaiting", structured
        self.url, self.session = structured["url"], structured["sessionId"]
        return structured

    def kill(self) -> None:
        """SIGKILL: no clean-up of its own; its registry file stays behind for others to drop."""
        self.server.process.kill()
        self.server.process.wait(WAIT)

    def close(self) -> None:
        if self.server.process.poll() is None:
            self.server.close()


def inbox_events(port: int, key: str, host: str = "127.0.0.1") -> EventsReader:
    """The inbox's events route read on a thread: every `inbox` event's JSON, kept in order."""
    return EventsReader("http://localhost:%d/api/inbox/%s/events" % (port, key), "inbox",
                        headers={"Host": "localhost:%d" % port}, connect_host=host)


def titles(listing) -> list:
    return [row["title"] for row in listing["interviews"]]
