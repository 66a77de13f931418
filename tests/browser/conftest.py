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

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import askrich  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
DESKTOP = {"width": 1100, "height": 860}
PHONE = {"width": 360, "height": 740}

# Collected in the page before any of its scripts run.
WATCH_CSP = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push(e.violatedDirective + ' ' + (e.blockedURI || '') + ' ' + (e.sample || ''));
});
"""


def pytest_collection_modifyitems(items):
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
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
def rt(tmp_path):
    runtime = askrich.Runtime(askrich.Config(log_dir=str(tmp_path / "logs"), open_browser=False))
    yield runtime
    runtime.close()


class Form:
    """One open form page and the interview behind it."""

    def __init__(self, rt, interview, context, page):
        self.rt = rt
        self.interview = interview
        self.context = context
        self.page = page
        self.errors: list[str] = []
        self.expect_errors = False
        self.allowed: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))

    def allow(self, text):
        """Expect console errors holding `text` (the browser logs every non-2xx response)."""
        self.allowed.append(text)

    def _console(self, msg):
        if msg.type == "error" and not any(a in msg.text for a in self.allowed):
            self.errors.append(f"console: {msg.text}")

    # ---- navigation helpers
    def goto(self):
        self.page.goto(self.interview.url)
        self.page.wait_for_selector("body.ready")
        return self

    def reload(self):
        self.page.reload()
        self.page.wait_for_selector("body.ready")

    def press(self, *keys):
        for k in keys:
            self.page.keyboard.press(k)

    @property
    def screen(self) -> str:
        return self.page.evaluate("document.querySelector('#main > .current')?.dataset.screen ?? ''")

    def section(self, qid):
        return self.page.locator(f'section.question[data-qid="{qid}"]')

    def option(self, qid, opt):
        return self.section(qid).locator(f'li.opt[data-opt="{opt}"] input.opt-input')

    def rank_order(self, qid):
        return self.section(qid).locator(".rank-row").evaluate_all("rows => rows.map(r => r.dataset.opt)")

    def status(self, qid):
        return self.page.locator(f'#rail li[data-qid="{qid}"] button').get_attribute("data-status")

    def focused(self, js="el => el"):
        return self.page.evaluate(f"(() => {{ const el = document.activeElement; return ({js})(el); }})()")

    def submit_and_collect(self, timeout=5):
        """Go to review, submit (confirming when asked), and return the server's result."""
        self.press("Escape", "End")
        self.page.locator("#btn-submit").click()
        if self.page.locator(".review .confirm").is_visible():
            self.page.locator("#btn-submit").click()
        self.page.wait_for_selector("section.end")
        result = self.rt.wait_for_result(self.interview.id, timeout=timeout)
        assert result is not None, "the server got no submit"
        return result

    def csp_violations(self):
        try:
            return self.page.evaluate("window.__csp || []")
        except Exception:  # page closed or navigated away
            return []

    def check_clean(self):
        problems = self.errors + [f"CSP: {v}" for v in self.csp_violations()]
        assert not problems, "console errors or CSP violations:\n" + "\n".join(problems)


def answer_of(result, qid):
    for a in result["answers"]:
        if a["id"] == qid:
            return a
    raise KeyError(qid)


@pytest.fixture
def form(browser, rt):
    """form(spec, viewport=..., color_scheme=..., reduced_motion=..., storage=True) -> Form"""
    opened: list[Form] = []

    def make(spec, *, viewport=None, color_scheme="light", reduced_motion="no-preference",
             goto=True, block_storage=False, device_scale_factor=1):
        interview = rt.open_interview(spec)
        context = browser.new_context(
            viewport=viewport or DESKTOP, color_scheme=color_scheme, reduced_motion=reduced_motion,
            device_scale_factor=device_scale_factor,
        )
        context.add_init_script(WATCH_CSP)
        if block_storage:
            context.add_init_script(
                "Object.defineProperty(window, 'localStorage', {get() { throw new DOMException('blocked', 'SecurityError'); }});"
            )
        context.set_default_timeout(5000)
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


# ---- interviews used across the tests

def choice(qid, header, options, **kw):
    return {"id": qid, "header": header, "options": [
        o if isinstance(o, dict) else {"id": o, "label": o.upper()} for o in options], **kw}


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
