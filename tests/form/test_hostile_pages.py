"""Hostile pages in a real browser (tests/README.md, "Security"): a page on another localhost port tries every way
to read or submit an interview (simple POSTs in text/plain and form encodings, fetch with and
without credentials, sendBeacon, a sandboxed frame whose Origin is null, a DNS-rebinding Host,
framing the form) and is refused every time; markdown that would run script renders inert;
links in the form send no Referer.

Debian's Chromium, driven by Playwright, headless. `evil.test` and `rebind.test` resolve to
127.0.0.1 inside this browser only (--host-resolver-rules), as a rebinding attacker's names
would."""

from __future__ import annotations

import json
import os
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import askrich
from helpers.strategies import SCRIPT_MARKDOWN

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--host-resolver-rules=MAP evil.test 127.0.0.1, MAP rebind.test 127.0.0.1",
]
SECRET = "Secret header only the user may see"


@pytest.fixture(scope="module")
def chromium():
    if not os.path.exists(CHROMIUM):
        if os.environ.get("ASK_USER_RICH_TESTS_REQUIRE_CHROMIUM") == "1":
            pytest.fail("%s is missing but ASK_USER_RICH_TESTS_REQUIRE_CHROMIUM=1" % CHROMIUM)
        pytest.skip("%s is not installed (apt-get install chromium)" % CHROMIUM)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Attacker(ThreadingHTTPServer):
    """Another local web server: serves the hostile pages and records what reaches it."""

    daemon_threads = True

    def __init__(self) -> None:
        self.pages: dict = {}
        self.seen: list = []
        super().__init__(("127.0.0.1", 0), AttackerHandler)

    @property
    def origin(self) -> str:
        return "http://evil.test:%d" % self.server_address[1]


class AttackerHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        self.server.seen.append((path, dict(self.headers)))
        body = self.server.pages.get(path, "<!doctype html><title>nothing</title>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def attacker():
    server = Attacker()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture
def context(chromium):
    ctx = chromium.new_context()
    ctx.set_default_timeout(8000)
    yield ctx
    ctx.close()


def target_interview(runtime):
    form = runtime.open_interview({"title": "Target", "questions": [
        {"id": "q", "header": SECRET, "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]}]})
    form.base = runtime.form_url(form).split("/s/")[0]
    form.port = urllib.parse.urlsplit(runtime.form_url(form)).port
    return form


def assert_untouched(runtime, form):
    interview = runtime.hub.get(form.id)
    assert interview.state == "pending" and interview.settled_result() is None
    assert interview.activity()["counts"] is None, "a hostile page reported progress"
    answers = os.path.join(runtime.config.log_dir, "answers")
    assert not os.path.isdir(answers) or os.listdir(answers) == []


SCRIPTED_ATTACKS = r"""<!doctype html><meta charset="utf-8"><title>attacks</title>
<script>
const bases = %(bases)s, token = %(token)s;
const body = JSON.stringify({answers: {q: {selected: ["a"]}}});
const results = {};
async function attempt(name, run) {
  try { results[name] = "completed: " + await run(); }
  catch (error) { results[name] = "refused: " + error.name; }
}
(async () => {
  for (const base of bases) {
    const api = base + "/api/s/" + token;
    await attempt(base + " no-cors text/plain submit", async () => {
      const r = await fetch(api + "/submit", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body});
      return r.type + " " + r.status;
    });
    await attempt(base + " no-cors form-encoded submit", async () => {
      const r = await fetch(api + "/submit", {method: "POST", mode: "no-cors", body: new URLSearchParams({answers: body})});
      return r.type + " " + r.status;
    });
    for (const credentials of ["include", "omit", "same-origin"]) {
      await attempt(base + " cors json submit " + credentials, async () => {
        const r = await fetch(api + "/submit", {method: "POST", credentials, headers: {"Content-Type": "application/json"}, body});
        return r.status + " " + await r.text();
      });
      await attempt(base + " cors read " + credentials, async () => {
        const r = await fetch(api, {credentials});
        return r.status + " " + await r.text();
      });
    }
    await attempt(base + " progress", async () => {
      const r = await fetch(api + "/progress", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: '{"answered": 9}'});
      return r.type;
    });
    await attempt(base + " beacon", async () => String(navigator.sendBeacon(api + "/submit", new Blob([body], {type: "text/plain"}))));
    await attempt(base + " xhr", () => new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open("GET", api + "/state"); xhr.withCredentials = true;
      xhr.onload = () => resolve(xhr.status + " " + xhr.responseText);
      xhr.onerror = () => reject(new TypeError("xhr error"));
      xhr.send();
    }));
    await attempt(base + " event stream", () => new Promise((resolve, reject) => {
      const events = new EventSource(api + "/events");
      events.onmessage = events.addEventListener("state", (e) => { events.close(); resolve(e.data); });
      events.onerror = () => { events.close(); reject(new TypeError("eventsource error")); };
    }));
  }
  window.results = results;
  window.done = true;
})();
</script>"""


def test_scripted_requests_from_another_port_can_neither_read_nor_submit(runtime, attacker, context):
    form = target_interview(runtime)
    bases = [form.base, form.base.replace("localhost", "127.0.0.1")]
    attacker.pages["/attacks"] = SCRIPTED_ATTACKS % {"bases": json.dumps(bases), "token": json.dumps(form.token)}
    page = context.new_page()
    page.goto(attacker.origin + "/attacks")
    page.wait_for_function("window.done === true", timeout=20000)
    results = page.evaluate("window.results")
    assert len(results) == 2 * 12
    for name, outcome in results.items():
        assert SECRET not in outcome and '"spec"' not in outcome, (name, outcome)
        if " cors " in name or "xhr" in name or "event stream" in name:
            assert outcome.startswith("refused"), (name, outcome)  # nothing readable came back
    assert_untouched(runtime, form)
    # The real user is unaffected.
    done = context.request.post(form.base + "/api/s/%s/submit" % form.token,
                                data=json.dumps({"answers": {"q": {"selected": ["b"]}}}),
                                headers={"Content-Type": "application/json"})
    assert done.status == 200, done.text()


FORM_POST = """<!doctype html><meta charset="utf-8"><title>form post</title>
<form method="POST" action="%(action)s" enctype="%(enctype)s">
<input name='{"answers":{"q":{"selected":["a"]}},"pad":"' value='"}'>
</form><script>document.forms[0].submit();</script>"""


@pytest.mark.parametrize("enctype", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_a_cross_site_html_form_post_is_refused_in_every_encoding(runtime, attacker, context, enctype):
    form = target_interview(runtime)
    path = "/form-" + enctype.replace("/", "-")
    attacker.pages[path] = FORM_POST % {"action": form.base + "/api/s/%s/submit" % form.token, "enctype": enctype}
    page = context.new_page()
    with page.expect_navigation(url=lambda url: "/api/s/" in url):
        page.goto(attacker.origin + path)
    assert "forbidden origin" in page.content()
    assert_untouched(runtime, form)


SANDBOXED = """<!doctype html><meta charset="utf-8"><title>sandbox</title>
<script>
window.messages = [];
addEventListener("message", (e) => window.messages.push(String(e.data)));
</script>
<iframe sandbox="allow-scripts allow-forms" srcdoc="%(srcdoc)s"></iframe>"""
SANDBOXED_SCRIPT = """<script>
const body = JSON.stringify({answers: {q: {selected: ['a']}}});
const tell = (m) => parent.postMessage(m, '*');
fetch('%(api)s/submit', {method: 'POST', headers: {'Content-Type': 'text/plain'}, body})
  .then((r) => tell('text ' + r.status), (e) => tell('text refused ' + e.name));
fetch('%(api)s/submit', {method: 'POST', headers: {'Content-Type': 'application/json'}, body})
  .then((r) => tell('json ' + r.status), (e) => tell('json refused ' + e.name));
fetch('%(api)s').then((r) => r.text()).then((t) => tell('read ' + t), (e) => tell('read refused ' + e.name));
</script>"""


def test_a_sandboxed_frame_with_origin_null_is_refused(runtime, attacker, context):
    form = target_interview(runtime)
    api = form.base + "/api/s/" + form.token
    srcdoc = (SANDBOXED_SCRIPT % {"api": api}).replace("&", "&amp;").replace('"', "&quot;")
    attacker.pages["/sandbox"] = SANDBOXED % {"srcdoc": srcdoc}
    page = context.new_page()
    page.goto(attacker.origin + "/sandbox")
    page.wait_for_function("window.messages.length === 3", timeout=10000)
    messages = page.evaluate("window.messages")
    assert sorted(m.split(" ")[0] for m in messages) == ["json", "read", "text"]
    assert all("refused" in m for m in messages), messages
    assert not any(SECRET in m for m in messages)
    assert_untouched(runtime, form)


def test_a_dns_rebinding_host_gets_403_and_no_form(runtime, context):
    form = target_interview(runtime)
    page = context.new_page()
    for path in ("/s/%s" % form.token, "/api/s/%s" % form.token, "/api/s/%s/state" % form.token):
        response = page.goto("http://rebind.test:%d%s" % (form.port, path))
        assert response.status == 403
        assert json.loads(page.inner_text("body")) == {"error": "forbidden host", "code": "forbidden-host"}
        assert SECRET not in page.content()
    assert_untouched(runtime, form)


FRAMER = """<!doctype html><meta charset="utf-8"><title>framer</title>
<iframe id="framed" src="%(url)s" width="800" height="600"></iframe>
<object data="%(url)s" width="300" height="200"></object>"""


def test_the_form_cannot_be_framed_by_another_page(runtime, attacker, context):
    form = target_interview(runtime)
    attacker.pages["/framer"] = FRAMER % {"url": runtime.form_url(form)}
    page = context.new_page()
    page.goto(attacker.origin + "/framer")
    page.wait_for_timeout(1500)  # give a frame every chance to render (there is no event for "blocked")
    for frame in page.frames[1:]:
        try:
            text = frame.evaluate("document.body ? document.body.innerText : ''")
        except Exception:  # a blocked frame is an error page Playwright may not enter
            text = ""
        assert SECRET not in text and "Loading the interview" not in text, frame.url
        assert not frame.url.startswith(form.base + "/s/") or text == "", frame.url
    # And the headers that forbid it are on the page itself.
    response = context.request.get(runtime.form_url(form))
    assert response.headers["content-security-policy"] == askrich.CONTENT_SECURITY_POLICY
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert_untouched(runtime, form)


# -- markdown that would run script --------------------------------------------------------------


def hostile_spec(referer_url: str) -> dict:
    payloads = list(SCRIPT_MARKDOWN)
    questions = []
    for index, payload in enumerate(payloads):
        questions.append({
            "id": "q%d" % index,
            "header": payload,
            "body": payload + "\n\n[harmless link](%s)" % referer_url,
            "rationale": payload,
            "recommended": "a",
            "options": [
                {"id": "a", "label": payload, "description": payload, "preview": payload},
                {"id": "b", "label": "plain", "description": "ok", "textInput": {"placeholder": payload}},
            ],
        })
    return {"title": payloads[0], "intro": "\n\n".join(payloads), "questions": questions}


def test_markdown_in_every_field_renders_inert_and_links_carry_no_referer(runtime, attacker, context):
    referer_url = "http://127.0.0.1:%d/referer-check" % attacker.server_address[1]
    form = runtime.open_interview(hostile_spec(referer_url))
    runtime.append_questions(form.id, [{"id": "later", "header": SCRIPT_MARKDOWN[1], "options": []}],
                        note="\n\n".join(SCRIPT_MARKDOWN))
    dialogs = []
    context.add_init_script("""
        window.__csp = [];
        document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
        localStorage.setItem('askrich:showAll', 'true');
    """)
    page = context.new_page()
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(runtime.form_url(form))
    page.wait_for_selector("body.ready")
    page.wait_for_timeout(500)  # onerror/onload/ontoggle handlers would have fired by now
    # Render every screen: show-all is on; walk to the review too, which repeats the labels.
    for _ in range(len(SCRIPT_MARKDOWN) + 3):
        page.keyboard.press("End")
    page.wait_for_timeout(300)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.url == runtime.form_url(form) and dialogs == []
    rendered = page.evaluate("""() => {
        const md = [...document.querySelectorAll('.md')];
        return {
          blocks: md.filter((el) => el.innerHTML.trim()).length,
          scripts: document.querySelectorAll('script:not([type=module]), script:not([src])').length,
          handlers: [...document.querySelectorAll('*')].flatMap((el) => [...el.attributes]
              .filter((a) => a.name.startsWith('on')).map((a) => el.tagName + ' ' + a.name)),
          badUrls: [...document.querySelectorAll('[href], [src], [action], [data], [srcdoc], [formaction]')]
              .map((el) => el.getAttribute('href') || el.getAttribute('src') || el.getAttribute('action') || el.getAttribute('data') || el.getAttribute('formaction') || 'srcdoc')
              .filter((u) => /^\\s*(javascript|data:text|vbscript)|srcdoc/i.test(u)),
          frames: document.querySelectorAll('iframe, object, embed, frame, base, meta[http-equiv], form').length,
          links: [...document.querySelectorAll('.md a[href]')].map((a) => [a.target, a.rel]),
          headerText: document.querySelector('section.question .q-header')?.textContent || '',
        };
    }""")
    assert rendered["blocks"] > len(SCRIPT_MARKDOWN)  # the markdown did render
    assert rendered["scripts"] == 0 and rendered["handlers"] == [], rendered
    assert rendered["badUrls"] == [] and rendered["frames"] == 0, rendered
    assert rendered["links"] and all(t == "_blank" and "noopener" in r and "noreferrer" in r
                                     for t, r in rendered["links"]), rendered["links"]
    assert "<script>" in rendered["headerText"]  # headers are text, shown as typed
    violations = page.evaluate("window.__csp")
    assert not [v for v in violations if v.startswith("script-src")], violations
    # A link in the form opens in a new tab and tells the target nothing about the form's URL.
    with context.expect_page() as popup:
        page.locator(".md a[href='%s']" % referer_url).first.click()
    popup.value.wait_for_load_state()
    visits = [headers for path, headers in attacker.seen if path == "/referer-check"]
    assert visits, "the link was not followed"
    assert all("Referer" not in headers and form.token not in json.dumps(headers) for headers in visits)
    assert popup.value.evaluate("window.opener") is None
