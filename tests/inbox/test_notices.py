"""Telling the person that an agent is waiting (tests/README.md, "Notices"): when (the rules,
pure and then through the scheduler on a clock the test moves), what (the words, in the
interview's language), how (the desktop's notifiers as stand-ins on PATH, push targets on a
loopback server), and never in the way (hanging notifiers, shutdown)."""

from __future__ import annotations

import base64
import email.header
import io
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import xml.etree.ElementTree as ElementTree
from xml.sax.saxutils import escape

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from helpers.inbox_support import Agent, free_port
from helpers.notices_support import HOSTILE, Clock, PushServer, StandIns
from helpers.support import (WAIT, EventsReader, InProcessServer, LogWatch, SubprocessServer, api_url, askrich, choice,
                     http_request, interview, submit)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the stand-ins are POSIX scripts")

URL = "http://localhost:47615/s/TOKEN"


def need(**changes) -> dict:
    facts = {"since": 0.0, "opened": False, "sent": 0, "lastSent": None, "viewed": False, "pending": True}
    facts.update(changes)
    return facts


# -- when: the rules ------------------------------------------------------------------------


def test_a_form_no_browser_showed_is_told_at_once():
    assert askrich.plan_notice(need(since=100.0), 100.0, 20) == {"send": True, "sent": 1, "next": None}


def test_a_form_a_browser_showed_is_told_only_once_unviewed_for_the_delay():
    assert askrich.plan_notice(need(since=100.0, opened=True), 119.9, 20) == {"send": False, "sent": 0, "next": 120.0}
    assert askrich.plan_notice(need(since=100.0, opened=True), 120.0, 20)["send"] is True


def test_reminders_come_at_10_and_60_minutes_then_nothing_more():
    assert askrich.plan_notice(need(sent=1, lastSent=0.0), 1, 20)["next"] == 600
    assert askrich.plan_notice(need(sent=2, lastSent=600.0), 601, 20)["next"] == 3600
    assert askrich.plan_notice(need(sent=3, lastSent=3600.0), 3601, 20)["next"] is None


def test_a_view_or_a_settle_stops_every_notice():
    assert askrich.plan_notice(need(viewed=True), 0, 20) == {"send": False, "sent": 0, "next": None}
    assert askrich.plan_notice(need(pending=False, sent=1), 700, 20)["next"] is None


def test_never_two_notices_for_one_interview_within_a_minute():
    # Follow-ups 5 s after the last notice: due at once, sent a minute after that notice.
    assert askrich.plan_notice(need(since=25.0, lastSent=20.0), 25.0, 20)["next"] == 80.0


def test_a_machine_that_slept_past_both_reminders_gets_one_notice_for_them():
    assert askrich.plan_notice(need(sent=1, lastSent=20.0), 4000, 20) == {"send": True, "sent": 3, "next": None}


def test_a_delay_past_the_first_reminder_leaves_only_the_later_one():
    plan = askrich.plan_notice(need(opened=True, sent=1, lastSent=900.0), 901, 900)
    assert plan["next"] == 3600


@given(
    after=st.integers(0, 4000),
    opened=st.booleans(),
    viewed_at=st.one_of(st.none(), st.floats(0, 5000)),
    settled_at=st.one_of(st.none(), st.floats(0, 5000)),
    earlier=st.one_of(st.none(), st.floats(-200, 0)),
    steps=st.lists(st.floats(0.01, 900), min_size=1, max_size=40),
)
@example(after=20, opened=True, viewed_at=None, settled_at=None, earlier=None, steps=[20, 580, 3000])
def test_the_rules_hold_whenever_the_scheduler_looks(after, opened, viewed_at, settled_at, earlier, steps):
    """However often (or seldom) the scheduler wakes: at most three notices, a minute apart,
    none before the first is due, none once the form was viewed or the interview settled,
    and never a wake-up time in the past."""
    state = need(opened=opened, lastSent=earlier)
    now, sent_at = 0.0, []
    for step in steps:
        now += step
        facts = dict(state, viewed=viewed_at is not None and now >= viewed_at,
                     pending=settled_at is None or now < settled_at)
        plan = askrich.plan_notice(facts, now, after)
        if plan["send"]:
            sent_at.append(now)
            state.update(sent=plan["sent"], lastSent=now)
            assert not facts["viewed"] and facts["pending"]
        elif plan["next"] is not None:
            assert plan["next"] > now
    assert len(sent_at) <= 3
    times = ([earlier] if earlier is not None else []) + sent_at
    gaps = [later - sooner for sooner, later in zip(times, times[1:])]
    assert all(gap >= askrich.NOTICE_MIN_GAP for gap in gaps)
    if sent_at:
        assert sent_at[0] >= (after if opened else 0)


# -- what: the words ----------------------------------------------------------------------------


