"""Every screen kind: accessibility (axe-core) in light and dark, the 360 px phone and 200 %
zoom layouts with nothing cut off, and markdown that carries script staying inert."""
import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from formkit import PHONE

AXE = Axe()

# Reaching each screen kind from a fresh page of rich_spec.
SCREENS = {
    "intro": [],
    "question-with-preview": ["ArrowRight"],
    "rank": ["ArrowRight", "ArrowRight"],
    "multi": ["ArrowRight", "ArrowRight", "ArrowRight"],
    "text-input": ["ArrowRight", "ArrowRight", "ArrowRight", "ArrowRight", "1"],
    "free-text": ["End", "ArrowLeft"],
    "review": ["End", "a"],
    "help": ["?"],
}


def reach(f, name):
    for key in SCREENS[name]:
        f.press(key)
    if name == "show-all":
        f.press("v")
    f.settle()


def serious_violations(page):
    results = AXE.run(page)
    bad = [v for v in results.response["violations"] if v["impact"] in ("serious", "critical")]
    return [(v["id"], v["help"], [n["target"] for n in v["nodes"]][:5]) for v in bad]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("name", list(SCREENS) + ["show-all", "done", "follow-up"])
def test_axe_finds_no_serious_violations(form, rich_spec, name, scheme, shot):
    f = form(rich_spec, color_scheme=scheme)
    if name == "done":
        f.press("End", "a", "Enter", "Enter")
        f.page.wait_for_selector("section.end")
    elif name == "follow-up":
        f.press("ArrowRight")
        f.rt.append_questions(f.interview.id, [{"id": "late", "header": "Late one", "options": [
            {"id": "y", "label": "Yes"}, {"id": "n", "label": "No"}]}], note="One **more**")
        f.page.wait_for_selector('#rail li[data-qid="late"]')
        f.press("g")
    elif name == "show-all":
        f.press("v")
    else:
        reach(f, name)
    # Scan the settled screen: mid-slide its text is still fading in, which axe reads as low contrast.
    f.settle()
    shot(f.page, f"{name}-{scheme}-desktop")
    assert serious_violations(f.page) == []


def clipped(page):
    """Visible elements that stick out of the viewport sideways, outside scrollable boxes."""
    return page.evaluate("""(() => {
        const vw = document.documentElement.clientWidth;
        const out = [];
        const scrolls = (el) => { for (let p = el.parentElement; p; p = p.parentElement) {
            const o = getComputedStyle(p).overflowX; if (o === 'auto' || o === 'scroll') return true; } return false; };
        for (const el of document.querySelectorAll('body *')) {
            if (el.closest('dialog:not([open]), template, .sr-only')) continue;
            const r = el.getBoundingClientRect();
            if (!r.width || !r.height) continue;
            if ((r.right > vw + 0.5 || r.left < -0.5) && !scrolls(el)) out.push(el.tagName + '.' + el.className + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
        }
        return {vw, scrollWidth: document.documentElement.scrollWidth, out: out.slice(0, 10)};
    })()""")


@pytest.mark.parametrize("viewport", [PHONE, {"width": 550, "height": 430}], ids=["phone-360", "zoom-200"])
def test_nothing_is_cut_off_on_small_screens(form, rich_spec, viewport, shot):
    rich_spec["questions"][0]["options"][0]["preview"] = (
        "```\n" + "a_very_long_line_of_code_that_does_not_wrap() " * 4 + "\n```")
    rich_spec["questions"][0]["header"] = "Which database should the service use for " + "storage " * 12
    f = form(rich_spec, viewport=viewport)
    for name in ["intro", "question-with-preview", "rank", "text-input", "free-text", "review", "help"]:
        f.reload()
        f.press("Home")
        if f.page.locator("#help").is_visible():
            f.press("Escape")
        reach(f, name)
        shot(f.page, f"{name}-light-{viewport['width']}px")
        report = clipped(f.page)
        assert report["scrollWidth"] <= report["vw"], (name, report)
        assert report["out"] == [], (name, report)
        if name == "help":
            f.press("Escape")
    # The footer's buttons stay on screen and usable.
    f.press("Home")
    expect(f.page.locator("#btn-next")).to_be_in_viewport()
    f.page.evaluate("localStorage.clear()")  # the text-input step left a required field empty
    f.reload()
    f.press("End", "a", "Enter", "Enter")
    f.page.wait_for_selector("section.end")
    assert clipped(f.page)["out"] == []


XSS = (
    "Inline <script>window.__pwned = 'script'</script> and "
    "<img src=x onerror=\"window.__pwned = 'onerror'\"> and "
    "[click me](javascript:window.__pwned='link') and "
    "<a href=\"javascript:window.__pwned='a'\">raw link</a> and "
    "<iframe src=\"javascript:window.__pwned='iframe'\"></iframe> and "
    "<svg><script>window.__pwned='svg'</script></svg> and "
    "[a real link](https://example.com/docs) and ![remote](https://example.com/x.png)"
)


def test_markdown_with_script_and_handlers_renders_inert(form):
    spec = {
        "title": "XSS",
        "intro": XSS,
        "questions": [{
            "id": "x", "header": "<b>Header</b> <script>window.__pwned='header'</script>", "body": XSS,
            "options": [{"id": "a", "label": "<img src=x onerror=alert(1)>", "description": XSS, "preview": XSS}],
            "recommended": "a", "rationale": XSS,
        }],
    }
    f = form(spec)
    f.rt.append_questions(f.interview.id, [{"id": "y", "header": "more", "options": []}], note=XSS)
    f.page.wait_for_selector('#rail li[data-qid="y"]')
    f.press("v")
    page = f.page
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.querySelectorAll('#main script, #notices script, #main iframe').length") == 0
    handlers = page.evaluate("""[...document.querySelectorAll('*')].flatMap(el =>
        [...el.attributes].filter(a => a.name.startsWith('on')).map(a => el.tagName + ' ' + a.name))""")
    assert handlers == []
    js_links = page.evaluate("""[...document.querySelectorAll('a[href]')].filter(a =>
        a.href.trim().toLowerCase().startsWith('javascript:')).length""")
    assert js_links == 0
    real = page.locator("a[href='https://example.com/docs']").first
    assert real.get_attribute("target") == "_blank"
    assert real.get_attribute("rel") == "noopener noreferrer"
    # Headers and labels are text, never markup.
    expect(f.section("x").locator(".q-header")).to_contain_text("<b>Header</b>")
    expect(f.option("x", "a").locator("xpath=..")).to_contain_text("<img src=x onerror=alert(1)>")
    # A remote image becomes a link to it (the page may load images only from itself).
    assert page.evaluate("document.querySelectorAll('#main img').length") == 0
    # Clicking every inert link runs nothing either.
    for link in page.locator("#main a:not([href])").all():
        link.click()
    assert page.evaluate("window.__pwned") is None


@pytest.mark.parametrize("forced, os_scheme", [("dark", "light"), ("light", "dark")])
def test_a_forced_theme_passes_axe_whatever_the_os_says(form, rich_spec, forced, os_scheme):
    f = form(rich_spec, color_scheme=os_scheme)
    while f.page.locator("#btn-theme").inner_text() != f"Theme: {forced}":
        f.page.locator("#btn-theme").click()
    for name in ["question-with-preview", "rank", "review"]:
        f.press("Home")
        reach(f, name)
        assert serious_violations(f.page) == [], name
