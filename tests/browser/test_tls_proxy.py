"""The front door behind a real TLS reverse proxy (README "Agents on another machine"): nginx
from Debian with a certificate openssl makes for `devbox.test`, ASK_USER_RICH_PUBLIC_URL set to
it, and Chromium told that the name is this machine (`--host-resolver-rules`), answering a form
over https; the same door refuses a Host that is not the tunnel's."""
from __future__ import annotations

import os

import pytest

from formkit import CHROMIUM, CHROMIUM_ARGS, DESKTOP, WATCH_CSP  # noqa: E402
from helpers.inbox_support import Agent, free_port  # noqa: E402
from helpers.support import WAIT, http_request  # noqa: E402
from helpers.tunnels_support import NGINX, PROXY_SHAPES, TlsProxy  # noqa: E402

NAME = "devbox.test"
pytestmark = pytest.mark.skipif(
    not os.path.exists(NGINX) and os.environ.get("ASK_USER_RICH_TESTS_REQUIRE_CHROMIUM") != "1",
    reason="nginx is not installed (tests/run.sh installs it)")


@pytest.mark.parametrize("shape", sorted(PROXY_SHAPES))
def test_a_form_answered_in_chromium_through_nginx_with_tls_and_the_public_url(tmp_path, shape):
    """Each way in's shape of request (PROXY_SHAPES): the public Host kept with X-Forwarded-*
    added (Tailscale Serve, cloudflared), or the Host rewritten to localhost:<port> while the
    browser's Origin is the public one (VS Code / Codespaces port forwarding)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip("Chromium is not installed")
    from playwright.sync_api import sync_playwright

    door = free_port()
    proxy = TlsProxy(tmp_path / "nginx", NAME, door, shape)
    public = "https://%s:%d" % (NAME, proxy.port)
    agent = None
    try:
        agent = Agent(tmp_path / "logs", door, "claude-code", tmp_path / "p", "Through TLS",
                      questions=1, env={"ASK_USER_RICH_PUBLIC_URL": public})
        assert agent.url.startswith(public + "/s/")
        # At the door itself: the tunnel's name is accepted, another name is not.
        local = "http://127.0.0.1:%d/api/s/%s/state" % (door, agent.url.rsplit("/", 1)[1])
        assert http_request(local, headers={"Host": "%s:%d" % (NAME, proxy.port)}).status == 200
        assert http_request(local, headers={"Host": "devbox.example"}).status == 403
        # Through the proxy, whatever Host it gives: the Origin is still checked at the door.
        tunneled = "https://127.0.0.1:%d/api/s/%s/progress" % (proxy.port, agent.url.rsplit("/", 1)[1])
        counts = {"answered": 0, "deferred": 0, "needsInfo": 0, "open": 1}
        assert tls_request(tunneled, counts, public).status == 204
        assert tls_request(tunneled, counts, "https://devbox.example").status == 403
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS + [
                "--host-resolver-rules=MAP %s 127.0.0.1" % NAME])
            try:
                context = browser.new_context(viewport=DESKTOP, ignore_https_errors=True)
                context.add_init_script(WATCH_CSP)
                context.set_default_timeout(WAIT * 1000)
                page = context.new_page()
                page.goto(agent.url)
                page.wait_for_selector('body.ready[data-live]')  # the events stream came through
                page.locator('section.question[data-qid="q1"] li.opt[data-opt="a"] input.opt-input').check()
                page.keyboard.press("Escape")
                page.keyboard.press("End")
                page.locator("#btn-submit").click()
                page.wait_for_selector("section.end")
                assert page.evaluate("window.__csp") == []
            finally:
                browser.close()
        result = agent.server.tool("await_user_answers", {"sessionId": agent.session})
        assert result["result"]["structuredContent"]["answers"][0]["selected"] == ["a"]
    finally:
        if agent is not None:
            agent.close()
        proxy.close()


def tls_request(url: str, body: dict, origin: str):
    """A POST through the proxy as a page at `origin` makes it (the certificate is the test's own)."""
    import http.client
    import json
    import ssl
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=WAIT,
                                             context=ssl._create_unverified_context())
    try:
        connection.request("POST", parts.path, json.dumps(body).encode(), {
            "Host": "%s:%d" % (NAME, parts.port), "Origin": origin, "Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        return response
    finally:
        connection.close()
