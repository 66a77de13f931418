"""Helpers for the form's browser tests and the screenshot script: the browser settings and a
Form object wrapping one open page and the interview behind it."""
from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for _path in (str(ROOT), str(ROOT / "tests")):  # askrich.py, and the tests' helpers (support.py)
    if _path not in sys.path:
        sys.path.insert(0, _path)

import askrich  # noqa: E402,F401
from helpers.support import WAIT, wait_for_result  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
DESKTOP = {"width": 1100, "height": 860}

# The bidi isolate the form's t() puts around every value it inserts that is not a number.
FSI, PDI = "\u2068", "\u2069"
# And the word joiner t() puts after the isolate when a letter follows at once ("{agent}から").
WJ = "\u2060"


def isolated(text):
    """`text` as the form inserts it into its own words: inside U+2068 … U+2069."""
    return f"{FSI}{text}{PDI}"


PHONE = {"width": 360, "height": 740}

# Collected in the page before any of its scripts run.
WATCH_CSP = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push(e.violatedDirective + ' ' + (e.blockedURI || '') + ' ' + (e.sample || ''));
});
"""


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

    @property
    def url(self) -> str:
        """The form's address, as the runtime composes it."""
        return self.rt.form_url(self.interview)

    # ---- navigation helpers
    def goto(self):
        self.page.goto(self.url)
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

    def submit_and_collect(self, timeout=WAIT):
        """Go to review, submit (confirming when asked), and return the server's result."""
        self.press("Escape", "End")
        self.page.locator("#btn-submit").click()
        self.page.wait_for_selector("section.end, .review .confirm:not([hidden])")
        if self.page.locator(".review .confirm").is_visible():
            self.page.locator("#btn-submit").click()
        self.page.wait_for_selector("section.end")
        result = wait_for_result(self.rt, self.interview.id, timeout=timeout)
        assert result is not None, "the server got no submit"
        return result

    def pretend_state(self, state):
        """From now on the page reads the interview as `state`: "expired" answers 404, as for an
        interview the server no longer knows; any other state replaces the one reported."""
        self.page.unroute("**/api/s/*")
        if state == "expired":
            self.page.route("**/api/s/*", lambda route: route.fulfill(
                status=404, body='{"error": "not found", "code": "not-found"}', content_type="application/json"))
            return

        def rewrite(route):
            response = route.fetch()
            data = response.json()
            data["state"] = state
            route.fulfill(response=response, body=json.dumps(data))

        self.page.route("**/api/s/*", rewrite)

    def waiting_call(self, timeout=10):
        """Start a call that waits for the answers, as the agent's would, and return once the page
        saw it waiting; the function returned gives that call's result after the submit."""
        box = {}
        waiter = threading.Thread(
            target=lambda: box.setdefault("r", wait_for_result(self.rt, self.interview.id, timeout)))
        waiter.start()
        self.page.wait_for_selector('body[data-live="waiting"]', state="attached")

        def result():
            waiter.join()
            return box["r"]

        return result

    def settle(self):
        """Wait until no animation or transition runs, looking once a frame."""
        # A function, not an expression: the page's CSP forbids the eval an expression needs.
        self.page.wait_for_function(
            "() => document.getAnimations().every(a => a.playState !== 'running')", polling="raf")

    def scroll_settled(self, frames=5):
        """Wait until the page has not scrolled for `frames` frames in a row: a scroll the last
        input started, smooth or not, has ended (or never began)."""
        self.page.wait_for_function("""n => {
            const watch = window.__scrollWatch || (window.__scrollWatch = {y: NaN, still: 0});
            if (watch.y === scrollY) watch.still++; else { watch.y = scrollY; watch.still = 0; }
            if (watch.still < n) return false;
            delete window.__scrollWatch;
            return true;
        }""", arg=frames, polling="raf")

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


def follow_up(f, n=1):
    """Appends `n` follow-up questions (late0, late1, ...) with a note, once the form shows them."""
    f.rt.append_questions(f.interview.id, [
        {"id": f"late{i}", "header": f"Late {i}", "options": [{"id": "y", "label": "Yes"}]}
        for i in range(n)], note="More")
    f.page.wait_for_selector(f'#rail li[data-qid="late{n - 1}"]')


# ---- interviews used across the tests

def choice(qid, header, options, **kw):
    return {"id": qid, "header": header, "options": [
        o if isinstance(o, dict) else {"id": o, "label": o.upper()} for o in options], **kw}
