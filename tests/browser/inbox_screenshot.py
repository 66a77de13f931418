"""A screenshot of the inbox, for a person to look at and for the README.

    python3 tests/browser/inbox_screenshot.py

starts three real server processes (three agents, each in a folder of its own) on one private
log folder and a free port, has them ask, answer a little and append a follow-up, then writes
the inbox in light and dark, at desktop and 360 px phone widths, into
tests/.artifacts/screenshots/ (git-ignored), and refreshes assets/screenshots/inbox.png.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(HERE))

from formkit import CHROMIUM, CHROMIUM_ARGS, PHONE  # noqa: E402
from helpers.inbox_support import Agent, inbox_events, free_port, read_key  # noqa: E402
from helpers.support import http_request  # noqa: E402

OUT = ROOT / "tests" / ".artifacts" / "screenshots"
README_SHOT = ROOT / "assets" / "screenshots" / "inbox.png"
WIDE = {"width": 900, "height": 470}


def main() -> int:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with tempfile.TemporaryDirectory() as scratch:
        logs = Path(scratch) / "logs"
        home = Path(scratch) / "code"
        agents = []
        try:
            agents.append(Agent(logs, port, "claude-code", home / "web-app", "Storage for the sync service", 12))
            agents[0].server.log.wait_for("inbox-holding")
            agents.append(Agent(logs, port, "codex", home / "api-server", "API versioning and deprecations", 5))
            agents.append(Agent(logs, port, "gemini-cli", home / "docs-site", "Docs navigation", 3))
            progress = agents[0].url.replace("/s/", "/api/s/") + "/progress"
            http_request(progress, "POST", {"answered": 7, "deferred": 1, "needsInfo": 0, "open": 4,
                                            "followUpsUnseen": 0})
            agents[1].server.tool("append_questions", {"sessionId": agents[1].session, "questions": [
                {"id": "sunset", "header": "When does v1 stop answering?"},
                {"id": "notice", "header": "How do we tell clients?"}]})
            key = read_key(logs)
            stream = inbox_events(port, key)
            stream.wait_for(lambda l: len(l["interviews"]) == 3
                            and l["interviews"][0]["answered"] == 7
                            and l["interviews"][1]["followUpsUnseen"] == 2)
            stream.close()
            url = "http://localhost:%d/inbox/%s" % (port, key)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                try:
                    for scheme in ("light", "dark"):
                        for tag, viewport in (("desktop", WIDE), ("phone", PHONE)):
                            context = browser.new_context(color_scheme=scheme, viewport=viewport, locale="en-US")
                            page = context.new_page()
                            page.goto(url)
                            page.wait_for_function("() => document.querySelectorAll('#inbox-list > li').length === 3")
                            name = "inbox-%s-%s" % (scheme, tag)
                            page.screenshot(path=str(OUT / (name + ".png")), full_page=tag == "phone")
                            if (scheme, tag) == ("light", "desktop"):
                                page.screenshot(path=str(README_SHOT))
                            context.close()
                finally:
                    browser.close()
        finally:
            for agent in agents:
                agent.close()
    print(f"screenshots written to {OUT}")
    print(f"README screenshot refreshed: {README_SHOT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
