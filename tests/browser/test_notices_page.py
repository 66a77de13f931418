"""Notices end to end (tests/README.md, "Notices"): the server as an MCP client starts it, a call
waiting after `delivery: "link"`, the desktop's notifier (a stand-in on PATH) told at once, and
the person's look at the form in Chromium ending the reminders while the call keeps waiting for
the answers; and a form Chromium loaded in a background tab, which is not a look."""
from __future__ import annotations

import os

from formkit import DESKTOP, askrich  # noqa: E402
from helpers.notices_support import Clock, StandIns  # noqa: E402
from helpers.support import LogWatch, SubprocessServer, choice, interview, submit  # noqa: E402


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


def test_a_form_in_a_background_tab_is_not_seen_until_brought_to_the_front_and_follow_ups_follow_the_focus(
        browser, tmp_path):
    notifiers = StandIns(tmp_path / "bin")
    watch = LogWatch()
    config = askrich.Config(log_dir=str(tmp_path / "logs"), open_browser=False, notify="desktop", notify_after=20)
    runtime = askrich.Runtime(config, askrich.Log(config.log_dir, stream=watch))
    clock = Clock()
    facts = {"platform": "linux", "wsl": False, "interop": None, "session_bus": True, "notify_send_actions": False,
             "installed": {"notify-send": notifiers.path("notify-send"), "osascript": None, "powershell.exe": None}}
    runtime.notices = askrich.Notices(config, runtime.log, "/w/shop", clock=clock, facts=facts,
                                     form_url=runtime.form_url)
    cdp = browser.new_browser_cdp_session()
    tab = None
    try:
        form = runtime.open_interview(interview(choice("db", "pg", "my"), title="Pick a database"))
        runtime.notices.arm(form, opened=True)  # as after the opener
        # The opener's tab, opened in the background. Made through the browser's own protocol in
        # its default context, where Playwright does not tell the page it has the focus (as it
        # does for the pages it drives): the page learns the truth.
        tab = cdp.send("Target.createTarget", {"url": runtime.form_url(form), "background": True})["targetId"]
        watch.wait_for("page-visibility", "interview=%s" % form.id, "in_view=no")  # loaded, unseen

        clock.at(1020)  # unseen for the delay: told
        assert notifiers.wait_call()["argv"][-1] == "Pick a database · shop"
        watch.wait_for("notice-sent", "interview=%s" % form.id)

        cdp.send("Target.activateTarget", {"targetId": tab})  # the person brings it to the front
        watch.wait_for("page-visibility", "in_view=yes", "sighting=yes")
        watch.wait_for("notices-stopped", "why=viewed")
        clock.at(1600)
        assert watch.count("notice") == 1 and len(notifiers.lines) == 1

        # Follow-ups while the person looks at it: seen, no notice.
        runtime.append_questions(form.id, [choice("cache", "yes", "no")])
        watch.wait_for("notices-stopped", "why=viewed", nth=2)
        # The person goes back to other work in another tab; more follow-ups are told of.
        other = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        watch.wait_for("page-visibility", "interview=%s" % form.id, "in_view=no", nth=2)
        clock.at(1700)
        runtime.append_questions(form.id, [choice("queue", "yes", "no")])
        clock.at(1719)
        assert watch.count("notice") == 1
        clock.at(1720)
        watch.wait_for("notice", "reason=follow-ups")
        assert notifiers.wait_call(2)["argv"][-1] == "Pick a database · shop"
        cdp.send("Target.closeTarget", {"targetId": other})
        cdp.send("Target.activateTarget", {"targetId": tab})
        watch.wait_for("notices-stopped", "why=viewed", nth=3)
        clock.at(4600)
        assert watch.count("notice") == 2 and watch.count("page-visibility", "sighting=yes") == 2
    finally:
        if tab is not None:
            cdp.send("Target.closeTarget", {"targetId": tab})
        cdp.detach()
        runtime.close()