@pytest.mark.parametrize("tag, counts", [
    ("en", {1: "one", 2: "other", 0: "other"}),
    ("fr", {0: "one", 1: "one", 2: "other", 1000000: "many"}),
    ("pt-BR", {0: "one", 1: "one", 5: "other"}),
    ("es", {1: "one", 0: "other", 2000000: "many"}),
    ("ru", {1: "one", 21: "one", 11: "many", 3: "few", 24: "few", 14: "many", 5: "many"}),
    ("ar", {0: "zero", 1: "one", 2: "two", 3: "few", 102: "other", 110: "few", 111: "many", 12: "many"}),
    ("ja", {1: "other"}),
    ("de", {1: "one", 7: "other"}),
])
def test_plural_categories_are_the_ones_the_form_uses(tag, counts):
    assert {count: askrich.plural_category(tag, count) for count in counts} == counts


def test_the_language_is_matched_as_the_form_matches_it():
    assert askrich.match_language("pt") == "pt-BR"
    assert askrich.match_language("zh-Hant") == "zh-TW"
    assert askrich.match_language("ZH") == "zh-CN"
    assert askrich.notice_language(None, {"LANG": "de_DE.UTF-8"}) == "de"
    assert askrich.notice_language("ja", {"LANG": "de_DE.UTF-8"}) == "ja"
    assert askrich.notice_language("tlh", {}) == "en"


@pytest.mark.parametrize("language, agent, count, heading", [
    ("en", "Claude Code", 1, "Claude Code asks 1 question"),
    ("en", "Claude Code", 12, "Claude Code asks 12 questions"),
    ("en", None, 3, "An agent asks 3 questions"),
    ("de", "Codex", 1, "Codex stellt Ihnen 1 Frage"),
    ("ru", "Codex", 3, "Codex задаёт вам 3 вопроса"),
    ("ru", "Codex", 5, "Codex задаёт вам 5 вопросов"),
    ("ar", "Codex", 2, "يطرح عليك Codex سؤالين"),
    ("ja", "Codex", 4, "Codexから質問が4問届いています"),
    # Chinese spaces a Latin name from Han text, not its own word for the agent.
    ("zh-CN", "Claude Code", 3, "Claude Code 向你提出了 3 个问题"),
    ("zh-TW", None, 2, "AI 代理向您提出了 2 個問題"),
])
def test_the_heading_counts_the_questions_in_the_interviews_language(language, agent, count, heading):
    spec = {"title": "Plan", "questions": [{}] * count, "language": language}
    notice = askrich.compose_notice(spec, agent, "/home/dev/shop-api", URL, {})
    assert notice["heading"] == heading
    assert notice["body"] == "Plan · shop-api"


def test_the_body_is_the_title_and_the_folder_on_one_line():
    spec = {"title": "A\nlong\r\n\ttitle", "questions": [{}], "language": None}
    assert askrich.compose_notice(spec, "X", "/w/proj/", URL, {})["body"] == "A long title · proj"
    assert askrich.compose_notice(spec, "X", "", URL, {})["body"] == "A long title"


@given(st.text())
@example("\x00 nul \x1b[31m red \ud800 lone")
@example("invoice\u202efdp.exe \u2066isolated\u2069 \u200f")
def test_any_title_becomes_one_line_every_notifier_can_carry(title):
    notice = askrich.compose_notice({"title": title, "questions": [{}], "language": "en"}, "A", "", URL, {})
    body = notice["body"]
    assert "\n" not in body and len(body) <= askrich.NOTICE_TEXT_CHARS
    body.encode("utf-8")  # no lone surrogate
    assert not any(ord(ch) < 32 or ord(ch) == 127 for ch in body)
    # No direction control turns the notice's text around (U+202E reads "fdp.exe" as "exe.pdf").
    assert not set(body) & set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
    script, toast = toast_of(askrich.toast_command("powershell.exe", notice).argv[1:])
    assert [node.text or "" for node in toast.iter("text")] == [notice["heading"], body]


@given(st.text())
def test_an_ntfy_title_header_is_ascii_and_decodes_to_the_title(text):
    value = askrich.header_text(text)
    assert value.isascii() and "\r" not in value and "\n" not in value
    line = " ".join(text.split())
    if line.isascii():
        assert value == line  # as it is, whatever it holds
    else:
        assert "".join(part.decode(charset) for part, charset in email.header.decode_header(value)) == line


# -- how: the desktop's notifiers, as stand-ins on PATH --------------------------------------


@pytest.fixture
def stand_ins(tmp_path):
    notifiers = StandIns(tmp_path / "bin")
    yield notifiers


def hostile_notice(text: str) -> dict:
    spec = {"title": text, "questions": [{}, {}], "language": "en"}
    return askrich.compose_notice(spec, text[:30], "/w/" + text.replace("/", "_")[:20], URL + "?" + text[:5], {})


def facts_for(platform: str, stand_ins, **changes) -> dict:
    """This machine's desktop facts with the stand-ins as the only programs on PATH, as
    `platform` would have them."""
    facts = askrich.desktop_facts({"PATH": stand_ins.folder, "XDG_RUNTIME_DIR": stand_ins.folder})
    assert facts["installed"] == {name: stand_ins.path(name) for name in ("notify-send", "osascript", "powershell.exe")}
    facts.update({"platform": platform, "wsl": False, "interop": None, "session_bus": False,
                  "notify_send_actions": False, "windows_root": None})
    facts.update(changes)
    return facts


