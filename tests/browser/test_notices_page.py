"""Notices end to end (tests/README.md, "Notices"): the server as an MCP client starts it, a call
waiting after `delivery: "link"`, the desktop's notifier (a stand-in on PATH) told at once, and
the person's page view in Chromium ending the reminders while the call keeps waiting for the
answers."""
from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from formkit import DESKTOP  # noqa: E402
from notices_support import StandIns  # noqa: E402
from support import SubprocessServer, choice, interview, submit  # noqa: E402


def test_a_waiting_call_tells_the_desktop_and_a_page_view_in_chromium_stops_the_reminders(browser, tmp_path):
    notifiers = StandIns(tmp_path / "bin")
    env = {
        "ASK_USER_RICH_NOTIFY": "desktop",
        "ASK_USER_RICH_NOTIFY_AFTER": "3600",
        "PATH": notifiers.folder + os.pathsep + os.environ["PATH"],
        "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent",
        "LANG": "C.UTF-8",
    }
    project = tmp_path / "shop-api"
    project.mkdir()
    server = SubprocessServer(tmp_path / "logs", env=env, cwd=str(project))
    try:
        server.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                   "clientInfo": {"name": "claude-code", "version": "1"}})
        server.notify("notifications/initialized")
        spec = interview(choice("db", "pg", "my"), choice("cache", "yes", "no"), title="Pick a database",
                         delivery="link", language="de")
        awaiting = server.tool("ask_user_rich", spec)["result"]["structuredContent"]
        waiting = server.request("tools/call", {"name": "await_user_answers",
                                                "arguments": {"sessionId": awaiting["sessionId"]}})
        server.log.wait_for("wait-start")

        told = notifiers.wait_call()
        assert told["name"] == "notify-send"
        assert told["argv"][-2:] == ["Claude Code stellt Ihnen 2 Fragen", "Pick a database · shop-api"]
        assert "--action=default=Formular öffnen" in told["argv"] and "--action=open=Formular öffnen" in told["argv"]
        server.log.wait_for("notice-sent", "target=\"desktop (notify-send)\"")

        page = browser.new_page(viewport=DESKTOP)
        try:
            page.goto(awaiting["url"])
            page.get_by_text("Pick a database").first.wait_for()
            server.log.wait_for("notices-stopped", "why=viewed")
        finally:
            page.close()
        submit(awaiting["url"], {"db": {"selected": ["pg"]}, "cache": {"selected": ["no"]}})
        answers = server.response(waiting)["result"]["structuredContent"]
        assert answers["status"] == "submitted"
        assert server.log.count("notice") == 1 and len(notifiers.lines) == 1
    finally:
        server.close()
