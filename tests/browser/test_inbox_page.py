"""The inbox page in Chromium (tests/README.md, "The inbox"): rows appearing and leaving live in English,
Japanese and Arabic, the tab's count, the calm empty state, notifications once allowed, axe in
light and dark, a 360 px phone, the keyboard; and the form's "more waiting" link to it."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
from playwright.sync_api import expect

from axe_playwright_python.sync_playwright import Axe  # noqa: E402
from formkit import DESKTOP, PHONE, WATCH_CSP, isolated  # noqa: E402
from helpers.inbox_support import free_port, read_key  # noqa: E402
from helpers.support import WAIT, form_strings, submit, wait_for_result, watched_runtime  # noqa: E402

AXE = Axe()

# Notifications, recorded instead of shown: the permission the user gave, and each one made.
FAKE_NOTIFICATIONS = """
window.__notes = [];
window.__asked = 0;
window.Notification = class {
  static permission = %s;
  static async requestPermission() { window.__asked += 1; window.Notification.permission = 'granted'; return 'granted'; }
  constructor(title, options) { window.__notes.push({title, body: options.body, tag: options.tag}); }
  addEventListener() {}
  close() {}
};
"""


@pytest.fixture
def inbox_rt(tmp_path):
    rt = watched_runtime(tmp_path / "logs", inbox_port=free_port())
    yield rt
    rt.close()


@pytest.fixture
def inbox_page(browser, inbox_rt):
    """inbox_page(locale=..., color_scheme=..., viewport=..., permission=...) -> page, once the
    process holds the inbox (an interview must be pending for that: `keep` is one, left open)."""
    contexts = []

    def make(locale="en-US", color_scheme="light", viewport=None, permission="'default'"):
        if inbox_rt.inbox.server is None:
            inbox_rt.keep = inbox_rt.open_interview(spec("Kept open"), agent="Claude Code")
            inbox_rt.watch.wait_for("inbox-holding")
        context = browser.new_context(locale=locale, color_scheme=color_scheme, viewport=viewport or DESKTOP)
        context.add_init_script(WATCH_CSP)
        context.add_init_script(FAKE_NOTIFICATIONS % permission)
        context.set_default_timeout(WAIT * 1000)
        contexts.append(context)
        page = context.new_page()
        page.errors = []
        page.on("console", lambda m: m.type == "error" and page.errors.append(m.text))
        page.on("pageerror", lambda e: page.errors.append(str(e)))
        key = read_key(inbox_rt.config.log_dir)
        page.goto("http://localhost:%d/inbox/%s" % (inbox_rt.config.inbox_port, key))
        page.wait_for_selector("body.ready")
        return page

    yield make
    for context in contexts:
        context.close()


def spec(title, questions=3):
    return {"title": title, "questions": [{"id": "q%d" % n, "header": "Q%d?" % n} for n in range(questions)]}


def rows(page):
    return page.locator("#inbox-list > li").evaluate_all("lis => lis.map(li => li.querySelector('.inbox-link').textContent)")


def clean(page):
    assert page.errors == []
    assert page.evaluate("window.__csp") == []


@pytest.mark.parametrize("locale,tag", [("en-US", "en"), ("ja-JP", "ja"), ("ar", "ar")])
def test_rows_appear_and_leave_live_in_the_pages_language(inbox_page, inbox_rt, locale, tag):
    w = form_strings(tag)
    page = inbox_page(locale=locale)
    assert page.evaluate("[document.documentElement.lang, document.documentElement.dir]") == [
        tag, "rtl" if tag == "ar" else "ltr"]
    submit(inbox_rt.form_url(inbox_rt.keep), {})
    page.wait_for_selector("#inbox-empty:not([hidden])")
    assert page.locator(".inbox-empty-text").text_content() == w["inbox.empty"]
    assert page.title() == w["inbox.title"]

    first = inbox_rt.open_interview(spec("Database choice", 12), agent="Claude Code")
    page.wait_for_selector('li[data-interview="%s"]' % first.id)
    assert page.locator("#inbox-empty").is_hidden()
    assert page.title() == "(1) " + w["inbox.title"]
    row = page.locator('li[data-interview="%s"]' % first.id)
    assert row.locator(".inbox-agent").text_content() == "Claude Code"
    assert row.locator(".inbox-progress").text_content() == w["inbox.answered"].format(answered=0, total=12)
    assert row.locator(".inbox-age").text_content() == w["inbox.justNow"]
    assert row.locator(".inbox-link").get_attribute("href") == inbox_rt.form_url(first)
    assert row.locator(".inbox-link").get_attribute("target") == "_blank"
    project = row.locator(".inbox-project")
    assert project.get_attribute("title") == inbox_rt.inbox.project  # the full path on hover
    assert project.text_content() == Path(inbox_rt.inbox.project).name

    second = inbox_rt.open_interview(spec("API versioning"), agent=None)
    page.wait_for_function("() => document.title.startsWith('(2) ')")
    assert rows(page) == ["Database choice", "API versioning"]
    fallback = w["agent.fallback"]
    assert page.locator('li[data-interview="%s"] .inbox-agent' % second.id).text_content() == (
        fallback[0].upper() + fallback[1:])
    assert page.locator("#inbox-heading").text_content() != ""

    # A follow-up the user has not seen shows as a badge.
    inbox_rt.append_questions(second.id, [{"id": "late", "header": "Late?"}])
    badge = page.locator('li[data-interview="%s"] .inbox-badge' % second.id)
    badge.wait_for(state="visible")
    other = w["inbox.followUps"]["other"] if isinstance(w["inbox.followUps"], dict) else w["inbox.followUps"]
    one = w["inbox.followUps"].get("one", other) if isinstance(w["inbox.followUps"], dict) else other
    assert badge.text_content() in (one.replace("{count}", "1"), other.replace("{count}", "1"))

    submit(inbox_rt.form_url(first), {})
    page.wait_for_selector('li[data-interview="%s"]' % first.id, state="detached")
    assert rows(page) == ["API versioning"]
    assert page.title() == "(1) " + w["inbox.title"]
    submit(inbox_rt.form_url(second), {})
    page.wait_for_selector("#inbox-empty:not([hidden])")
    assert page.title() == w["inbox.title"]
    clean(page)


def test_a_new_interview_is_notified_once_the_user_allowed_it(inbox_page, inbox_rt):
    page = inbox_page()
    button = page.locator("#btn-notify")
    assert button.is_visible()
    assert page.evaluate("window.__notes") == []  # what was there before is not news
    button.click()
    button.wait_for(state="hidden")
    assert page.evaluate("window.__asked") == 1
    fresh = inbox_rt.open_interview(spec("Docs layout"), agent="Codex")
    page.wait_for_function("() => window.__notes.length === 1")
    assert page.evaluate("window.__notes") == [
        {"title": "New interview", "body": "Codex: Docs layout", "tag": fresh.id}]
    clean(page)


def test_the_row_isolates_the_agents_name_and_the_notification_and_tab_title_do_not(inbox_page, inbox_rt):
    w = form_strings("ar")
    page = inbox_page(locale="ar", permission="'granted'")
    fresh = inbox_rt.open_interview(spec("Docs layout"), agent="Codex")
    waiter = threading.Thread(target=wait_for_result, args=(inbox_rt, fresh.id, 10))
    waiter.start()
    try:
        # In the page, the Latin name inside Arabic text is a bidi isolate...
        blocked = page.locator('li[data-interview="%s"] .inbox-blocked' % fresh.id)
        expect(blocked).to_have_text(w["inbox.blocked"].replace("{agent}", isolated("Codex")))
        # ...in a system notification and in the tab's title, which other code draws, never.
        page.wait_for_function("() => window.__notes.length === 1")
        assert page.evaluate("window.__notes") == [{
            "title": w["inbox.notificationTitle"], "tag": fresh.id,
            "body": w["inbox.notification"].replace("{agent}", "Codex").replace("{title}", "Docs layout")}]
        assert page.title() == "(2) " + w["inbox.title"]
    finally:
        submit(inbox_rt.form_url(fresh), {})
        waiter.join()
    clean(page)


def test_notifications_are_never_asked_for_by_the_page_itself(inbox_page, inbox_rt):
    page = inbox_page(permission="'granted'")
    assert page.locator("#btn-notify").is_hidden()
    inbox_rt.open_interview(spec("Asked"), agent="Codex")
    page.wait_for_function("() => window.__notes.length === 1")
    assert page.evaluate("window.__asked") == 0


def serious(page):
    results = AXE.run(page)
    return [(v["id"], [n["target"] for n in v["nodes"]][:3]) for v in results.response["violations"]
            if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_nothing_serious_with_rows_and_when_empty(inbox_page, inbox_rt, scheme):
    page = inbox_page(color_scheme=scheme)
    other = inbox_rt.open_interview(spec("Two of them"), agent="Gemini CLI")
    inbox_rt.append_questions(other.id, [{"id": "late", "header": "Late?"}])
    page.wait_for_selector('li[data-interview="%s"] .inbox-badge:not([hidden])' % other.id)
    assert serious(page) == []
    submit(inbox_rt.form_url(other), {})
    submit(inbox_rt.form_url(inbox_rt.keep), {})
    page.wait_for_selector("#inbox-empty:not([hidden])")
    assert serious(page) == []


@pytest.mark.parametrize("locale", ["en-US", "ar"])
def test_nothing_is_cut_off_at_360_px(inbox_page, inbox_rt, locale):
    page = inbox_page(viewport=PHONE, locale=locale)
    inbox_rt.open_interview(spec("A very long interview title that has to wrap on a phone screen " * 2),
                            agent="A rather long agent name")
    page.wait_for_function("() => document.querySelectorAll('#inbox-list > li').length === 2")
    sizes = page.evaluate("""(() => {
        const vw = document.documentElement.clientWidth, out = [];
        for (const el of document.querySelectorAll('body *')) {
            if (el.closest('template, .sr-only')) continue;
            const r = el.getBoundingClientRect();
            if (r.width && (r.right > vw + 0.5 || r.left < -0.5)) out.push(el.className);
        }
        return {vw, scroll: document.documentElement.scrollWidth, out};
    })()""")
    assert sizes["out"] == [] and sizes["scroll"] <= sizes["vw"]


def test_the_keyboard_reaches_every_control_and_every_row(inbox_page, inbox_rt):
    page = inbox_page()
    inbox_rt.open_interview(spec("Second"), agent="Codex")
    page.wait_for_function("() => document.querySelectorAll('#inbox-list > li').length === 2")
    reached = []
    for _ in range(6):
        page.keyboard.press("Tab")
        reached.append(page.evaluate("document.activeElement.id || document.activeElement.textContent"))
    assert reached == ["btn-notify", "btn-theme", "view-waiting", "view-answered", "Kept open", "Second"]
    # The theme cycles from the keyboard, and the choice is kept.
    page.locator("#btn-theme").focus()
    page.keyboard.press("Enter")
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    page.keyboard.press("Enter")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"


def test_the_form_says_how_many_more_wait_and_links_to_the_inbox(browser, inbox_rt):
    mine = inbox_rt.open_interview(spec("Mine"), agent="Claude Code")
    inbox_rt.watch.wait_for("inbox-holding")
    context = browser.new_context(viewport=DESKTOP)
    try:
        page = context.new_page()
        page.goto(inbox_rt.form_url(mine))
        page.wait_for_selector("body.ready")
        link = page.locator("#inbox-more")
        assert link.is_hidden()
        others = [inbox_rt.open_interview(spec("Other %d" % n), agent="Codex") for n in (1, 2)]
        link.wait_for(state="visible")
        page.wait_for_function("() => document.querySelector('#inbox-more').textContent === '2 more waiting'")
        key = read_key(inbox_rt.config.log_dir)
        # One token, one interview: the form's page and its state never hold the inbox's key;
        # its link goes through the form's own server, which hands out a one-time ticket.
        assert link.get_attribute("href") == "/api/s/%s/inbox" % mine.token
        assert link.get_attribute("rel") == "noopener noreferrer"
        assert key not in page.content()
        assert key not in page.evaluate("fetch(location.pathname.replace('/s/', '/api/s/') + '/state').then(r => r.text())")
        with context.expect_page() as opened:
            link.click()
        inbox = opened.value
        inbox.wait_for_function("() => document.querySelectorAll('#inbox-list > li').length === 3")
        assert inbox.url == "http://localhost:%d/inbox" % inbox_rt.config.inbox_port
        assert key not in inbox.content()
        # No cookie (a browser sends one to every port of localhost): the session is this tab's,
        # and a reload proves the server before it is sent again.
        assert context.cookies() == []
        kept = inbox.evaluate("JSON.parse(sessionStorage.getItem('ask-user-rich-inbox-session'))")
        assert key not in kept["session"] and key not in kept["verifier"]
        inbox.reload()
        inbox.wait_for_function("() => document.querySelectorAll('#inbox-list > li').length === 3")
        elsewhere = context.new_page()  # another tab has no session: the page says how to open it
        elsewhere.goto("http://localhost:%d/inbox" % inbox_rt.config.inbox_port)
        elsewhere.locator('#notices [data-id="closed"]').wait_for()
        elsewhere.close()
        inbox.close()
        assert serious(page) == []
        page.set_viewport_size(PHONE)  # the header keeps it on a phone, nothing cut off
        box = link.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        page.set_viewport_size(DESKTOP)
        submit(inbox_rt.form_url(others[0]), {})
        page.wait_for_function("() => document.querySelector('#inbox-more').textContent === '1 more waiting'")
        submit(inbox_rt.form_url(others[1]), {})
        link.wait_for(state="hidden")
    finally:
        context.close()


@pytest.fixture
def processes(browser, tmp_path):
    """(start(name, folder, title, questions=3) -> Agent, the inbox port, the log folder, a
    browser context): agent server processes on one inbox port, ended with the test."""
    from helpers.inbox_support import Agent

    port = free_port()
    logs = tmp_path / "logs"
    agents = []
    context = browser.new_context(viewport=DESKTOP, locale="en-US")

    def start(name, folder, title, questions=3):
        agents.append(Agent(logs, port, name, tmp_path / folder, title, questions))
        return agents[-1]

    try:
        yield start, port, logs, context
    finally:
        context.close()
        for agent in agents:
            agent.close()


def test_the_page_lists_three_agent_processes_and_follows_them_live(processes):
    start, port, logs, context = processes
    agents = []
    agents.append(start("claude-code", "web-app", "Database choice", 12))
    agents[0].server.log.wait_for("inbox-holding")
    agents.append(start("codex", "api-server", "API versioning", 4))
    agents.append(start("gemini-cli", "docs-site", "Docs layout", 2))
    context.add_init_script(WATCH_CSP)
    page = context.new_page()
    page.goto("http://localhost:%d/inbox/%s" % (port, read_key(logs)))
    page.wait_for_function("() => document.querySelectorAll('#inbox-list > li').length === 3")
    assert rows(page) == ["Database choice", "API versioning", "Docs layout"]
    who = page.locator("#inbox-list > li").evaluate_all(
        "lis => lis.map(li => [li.querySelector('.inbox-agent').textContent,"
        " li.querySelector('.inbox-project').textContent, li.querySelector('.inbox-project').title])")
    assert who == [["Claude Code", "web-app", agents[0].folder], ["Codex", "api-server", agents[1].folder],
                   ["Gemini CLI", "docs-site", agents[2].folder]]
    assert page.title() == "(3) ask-user-rich inbox"
    submit(agents[1].url, {})
    page.wait_for_function("() => document.title === '(2) ask-user-rich inbox'")
    assert rows(page) == ["Database choice", "Docs layout"]
    assert page.evaluate("window.__csp") == []


def test_both_kinds_of_inbox_page_follow_the_inbox_to_a_new_holder_that_proves_the_key(processes):
    # The holder dies; another of ours takes the port within 5 s. A page opened by the key and
    # one opened from a form (by its session cookie) each check the new holder's proof, reconnect
    # and list what is left, with no "stopped" notice.
    start, port, logs, context = processes
    agents = [start("claude-code", "first", "Held here first")]
    agents[0].server.log.wait_for("inbox-holding")
    agents.append(start("codex", "second", "Still waiting"))
    form = context.new_page()
    form.goto(agents[0].url)
    form.locator("#inbox-more").wait_for(state="visible")
    with context.expect_page() as opened:
        form.locator("#inbox-more").click()
    by_cookie = opened.value
    by_key = context.new_page()
    by_key.goto("http://localhost:%d/inbox/%s" % (port, read_key(logs)))
    for page in (by_cookie, by_key):
        page.wait_for_function("() => document.querySelectorAll('#inbox-list > li').length === 2")
    form.close()
    agents[0].kill()
    agents[1].server.log.wait_for("inbox-holding", timeout=30)
    for page in (by_cookie, by_key):
        page.wait_for_function("() => document.title === '(1) ask-user-rich inbox'", timeout=30000)
        assert rows(page) == ["Still waiting"]
        assert page.locator('[data-id="impostor"]').count() == 0
        assert page.locator('[data-id="lost"]').count() == 0