def run(facts: dict, notice: dict, clicked=None) -> str:
    target = askrich.DesktopTarget(facts, clicked or (lambda url: None))
    try:
        return target.send(notice)
    finally:
        target.close()


@pytest.mark.parametrize("text", HOSTILE)
def test_linux_runs_notify_send_with_each_text_one_argument_and_the_body_escaped(stand_ins, text):
    env = {"PATH": stand_ins.folder, "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"}
    facts = askrich.desktop_facts(env)
    assert facts["session_bus"] and facts["notify_send_actions"]
    notice = hostile_notice(text)
    run(dict(facts, platform="linux", wsl=False, interop=None), notice)
    call = stand_ins.wait_call()
    assert call["name"] == "notify-send"
    assert call["argv"] == ["--app-name=ask-user-rich", "--urgency=normal", "--action=default=Open the form",
                            "--action=open=Open the form", "--", notice["heading"], escape(notice["body"])]
    assert "\n" not in notice["heading"] + notice["body"]


@pytest.mark.parametrize("text", HOSTILE)
def test_macos_passes_the_texts_to_a_fixed_applescript_as_arguments(stand_ins, text):
    notice = hostile_notice(text)
    run(facts_for("darwin", stand_ins), notice)
    call = stand_ins.wait_call()
    assert call["name"] == "osascript"
    assert call["argv"] == ["-e", "on run argv",
                            "-e", "display notification (item 3 of argv) with title (item 2 of argv)",
                            "-e", "end run", "ask-user-rich", notice["heading"], notice["body"]]


def toast_of(argv: list):
    """(the PowerShell script, the toast's XML root) from a powershell.exe argv."""
    assert argv[:3] == ["-NoProfile", "-NonInteractive", "-EncodedCommand"] and len(argv) == 4
    script = base64.b64decode(argv[3]).decode("utf-16-le")
    encoded = re.findall(r"FromBase64String\('([A-Za-z0-9+/=]+)'\)", script)
    assert len(encoded) == 1
    return script, ElementTree.fromstring(base64.b64decode(encoded[0]).decode("utf-8"))


@pytest.mark.parametrize("platform, changes", [
    ("win32", {}),
    ("linux", {"wsl": True, "interop": True}),
])
@pytest.mark.parametrize("text", HOSTILE)
def test_windows_and_wsl_show_a_toast_whose_texts_powershell_never_reads(stand_ins, platform, changes, text):
    notice = hostile_notice(text)
    run(facts_for(platform, stand_ins, **changes), notice)
    call = stand_ins.wait_call()
    assert call["name"] == "powershell.exe"
    script, toast = toast_of(call["argv"])
    for piece in (text, notice["heading"], notice["body"]):
        assert piece not in script
    assert [node.text for node in toast.iter("text")] == [notice["heading"], notice["body"]]
    assert toast.get("launch") == notice["url"]
    action = toast.find("actions/action")
    assert action.get("arguments") == notice["url"] and action.get("content") == "Open the form"
    assert "Windows.UI.Notifications" in script


def test_from_wsl_the_toast_runs_in_a_windows_folder(stand_ins):
    facts = facts_for("linux", stand_ins, wsl=True, interop=True, windows_root="/mnt/c")
    command, _ = askrich.plan_desktop_notice(facts, hostile_notice("x"))
    assert command.cwd == "/mnt/c" and command.argv[0] == stand_ins.path("powershell.exe")


def test_each_platform_without_its_notifier_says_what_is_missing(stand_ins):
    nothing = {"notify-send": None, "osascript": None, "powershell.exe": None}
    notice = hostile_notice("x")
    assert askrich.plan_desktop_notice(facts_for("linux", stand_ins, installed=nothing), notice)[1].startswith(
        "notify-send is not installed")
    assert "session bus" in askrich.plan_desktop_notice(facts_for("linux", stand_ins), notice)[1]
    assert askrich.plan_desktop_notice(facts_for("darwin", stand_ins, installed=nothing), notice)[1] == (
        "osascript is not installed")
    # WSL without interop is Linux: notify-send when WSLg gives it a bus.
    plan, _ = askrich.plan_desktop_notice(facts_for("linux", stand_ins, wsl=True, interop=False, session_bus=True), notice)
    assert plan.name == "notify-send"


def test_clicking_the_notices_action_opens_the_form(stand_ins):
    clicker = StandIns(stand_ins.folder + "-click", click=True)
    opened = []
    facts = facts_for("linux", clicker, session_bus=True, notify_send_actions=True)
    run(facts, hostile_notice("x"), clicked=opened.append)
    assert opened == [URL + "?x"]


