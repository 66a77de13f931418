"""Screenshots of the form, for a person to look at and for the README.

    python3 tests/browser/screenshots.py

writes the question, rank, review and done screens in light and dark, at desktop and 360 px
phone widths, into tests/.artifacts/screenshots/ (git-ignored), and refreshes the README's three
(a question with a preview, a rank question, the review screen) in assets/screenshots/.
It drives the real form server in-process and Debian's Chromium, like the browser tests.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import askrich  # noqa: E402
from formkit import CHROMIUM, CHROMIUM_ARGS, DESKTOP, PHONE  # noqa: E402

OUT = ROOT / "tests" / ".artifacts" / "screenshots"
README_SHOTS = ROOT / "assets" / "screenshots"

SPEC = {
    "title": "Storage for the sync service",
    "intro": "Five decisions before I write the migration plan. Each has my recommendation; "
             "defer anything you want to think about.",
    "questions": [
        {
            "id": "db", "header": "Which database should the sync service use?",
            "body": "The service stores **about 2 GB** of job state and needs transactions.",
            "options": [
                {"id": "pg", "label": "Postgres",
                 "description": "Already run by the platform team; backups are in place.",
                 "preview": "```yaml\ndatabase:\n  driver: postgres\n  url: ${SYNC_DB_URL}\n  pool: 10\n```"},
                {"id": "sqlite", "label": "SQLite", "description": "One file next to the service; no server to run.",
                 "preview": "```yaml\ndatabase:\n  driver: sqlite\n  path: /var/lib/sync/state.db\n```"},
                {"id": "dynamo", "label": "DynamoDB", "description": "Managed, but a new dependency for this team."},
            ],
            "recommended": "pg",
            "rationale": "We already operate it, and the job table needs row locks.",
        },
        {
            "id": "goals", "kind": "rank", "header": "Rank the goals for the first release",
            "options": [
                {"id": "safety", "label": "No lost jobs", "description": "Every job survives a restart."},
                {"id": "speed", "label": "Throughput", "description": "10k jobs a minute."},
                {"id": "cost", "label": "Running cost"},
                {"id": "ops", "label": "Easy to operate", "description": "One dashboard, clear alerts."},
            ],
            "recommended": ["safety", "ops", "speed", "cost"],
            "rationale": "Lost jobs are the one failure users notice at once.",
            "dependsOn": ["db"],
        },
        {
            "id": "features", "header": "Which extras belong in the first release?", "multiSelect": True,
            "options": [
                {"id": "retry", "label": "Automatic retries"},
                {"id": "ui", "label": "Status page"},
                {"id": "export", "label": "CSV export"},
            ],
            "recommended": ["retry", "ui"],
        },
        {
            "id": "parser", "header": "Upgrade the schedule parser?",
            "options": [
                {"id": "up", "label": "Upgrade", "textInput": {"placeholder": "link to the release notes", "required": True}},
                {"id": "keep", "label": "Keep the current one"},
            ],
        },
        {"id": "else", "header": "Anything else I should know?", "options": []},
    ],
}


def answer_some(page):
    """A half-finished round, so the rail and the review show every status."""
    kb = page.keyboard
    for key in ["ArrowRight", "1", "n"]:
        kb.press(key)
    kb.type("We run it already for billing.")
    for key in ["Escape", "ArrowRight", "ArrowDown", "Space", "ArrowDown", "ArrowDown", "Space",
                "ArrowRight", "r", "ArrowRight", "d", "ArrowRight", "i"]:
        kb.press(key)
    kb.type("Depends on the hosting budget.")
    kb.press("Escape")


def shoot(browser, url, scheme, viewport, tag, readme):
    context = browser.new_context(viewport=viewport, color_scheme=scheme, reduced_motion="reduce")
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("body.ready")
    def snap(name):
        page.evaluate("document.fonts.ready.then(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))))")
        path = OUT / f"{name}-{scheme}-{tag}.png"
        page.screenshot(path=str(path))
        if readme and name in readme:
            README_SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(README_SHOTS / f"{name}.png"))
        return path

    page.keyboard.press("ArrowRight")
    page.locator('section[data-qid="db"] li.opt[data-opt="pg"] label').click()
    page.mouse.move(0, 0)
    snap("question")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Space")
    page.keyboard.press("ArrowDown")
    snap("rank")
    page.keyboard.press("Space")
    page.evaluate("localStorage.clear()")
    page.reload()
    page.wait_for_selector("body.ready")
    page.keyboard.press("Home")
    answer_some(page)
    page.keyboard.press("End")
    snap("review")
    page.keyboard.press("a")
    page.locator("#btn-submit").click()
    if page.locator(".review .confirm").is_visible():
        page.locator("#btn-submit").click()
    page.wait_for_selector("section.end")
    snap("done")
    context.close()


def main() -> int:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as logs, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        rt = askrich.Runtime(askrich.Config(log_dir=logs, open_browser=False))
        try:
            for scheme in ("light", "dark"):
                for tag, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
                    interview = rt.open_interview(SPEC)
                    readme = {"question", "rank", "review"} if (scheme, tag) == ("light", "desktop") else None
                    shoot(browser, rt.form_url(interview), scheme, viewport, tag, readme)
        finally:
            rt.close()
            browser.close()
    print(f"screenshots written to {OUT}")
    print(f"README screenshots refreshed in {README_SHOTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
