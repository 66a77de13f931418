"""Fixtures for the form's browser tests: Debian's Chromium driven by Playwright against the
real form server (askrich.Runtime in-process).

Every page opened through `form` records console errors, uncaught exceptions and CSP
violations; a test fails at teardown if any appeared, unless it expects them (server gone).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from formkit import CHROMIUM, CHROMIUM_ARGS, DESKTOP, WATCH_CSP, Form, askrich, choice  # noqa: E402
from helpers.support import WAIT, LogWatch  # noqa: E402
from playwright.sync_api import expect  # noqa: E402

# Every wait of a page (an action, a selector, an expect) waits on what it names, up to the
# deadline every test allows a loaded machine (tests/README.md, "Waiting in a test").
expect.set_options(timeout=WAIT * 1000)


def pytest_collection_modifyitems(items):
    # Every test that drives Chromium is marked, so `-m "not browser"` leaves them out.
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)


SHOTS = Path(__file__).resolve().parents[1] / ".artifacts" / "screenshots"


def pytest_terminal_summary(terminalreporter):
    if SHOTS.is_dir() and any(SHOTS.glob("test-*.png")):
        terminalreporter.write_line(f"form screenshots (every screen kind, light and dark, desktop and small screens): {SHOTS}")


@pytest.fixture
def shot():
    """shot(page, name): keep a screenshot of what a test checked, for a person to look at."""
    SHOTS.mkdir(parents=True, exist_ok=True)

    def take(page, name):
        page.screenshot(path=str(SHOTS / f"test-{name}.png"))

    return take


# Module, not session: Playwright's sync API keeps an asyncio loop running in the main thread
# while it is open, so a session-wide browser broke every later test that calls asyncio.run
# (test_elicitation) or opens Playwright itself (test_hostile_pages).
@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        if os.environ.get("ASK_USER_RICH_TESTS_REQUIRE_CHROMIUM") == "1":
            pytest.fail(f"{CHROMIUM} is missing but ASK_USER_RICH_TESTS_REQUIRE_CHROMIUM=1")
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def log():
    """What the form server logs, with a wait for a line."""
    return LogWatch()


@pytest.fixture
def rt(tmp_path, log):
    log_dir = str(tmp_path / "logs")
    runtime = askrich.Runtime(askrich.Config(log_dir=log_dir, open_browser=False),
                              askrich.Log(log_dir, stream=log))
    yield runtime
    runtime.close()


@pytest.fixture
def form(browser, rt):
    """form(spec, viewport=..., color_scheme=..., reduced_motion=..., locale=..., agent=..., internal=...) -> Form
    (`internal`: the interview's options no call can set, such as a permission ask's)"""
    opened: list[Form] = []

    def make(spec, *, viewport=None, color_scheme="light", reduced_motion="no-preference",
             goto=True, block_storage=False, device_scale_factor=1, has_touch=False, locale=None,
             agent=None, internal=None):
        interview = rt.open_interview(spec, internal, agent=agent)
        context = browser.new_context(
            viewport=viewport or DESKTOP, color_scheme=color_scheme, reduced_motion=reduced_motion,
            device_scale_factor=device_scale_factor, has_touch=has_touch, locale=locale,
        )
        context.add_init_script(WATCH_CSP)
        if block_storage:
            context.add_init_script(
                "Object.defineProperty(window, 'localStorage', {get() { throw new DOMException('blocked', 'SecurityError'); }});"
            )
        context.set_default_timeout(WAIT * 1000)
        page = context.new_page()
        f = Form(rt, interview, context, page)
        opened.append(f)
        if goto:
            f.goto()
        return f

    yield make
    try:
        for f in opened:
            if not f.expect_errors:
                f.check_clean()
    finally:
        for f in opened:
            f.context.close()


@pytest.fixture
def rich_spec():
    """Every question kind the form knows."""
    return {
        "title": "Planning round",
        "intro": "A few **decisions** before we start.",
        "questions": [
            choice("db", "Which database?", [
                {"id": "pg", "label": "Postgres", "description": "We run it already.",
                 "preview": "```sql\nCREATE TABLE t (id serial);\n```"},
                {"id": "my", "label": "MySQL"},
                {"id": "lite", "label": "SQLite"},
            ], recommended="pg", rationale="Fewer moving parts.", body="Pick the *main* store."),
            {"id": "order", "kind": "rank", "header": "Rank the goals", "options": [
                {"id": "speed", "label": "Speed"}, {"id": "cost", "label": "Cost"},
                {"id": "looks", "label": "Looks"}, {"id": "docs", "label": "Docs"}],
             "recommended": ["cost", "speed", "docs", "looks"], "dependsOn": ["db"]},
            choice("feat", "Which features?", ["auth", "search", "export"], multiSelect=True,
                   recommended=["auth", "export"]),
            choice("src", "Upgrade the parser?", [
                {"id": "up", "label": "Upgrade", "textInput": {"placeholder": "source URL", "required": True}},
                {"id": "keep", "label": "Keep it"},
            ]),
            {"id": "free", "header": "Anything else?", "options": []},
        ],
    }
