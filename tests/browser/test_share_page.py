""""Open on another device" (tests/README.md, "The front door"): with a public URL set, the form's
header and the inbox offer a QR code of the address through the person's tunnel, drawn in the
page. At 360 px in English, Japanese and Arabic; the code is read back from a screenshot with
zbarimg (Debian's zbar-tools), and the inbox's code opens the inbox on a second browser."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from playwright.sync_api import expect

from formkit import PHONE, WATCH_CSP, askrich  # noqa: E402
from helpers.inbox_support import free_port, read_key  # noqa: E402
from helpers.support import WAIT, form_strings, http_request, quiet_runtime, submit, watched_runtime  # noqa: E402
from test_languages import LANGUAGES, spec_in  # noqa: E402

ZBARIMG = shutil.which("zbarimg")


@pytest.fixture
def public_rt(tmp_path):
    """A process holding the door, with a public URL its pages are opened at."""
    port = free_port()
    rt = watched_runtime(tmp_path / "logs", inbox_port=port, public_url="http://127.0.0.1:%d" % port)
    yield rt
    rt.close()


def read_code(locator, path) -> str:
    """What a QR scanner reads in the element's picture."""
    locator.screenshot(path=str(path))
    if ZBARIMG is None:
        if os.environ.get("ASK_USER_RICH_TESTS_REQUIRE_CHROMIUM") == "1":  # tests/run.sh installed it
            pytest.fail("zbarimg is missing but tests/run.sh should have installed zbar-tools")
        pytest.skip("zbarimg is not installed (tests/run.sh installs zbar-tools)")
    return subprocess.run([ZBARIMG, "--raw", "-q", str(path)], stdout=subprocess.PIPE, check=True,
                          timeout=WAIT).stdout.decode().strip()


@pytest.mark.parametrize("locale, tag", [("en-US", "en"), ("ja-JP", "ja"), ("ar", "ar")])
def test_the_form_and_the_inbox_offer_their_address_as_a_qr_code_at_360_px(browser, public_rt, tmp_path, shot,
                                                                          locale, tag):
    form = public_rt.open_interview({"title": "On the phone", "language": tag,
                                     "questions": [{"id": "q", "header": "Ready?"}]})
    public = public_rt.config.public_url
    assert public_rt.form_url(form).startswith(public + "/s/")
    public_rt.watch.wait_for("inbox-holding")
    context = browser.new_context(viewport=PHONE, locale=locale)
    context.add_init_script(WATCH_CSP)
    context.set_default_timeout(WAIT * 1000)
    try:
        page = context.new_page()
        page.goto(public_rt.form_url(form))
        page.wait_for_selector("body.ready[data-live]")
        button = page.locator("#btn-share")
        expect(button).to_be_visible()
        button.click()
        dialog = page.locator("#share")
        expect(dialog).to_be_visible()
        assert read_code(dialog.locator(".share-code"), tmp_path / "form-code.png") == public_rt.form_url(form)
        assert dialog.locator(".share-url").text_content() == public_rt.form_url(form)
        words = askrich.json.loads(Path(askrich.__file__).with_name("assets").joinpath(
            "i18n", "%s.json" % tag).read_text(encoding="utf-8"))
        expect(dialog.locator("#share-title")).to_have_text(words["share.title"])
        shot(page, "share-form-%s-phone" % tag)
        page.keyboard.press("Escape")
        expect(dialog).to_be_hidden()

        page.goto("%s/inbox/%s" % (public, read_key(public_rt.config.log_dir)))
        expect(page.locator("#inbox-list li")).to_have_count(1)
        page.locator("#btn-share").click()
        ticket = read_code(page.locator("#share .share-code"), tmp_path / "inbox-code.png")
        assert ticket.startswith(public + "/inbox/enter/")
        shot(page, "share-inbox-%s-phone" % tag)
        assert page.evaluate("window.__csp") == []
    finally:
        context.close()
    # The code opens the inbox on another device: a browser of its own, no key, no cookie: the session is that tab's.
    phone = browser.new_context(viewport=PHONE)
    try:
        other = phone.new_page()
        other.goto(ticket)
        expect(other.locator("#inbox-list li")).to_have_count(1)
        assert other.url == public + "/inbox"
    finally:
        phone.close()
    assert http_request(ticket, "POST").status == 404  # used once


def test_without_a_public_url_nothing_is_offered(tmp_path):
    port = free_port()
    rt = quiet_runtime(tmp_path / "logs", inbox_port=port)
    try:
        form = rt.open_interview({"title": "Here", "questions": [{"id": "q", "header": "Ready?"}]})
        state = http_request(rt.form_url(form).replace("/s/", "/api/s/") + "/state").json()
        assert "share" not in state
        key = read_key(tmp_path / "logs")
        assert "share" not in http_request("http://127.0.0.1:%d/api/inbox/%s" % (port, key)).json()
        assert http_request("http://127.0.0.1:%d/api/inbox/%s/share" % (port, key)).status == 404
    finally:
        rt.close()



# The header's height (title, tools, rail) and the rows its tools take.
HEADER = """() => ({
  height: Math.round(document.getElementById('bar').getBoundingClientRect().height),
  rows: new Set([...document.querySelectorAll('#bar .tools .tool')].filter((el) => el.offsetParent !== null)
    .map((el) => Math.round(el.getBoundingClientRect().top))).size,
})"""


def test_the_phone_header_with_the_share_button_is_no_taller_in_any_language_than_in_english(browser, public_rt):
    """Where a phone opens the form (a public URL set), "Other device" in French or Russian
    words used to push Skip onto a row of its own. In both views, one interview at a time (each
    is skipped before the next opens, so no "N more waiting" link joins the header)."""
    context = browser.new_context(viewport=PHONE)
    context.add_init_script(WATCH_CSP)
    context.set_default_timeout(WAIT * 1000)
    heights, names = {}, {}
    try:
        page = context.new_page()
        for tag in LANGUAGES:
            form = public_rt.open_interview(spec_in(tag))
            url = public_rt.form_url(form)
            page.goto(url)
            page.wait_for_selector("body.ready[data-live]")
            expect(page.locator("#btn-share")).to_be_visible()
            heights[tag] = [page.evaluate(HEADER)]
            page.locator("#btn-view").click()
            heights[tag].append(page.evaluate(HEADER))
            names[tag] = page.locator("#btn-share").evaluate("(el) => [el.textContent, el.title]")
            assert submit(url, {}, declined=True).status == 200
        assert page.evaluate("window.__csp") == []
    finally:
        context.close()
    english = heights["en"]
    assert [view["rows"] for view in english] == [1, 1]
    tallest = max(view["height"] for view in english)
    taller = {tag: views for tag, views in heights.items() if max(v["height"] for v in views) > tallest * 1.1}
    assert taller == {}, "English: %s" % english
    # The symbol stands in for the words on screen only: the button is still named by them.
    assert names == {tag: [form_strings(tag)["share.button"], form_strings(tag)["share.title"]] for tag in LANGUAGES}