@pytest.fixture
def desktop_session(tmp_path, monkeypatch):
    """A real desktop for notices: Xvfb, a session bus of our own, and dunst; every program
    ended by its pid at teardown."""
    needed = ("Xvfb", "dbus-daemon", "dunst", "dunstctl", "notify-send")
    missing = [name for name in needed if shutil.which(name) is None]
    if missing:
        if os.environ.get("ASK_USER_RICH_TESTS_REQUIRE_DESKTOP") == "1":
            pytest.fail("missing %s" % ", ".join(missing))
        pytest.skip("a real desktop needs %s (apt-get install xvfb dbus-daemon dunst libnotify-bin)" % ", ".join(missing))
    started = []
    read, write = os.pipe()
    try:
        started.append(subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "640x200x24"],
                                        pass_fds=(write,), stderr=subprocess.DEVNULL))
        os.close(write)
        with os.fdopen(read) as ready:  # Xvfb writes its display number once it serves
            display = ":" + ready.readline().strip()
        bus = subprocess.run(["dbus-daemon", "--session", "--fork", "--print-address=1", "--print-pid=1"],
                             stdout=subprocess.PIPE, check=True, timeout=WAIT).stdout.decode().split()
        started.append(int(bus[1]))
        monkeypatch.setenv("DISPLAY", display)
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", bus[0])
        started.append(subprocess.Popen(["dunst"], stderr=subprocess.DEVNULL))
        wait_for_command(["dunstctl", "is-paused"], lambda out: out.strip() == "false")
        yield dict(os.environ)
    finally:
        for process in reversed(started):
            if isinstance(process, int):
                os.kill(process, signal.SIGTERM)
            else:
                process.kill()
                process.wait()


def wait_for_command(argv: list, done) -> None:
    """Run `argv` until `done(its output)`: the one thing dunst offers to wait on."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        finished = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if finished.returncode == 0 and done(finished.stdout.decode()):
            return
    raise AssertionError("%s never said so" % " ".join(argv))


def test_a_real_notification_daemon_shows_the_notice_and_a_click_opens_the_form(desktop_session, monkeypatch):
    monkeypatch.setattr(askrich, "NOTICE_LIMIT_SECONDS", 0.5)
    facts = askrich.desktop_facts(desktop_session)
    assert facts["session_bus"] and facts["notify_send_actions"]  # the real notify-send says so
    opened, clicked = [], threading.Event()
    target = askrich.DesktopTarget(facts, lambda url: (opened.append(url), clicked.set()))
    try:
        notice = hostile_notice(HOSTILE[1])
        assert target.send(notice) == "shown by notify-send, its action opens the form"
        wait_for_command(["dunstctl", "count", "displayed"], lambda out: out.strip() == "1")
        subprocess.run(["dunstctl", "action", "0"], check=True)  # a click on the notice
        assert clicked.wait(WAIT)
        assert opened == [notice["url"]]
    finally:
        target.close()


def test_a_notifier_that_waits_for_a_click_is_left_running_and_killed_at_close(stand_ins, monkeypatch):
    monkeypatch.setattr(askrich, "NOTICE_LIMIT_SECONDS", 0.2)
    hanging = StandIns(stand_ins.folder + "-hang", hang=True)
    target = askrich.DesktopTarget(facts_for("linux", hanging, session_bus=True, notify_send_actions=True),
                                   lambda url: None)
    assert target.send(hostile_notice("x")) == "shown by notify-send, its action opens the form"
    [process] = target.running
    target.close()
    assert process.wait(WAIT) != 0  # killed


def test_a_notifier_that_hangs_without_an_action_fails_at_its_limit(stand_ins, monkeypatch):
    monkeypatch.setattr(askrich, "NOTICE_LIMIT_SECONDS", 0.2)
    hanging = StandIns(stand_ins.folder + "-hang", hang=True)
    with pytest.raises(askrich.NoticeFailed, match="did not finish within 0.2s"):
        run(facts_for("darwin", hanging), hostile_notice("x"))


# -- how: push, to a loopback server speaking ntfy's publish API and the webhooks' ----------


def push_config(url: str, **changes) -> askrich.Config:
    settings = {"notify": "push", "push_url": url, "push_token": "tk_secret_token_123",
                "public_url": "https://box.example.net"}
    settings.update(changes)
    return askrich.Config(**settings)


def public_notice(heading_text="Claude Code", title="Plan «v2» — ü") -> dict:
    spec = {"title": title, "questions": [{}, {}, {}], "language": "en"}
    return askrich.compose_notice(spec, heading_text, "/w/shop", "https://box.example.net/s/TOKEN", {})


def test_ntfy_gets_the_message_and_its_headers_with_the_link_through_the_public_url():
    with PushServer() as server:
        notice = public_notice("Кодекс")
        said = askrich.PushTarget(push_config("ntfy+" + server.url("/agents"))).send(notice)
        request = server.wait_request()
    assert said == "pushed (200)"
    headers = request["headers"]
    assert request["path"] == "/agents"
    assert request["body"].decode("utf-8") == notice["body"]
    title = "".join(part.decode(charset or "ascii") if isinstance(part, bytes) else part
                    for part, charset in email.header.decode_header(headers["Title"]))
    assert title == notice["heading"] == "Кодекс asks 3 questions"
    assert headers["Tags"] == "question" and headers["Priority"] == "high"
    assert headers["Click"] == "https://box.example.net/s/TOKEN"
    assert headers["Authorization"] == "Bearer tk_secret_token_123"


@pytest.mark.parametrize("changes, why", [
    ({"public_url": None}, "a localhost link opens nothing on a phone"),
    ({"push_link": False}, "the person turned the link off"),
])
def test_ntfy_gets_no_link_without_a_public_url_or_with_the_link_off(changes, why):
    with PushServer() as server:
        said = askrich.PushTarget(push_config("ntfy+" + server.url(), **changes)).send(public_notice())
        headers = server.wait_request()["headers"]
    assert "Click" not in headers, why
    assert said == "pushed (200) without the link"


def test_any_other_url_gets_the_notice_as_json():
    with PushServer() as server:
        askrich.PushTarget(push_config(server.url("/hook"), push_token=None)).send(public_notice())
        request = server.wait_request()
    assert "Authorization" not in request["headers"]
    assert json.loads(request["body"]) == {
        "title": "Claude Code asks 3 questions", "message": "Plan «v2» — ü · shop",
        "url": "https://box.example.net/s/TOKEN", "agent": "Claude Code", "project": "/w/shop", "questions": 3,
    }


@pytest.mark.parametrize("hosts, field", [("SLACK_HOSTS", "text"), ("DISCORD_HOSTS", "content")])
def test_slack_and_discord_get_their_own_shapes_and_no_markup_from_a_title(monkeypatch, hosts, field):
    monkeypatch.setattr(askrich, hosts, frozenset({"127.0.0.1"}))  # the webhook, here on loopback
    with PushServer() as server:
        notice = public_notice(title="<!channel> @everyone <https://evil|click> & more")
        askrich.PushTarget(push_config(server.url("/services/T/B/X"))).send(notice)
        request = server.wait_request()
    payload = json.loads(request["body"])
    assert "Authorization" not in request["headers"]  # the webhook's URL is its key
    lines = payload[field].split("\n")
    assert lines[-1] == "https://box.example.net/s/TOKEN"
    if field == "text":
        assert lines[1] == "&lt;!channel&gt; @everyone &lt;https://evil|click&gt; &amp; more · shop"
    else:
        assert lines[1] == notice["body"] and payload["allowed_mentions"] == {"parse": []}


def test_the_push_kind_is_read_from_the_url():
    kind = askrich.push_target_kind
    assert kind("https://ntfy.sh/my-topic") == "ntfy"
    assert kind("https://ntfy.example.org/t") == "ntfy"
    assert kind("ntfy+http://10.0.0.2:8080/t") == "ntfy"
    assert kind("https://hooks.slack.com/services/T/B/X") == "slack"
    assert kind("https://discord.com/api/webhooks/1/abc") == "discord"
    assert kind("https://example.com/hook") == "json"
    assert kind("ftp://example.com/x") is None and kind("ntfy.sh/topic") is None
    config, warnings = askrich.Config.from_env({askrich.ENV_PUSH_URL: "ntfy.sh/topic", askrich.ENV_NOTIFY: "loud",
                                                askrich.ENV_NOTIFY_AFTER: "soon", askrich.ENV_PUSH_LINK: "yes"})
    assert (config.push_url, config.notify, config.notify_after, config.push_link) == (None, "desktop", 20, True)
    assert len(warnings) == 4


@pytest.mark.parametrize("mode, reason", [
    ("refuse", "the push target answered 403 Forbidden"),
    ("hang", "the push target could not be reached (timed out)"),
    ("closed", "the push target could not be reached ([Errno 111] Connection refused)"),
])
def test_a_failing_push_is_logged_once_with_its_reason_and_never_its_keys(tmp_path, monkeypatch, mode, reason):
    monkeypatch.setattr(askrich, "NOTICE_LIMIT_SECONDS", 0.5)
    server = PushServer("ok" if mode == "closed" else mode)
    url = server.url("/tk_secret_token_123-topic")
    if mode == "closed":
        server.close()
    watch = LogWatch()
    log = askrich.Log(str(tmp_path), stream=watch)
    config = push_config("ntfy+" + url)
    try:
        askrich.send_to_all([askrich.PushTarget(config)], public_notice(), log, "abc")
        line = watch.wait_for("notify-failed")
    finally:
        server.close()
    assert reason in line and "interview=abc" in line
    assert "tk_secret_token_123" not in watch.getvalue() + (tmp_path / "server.log").read_text()
    assert "target=\"push (ntfy, 127.0.0.1:%d)\"" % server.port in line
    assert watch.count("notify-failed") == 1
    assert "tk_secret_token_123" not in repr(config)


@pytest.mark.parametrize("door", [True, False])
def test_a_waiting_form_is_pushed_with_its_public_link_only_while_the_front_door_serves_it(tmp_path, door):
    public = "https://devbox.example-tailnet.ts.net"
    with PushServer() as server:
        config = askrich.Config(log_dir=str(tmp_path / "logs"), open_browser=False, notify="push",
                                push_url="ntfy+" + server.url(), public_url=public,
                                inbox_port=free_port() if door else 0)
        runtime = askrich.Runtime(config, askrich.Log(config.log_dir, stream=LogWatch()))
        try:
            form = runtime.open_interview(interview(choice("q", "a")))
            shown = runtime.form_url(form)
            runtime.notices.arm(form, opened=False)
            headers = server.wait_request()["headers"]
        finally:
            runtime.close()
    if door:
        assert headers["Click"] == shown == "%s/s/%s" % (public, form.token)
    else:  # no door (off, or its port taken): the form's own localhost address, not pushed
        assert "Click" not in headers and shown == runtime.own_url(form)


# -- the scheduler, on a clock the test moves ----------------------------------------------


class Scene:
    """A runtime whose notices run on a test clock, with the stand-ins as the desktop."""

    def __init__(self, tmp_path, stand_ins, **settings) -> None:
        self.watch = LogWatch()
        config = askrich.Config(log_dir=str(tmp_path / "logs"), open_browser=False, notify="desktop",
                                notify_after=20, **settings)
        self.runtime = askrich.Runtime(config, askrich.Log(config.log_dir, stream=self.watch))
        self.clock = Clock()
        self.notices = askrich.Notices(config, self.runtime.log, "/w/shop", clock=self.clock, form_url=self.runtime.form_url,
                                       facts=facts_for("linux", stand_ins, session_bus=True))
        self.runtime.notices = self.notices
        self.stand_ins = stand_ins

    def at(self, when: float) -> None:
        self.clock.at(when)

    def notices_sent(self) -> int:
        return self.watch.count("notice")

    def follow_ups_on_a_hidden_form(self, form, landed: float, due: float) -> None:
        """The person turns away; follow-ups land at `landed`: no notice before `due`, one then."""
        report(self.runtime.form_url(form), visibility="hidden", focus=False)
        self.at(landed)
        sent = self.notices_sent()
        self.runtime.append_questions(form.id, [choice("q%d" % landed, "x")])
        self.at(due - 1)
        assert self.notices_sent() == sent
        self.at(due)
        self.watch.wait_for("notice", "reason=follow-ups")


def report(url, page="tab-1", visibility="visible", focus=True):
    """What the page of the form at `url` says of itself (assets/js/visibility.js)."""
    answer = http_request(api_url(url, "visibility"), "POST",
                          {"page": page, "visibility": visibility, "focus": focus})
    assert answer.status == 204, answer.body


@pytest.fixture
def scene(tmp_path, stand_ins):
    made = Scene(tmp_path, stand_ins)
    yield made
    made.runtime.close()


def test_a_link_is_told_at_once_then_the_form_in_view_stops_the_reminders(scene):
    form = scene.runtime.open_interview(interview(choice("q", "a"), title="Plan"))
    scene.notices.arm(form, opened=False)
    call = scene.stand_ins.wait_call()
    assert call["argv"][-2:] == ["An agent asks 1 question", "Plan · shop"]
    scene.watch.wait_for("notice-sent", "interview=%s" % form.id)
    report(scene.runtime.form_url(form))  # the person looks at the form
    scene.watch.wait_for("notices-stopped", "interview=%s" % form.id, "why=viewed")
    scene.at(1000 + 600)
    scene.at(1000 + 3600)
    assert scene.notices_sent() == 1 and len(scene.stand_ins.lines) == 1


def test_a_page_loaded_in_the_background_is_not_seen_and_the_reminders_go_on(scene):
    form = scene.runtime.open_interview(interview(choice("q", "a")))
    scene.notices.arm(form, opened=True)  # the opener opened a tab: where, nobody knows
    assert http_request(scene.runtime.form_url(form)).status == 200  # it loaded the page
    report(scene.runtime.form_url(form), visibility="hidden", focus=False)  # in a background tab
    report(scene.runtime.form_url(form), page="tab-2", visibility="visible", focus=False)  # behind other windows
    scene.at(1020)
    scene.watch.wait_for("notice", "number=1")
    scene.at(1600)
    scene.watch.wait_for("notice", "number=2")
    report(scene.runtime.form_url(form), page="tab-2")  # the person brings it to the front
    scene.watch.wait_for("notices-stopped", "why=viewed")
    scene.at(4600)
    assert scene.notices_sent() == 2
    assert scene.watch.count("page-visibility", "sighting=yes") == 1
    assert scene.watch.count("page-visibility", "page=tab-2", "sighting=yes") == 1


def test_an_opened_form_is_told_after_the_delay_and_reminded_while_nobody_looks(scene):
    form = scene.runtime.open_interview(interview(choice("q", "a")))
    scene.notices.arm(form, opened=True)
    scene.at(1019)
    assert scene.notices_sent() == 0
    scene.at(1020)
    scene.watch.wait_for("notice", "number=1")
    scene.at(1599)
    assert scene.notices_sent() == 1
    scene.at(1600)
    scene.watch.wait_for("notice", "number=2")
    scene.at(4600)
    scene.watch.wait_for("notice", "number=3")
    scene.at(99999)
    assert scene.notices_sent() == 3
    assert scene.stand_ins.wait_call(3)["name"] == "notify-send"


def test_a_settled_interview_gets_no_notice(scene):
    form = scene.runtime.open_interview(interview(choice("q", "a")))
    scene.notices.arm(form, opened=True)
    submit(scene.runtime.form_url(form), {"q": {"selected": ["a"]}})
    scene.watch.wait_for("notices-stopped", "why=settled")
    scene.at(5000)
    assert scene.notices_sent() == 0


def test_follow_ups_on_a_hidden_form_are_told_a_minute_after_the_last_notice_until_it_comes_into_view(scene):
    form = scene.runtime.open_interview(interview(choice("q", "a")))
    scene.notices.arm(form, opened=False)
    scene.watch.wait_for("notice", "reason=waiting")
    report(scene.runtime.form_url(form))
    scene.watch.wait_for("notices-stopped", "why=viewed")
    scene.follow_ups_on_a_hidden_form(form, landed=1030, due=1060)  # a minute after the last notice
    report(scene.runtime.form_url(form))  # seen
    scene.watch.wait_for("notices-stopped", "why=viewed", nth=2)
    scene.at(99999)
    assert scene.notices_sent() == 2


def test_follow_ups_on_a_form_in_view_now_are_seen_and_told_to_nobody(scene):
    form = scene.runtime.open_interview(interview(choice("q", "a")))
    stream = EventsReader(api_url(scene.runtime.form_url(form), "events"), "state")
    try:
        stream.wait_for(lambda state: True)  # the page is open
        report(scene.runtime.form_url(form))
        scene.runtime.append_questions(form.id, [choice("more", "x")])
        scene.watch.wait_for("notices-armed", "reason=follow-ups")
        scene.watch.wait_for("notices-stopped", "why=viewed")
        scene.follow_ups_on_a_hidden_form(form, landed=1100, due=1120)  # a form is open: after the delay
    finally:
        stream.close()


def test_a_page_said_in_view_counts_as_in_view_only_while_an_event_stream_is_open(scene):
    """A browser that crashed sends no last report, but its stream closes."""
    form = scene.runtime.open_interview(interview(choice("q", "a")))
    before = form.attention()
    report(scene.runtime.form_url(form))
    assert form.attention() == dict(before, sightings=before["sightings"] + 1, inView=False)
    stream = EventsReader(api_url(scene.runtime.form_url(form), "events"), "state")
    try:
        stream.wait_for(lambda state: True)
        assert form.attention()["inView"] is True
        report(scene.runtime.form_url(form), visibility="visible", focus=False)
        assert form.attention()["inView"] is False
    finally:
        stream.close()


def test_a_form_shown_in_the_host_waits_unviewed_and_the_apps_load_is_its_page_view(scene):
    server = InProcessServer(scene.runtime)
    try:
        server.initialize(capabilities={"extensions": {"io.modelcontextprotocol/ui": {
            "mimeTypes": ["text/html;profile=mcp-app"]}}})
        result = server.tool("ask_user_rich", interview(choice("q", "a")))["result"]
        shown, app = result["structuredContent"], result["_meta"]["ask-user-rich/app"]
        assert shown["reason"] == "Shown in the conversation."
        scene.watch.wait_for("notices-armed", "interview=%s" % shown["sessionId"], "first_in=20")
        scene.at(1019)
        server.tool("form_state", {"sessionId": app["sessionId"], "token": app["token"], "appKey": app["key"],
                                   "full": True})
        scene.watch.wait_for("notices-stopped", "why=viewed")
        scene.watch.wait_for("page-view", "user_agent=\"app in Tests\"")
        scene.at(1020)
        assert scene.notices_sent() == 0
    finally:
        server.close()


def test_a_second_call_on_the_same_interview_arms_nothing_new(scene):
    form = scene.runtime.open_interview(interview(choice("q", "a")))
    scene.notices.arm(form, opened=True)
    scene.notices.arm(form, opened=False)
    scene.at(1001)
    assert scene.notices_sent() == 0
    assert scene.watch.count("notices-armed") == 1


def test_notices_off_start_no_thread(tmp_path):
    config = askrich.Config(log_dir=str(tmp_path / "logs"), open_browser=False)
    watch = LogWatch()
    runtime = askrich.Runtime(config, askrich.Log(config.log_dir, stream=watch))
    try:
        runtime.notices.arm(runtime.open_interview(interview()), opened=False)
        assert watch.count("notices-armed") == 0
        assert "ask-user-rich-notices" not in [thread.name for thread in threading.enumerate()]
    finally:
        runtime.close()


# -- never in the way ----------------------------------------------------------------------


def test_shutdown_returns_while_a_notifier_and_a_push_target_hang(tmp_path, monkeypatch):
    hanging = StandIns(tmp_path / "hang", hang=True)
    with PushServer("hang") as server:
        config = askrich.Config(log_dir=str(tmp_path / "logs"), open_browser=False, notify="both",
                                push_url=server.url())
        watch = LogWatch()
        runtime = askrich.Runtime(config, askrich.Log(config.log_dir, stream=watch))
        runtime.notices = askrich.Notices(config, runtime.log, "/w", facts=facts_for("darwin", hanging),
                                          form_url=runtime.form_url)
        form = runtime.open_interview(interview())
        runtime.notices.arm(form, opened=False)
        hanging.wait_call()
        server.wait_request()
        runtime.close()  # returns with both still hanging: nothing joins them
        assert not server.release.is_set() and watch.count("notice-sent", "notify-failed") == 0


# -- the command line ----------------------------------------------------------------------


def test_notify_test_sends_to_every_target_and_says_how_each_went(tmp_path, stand_ins):
    env = {"PATH": stand_ins.folder, "DBUS_SESSION_BUS_ADDRESS": "unix:path=/x", "LANG": "fr_FR.UTF-8",
           askrich.ENV_LOG_DIR: str(tmp_path / "logs"), askrich.ENV_NOTIFY: "both"}
    with PushServer() as server:
        out = io.StringIO()
        code = askrich.run_notify_test(dict(env, **{askrich.ENV_PUSH_URL: "ntfy+" + server.url()}), out)
        pushed = server.wait_request()
    assert code == 0, out.getvalue()
    assert "ok    desktop (notify-send): shown by notify-send" in out.getvalue()
    assert "ok    push (ntfy, 127.0.0.1:%d): pushed (200) without the link" % server.port in out.getvalue()
    call = stand_ins.wait_call()
    assert call["argv"][-2] == "Ask User Rich vous pose 1 question"
    assert call["argv"][-1].startswith("Notification de test")
    assert pushed["body"].decode("utf-8").startswith("Notification de test")

    out = io.StringIO()
    refused = dict(env, **{askrich.ENV_PUSH_URL: "http://127.0.0.1:9/x"})
    assert askrich.run_notify_test(refused, out) == 1
    assert "FAIL  push (json, 127.0.0.1:9): the push target could not be reached" in out.getvalue()
    doctor = io.StringIO()
    askrich.run_doctor(refused, out=doctor)
    text = doctor.getvalue()
    assert "  send  desktop (notify-send)" in text
    assert "  send  push (json, 127.0.0.1:9), without the form's link (no ASK_USER_RICH_PUBLIC_URL" in text
    assert "  last failure of push (json, 127.0.0.1:9): " in text and "Connection refused" in text


def test_notify_test_without_a_target_says_how_to_set_one(tmp_path):
    out = io.StringIO()
    env = {"PATH": "", askrich.ENV_LOG_DIR: str(tmp_path), askrich.ENV_NOTIFY: "push"}
    assert askrich.run_notify_test(env, out) == 1
    assert "skip  push: ASK_USER_RICH_PUSH_URL is not set" in out.getvalue()


# -- end to end: the server over stdio, a call waiting after a link --------------------------


def test_a_real_server_tells_the_person_of_a_link_and_the_form_in_view_stops_it(tmp_path, stand_ins):
    env = {"ASK_USER_RICH_NOTIFY": "desktop", "PATH": stand_ins.folder + os.pathsep + os.environ["PATH"],
           "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent", "ASK_USER_RICH_NOTIFY_AFTER": "3600"}
    server = SubprocessServer(tmp_path / "logs", env=env, cwd=str(tmp_path))
    try:
        server.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                   "clientInfo": {"name": "claude-code", "version": "1"}})
        server.notify("notifications/initialized")
        reply = server.tool("ask_user_rich", interview(choice("db", "pg", "my"), title="Pick a database",
                                                        delivery="link"))
        url = reply["result"]["structuredContent"]["url"]
        call = stand_ins.wait_call()
        assert call["argv"][-2:] == ["Claude Code asks 1 question", "Pick a database · %s" % tmp_path.name]
        server.log.wait_for("notice-sent", "target=\"desktop (notify-send)\"")
        assert http_request(url).status == 200
        seen = {"page": "p", "visibility": "visible", "focus": True}
        assert http_request(api_url(url, "visibility"), "POST", seen).status == 204
        server.log.wait_for("notices-stopped", "why=viewed")
        # The sighting stops the notices before its own line is logged: both lines, in either order.
        server.log.wait_for("page-visibility", "sighting=yes")
        assert server.log.count("page-view") == 1 and server.log.count("page-visibility", "sighting=yes") == 1
    finally:
        server.close()


def test_a_form_seen_through_the_front_door_stops_the_notices_of_the_process_that_owns_it(tmp_path, stand_ins):
    port, logs, watch = free_port(), tmp_path / "logs", LogWatch()
    holder = askrich.Runtime(askrich.Config(log_dir=str(logs), open_browser=False, inbox_port=port),
                             askrich.Log(str(logs), stream=watch))
    holder.open_interview(interview(choice("q", "a")))  # pending: this process holds the door
    watch.wait_for("inbox-holding")
    env = {"ASK_USER_RICH_NOTIFY": "desktop", "PATH": stand_ins.folder + os.pathsep + os.environ["PATH"],
           "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent", "ASK_USER_RICH_NOTIFY_AFTER": "3600"}
    agent = Agent(logs, port, "codex", tmp_path / "shop", "Plan", env=env)  # no browser opens: told at once
    try:
        assert agent.url.startswith("http://localhost:%d/s/" % port)
        assert stand_ins.wait_call()["argv"][-1] == "Plan · shop"
        report(agent.url)
        agent.server.log.wait_for("page-visibility", "sighting=yes")
        agent.server.log.wait_for("notices-stopped", "interview=%s" % agent.session, "why=viewed")
    finally:
        agent.close()
        holder.close()

