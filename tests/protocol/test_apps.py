"""MCP Apps (the form inside the host), in both protocol eras: the negotiation, the form's
resource as one self-contained document, the tool hints, the app-only tools listed only to a
client that declared the extension, the call that returns at once, and every app-only tool's
success and refusal, with the codes of the HTTP routes it shares its code with."""

from __future__ import annotations

import base64
import json
import os
import re
import sys

import pytest

import askrich
from helpers.modern_support import call_modern, result_of
from helpers.support import api_url, choice, http_request, interview

UI = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"
URI = "ui://ask-user-rich/form.html"
APPS = {"extensions": {UI: {"mimeTypes": [MIME]}}}
APP_META = "ask-user-rich/app"
APP_TOOLS = ["form_state", "form_submit", "form_progress", "form_attach", "form_detach"]
MODEL_TOOLS = ["ask_user_rich", "append_questions", "await_user_answers"]


class Client:
    """One client of either era, with or without the extension: `call` sends a request as that
    client would, `tool` calls a tool and returns its result."""

    def __init__(self, server, era: str, capabilities: dict) -> None:
        self.server, self.era, self.capabilities = server, era, capabilities
        if era == "legacy":
            server.initialize(capabilities=capabilities)

    def call(self, method, params=None):
        if self.era == "legacy":
            return self.server.call(method, params)
        return call_modern(self.server, method, params, capabilities=self.capabilities)

    def tool(self, name, arguments):
        return result_of(self.call("tools/call", {"name": name, "arguments": arguments}))


@pytest.fixture(params=["legacy", "modern"])
def era(request):
    return request.param


@pytest.fixture
def host(server, era):
    return Client(server, era, APPS)


@pytest.fixture
def plain(server, era):
    return Client(server, era, {})


def ask(host, *questions, **extra):
    """ask_user_rich from a host: the interview's sessionId, token and the app's key (which
    only the result's _meta carries)."""
    result = host.tool("ask_user_rich", interview(*questions, **extra))
    shown, app = result["structuredContent"], result["_meta"][APP_META]
    assert (app["sessionId"], app["token"]) == (shown["sessionId"], shown["url"].rsplit("/s/", 1)[1])
    return app["sessionId"], app["token"], app["key"]


def form(host, tool, session, **fields):
    """An app-only tool's result: (status, JSON body, isError); the status is the body's
    statusCode, as in _meta."""
    key = {"appKey": session[2]} if len(session) > 2 else {}
    result = host.tool(tool, dict({"sessionId": session[0], "token": session[1]}, **key, **fields))
    body = result["structuredContent"]
    assert json.loads(result["content"][0]["text"]) == body
    assert body["statusCode"] == result["_meta"]["ask-user-rich/status"]
    return body["statusCode"], body, result.get("isError", False)


# -- negotiation ----------------------------------------------------------------------------


def test_both_eras_declare_resources_and_the_apps_extension(server):
    legacy = server.initialize()["result"]["capabilities"]
    modern = result_of(call_modern(server, "server/discover"))["capabilities"]
    for capabilities in (legacy, modern):
        assert capabilities["resources"] == {} and capabilities["extensions"][UI] == {}


def test_a_declaring_client_sees_the_resource_the_tool_hint_and_the_app_only_tools(host):
    listed = result_of(host.call("tools/list"))
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert list(tools) == MODEL_TOOLS + APP_TOOLS
    assert tools["ask_user_rich"]["description"].endswith(
        'call await_user_answers when the user says they have answered, or at once to wait.')
    meta = tools["ask_user_rich"]["_meta"]
    assert meta["ui"] == {"resourceUri": URI} and meta["ui/resourceUri"] == URI
    assert meta["anthropic/maxResultSizeChars"] == 500000  # Claude Code's hints stay
    for name in APP_TOOLS:
        assert tools[name]["_meta"]["ui"] == {"resourceUri": URI, "visibility": ["app"]}
        assert tools[name]["inputSchema"]["required"][:3] == ["sessionId", "token", "appKey"]
    for name in ("append_questions", "await_user_answers"):
        assert "ui" not in tools[name]["_meta"]
    resources = result_of(host.call("resources/list"))
    assert resources["resources"] == [{
        "uri": URI, "name": "ask-user-rich-form", "title": "Ask User Rich form",
        "description": askrich.APP_RESOURCE["description"], "mimeType": MIME,
        "_meta": {"ui": {"prefersBorder": True, "csp": {"resourceDomains": ["data:"]}}},
    }]
    if host.era == "modern":
        # Both lists depend on the caller's extensions: no shared cache may pass them on.
        for result in (listed, resources):
            assert result["cacheScope"] == "private" and result["ttlMs"] > 0


@pytest.mark.parametrize("capabilities", [{}, {"extensions": {UI: {}}}, {"extensions": {UI: {"mimeTypes": ["text/html"]}}}])
def test_a_client_without_the_extension_or_its_mime_type_sees_none_of_it(server, era, capabilities):
    client = Client(server, era, capabilities)
    tools = result_of(client.call("tools/list"))["tools"]
    assert [tool["name"] for tool in tools] == MODEL_TOOLS
    assert all("ui" not in tool["_meta"] and "ui/resourceUri" not in tool["_meta"] for tool in tools)
    assert result_of(client.call("resources/list"))["resources"] == []
    refused = client.call("tools/call", {"name": "form_state", "arguments": {"sessionId": "0" * 12, "token": "x"}})
    assert refused["error"]["code"] == -32602
    # ask_user_rich blocks as before: with no browser here, it returns the link.
    result = client.tool("ask_user_rich", interview())["structuredContent"]
    assert result["status"] == "awaiting" and result["reason"].startswith("Could not open the browser")


# -- the resource ---------------------------------------------------------------------------


def test_the_resource_is_one_self_contained_document_with_every_language(host, era):
    result = result_of(host.call("resources/read", {"uri": URI}))
    (content,) = result["contents"]
    assert content["uri"] == URI and content["mimeType"] == MIME
    assert content["_meta"] == {"ui": {"prefersBorder": True, "csp": {"resourceDomains": ["data:"]}}}
    page = content["text"]
    assert page.startswith("<!doctype html>") or page.lower().startswith("<!doctype html>")
    assert_self_contained(page)
    data = re.search(r'<script type="application/json" id="askrich-app">(.*?)</script>', page, re.S).group(1)
    assert sorted(json.loads(data)["languages"]) == sorted(askrich.FORM_LANGUAGES)
    assert "DOMPurify" in page and "marked" in page  # the vendored libraries, inline
    if era == "modern":
        assert result["cacheScope"] == "public" and result["ttlMs"] > 0  # one document for all
    missing = host.call("resources/read", {"uri": "ui://ask-user-rich/other.html"})
    assert missing["error"]["code"] == -32002


def assert_self_contained(page: str) -> None:
    """No script, style, image or frame the browser would fetch: the host's CSP allows none.
    (marked's and DOMPurify's code holds such words in strings, so scripts are read apart.)"""
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", page, re.S)
    markup = re.sub(r"(<script\b[^>]*>).*?</script>", r"\1</script>", page, flags=re.S)
    (style,) = re.findall(r"<style>(.*?)</style>", markup, re.S)
    assert not re.search(r"<script[^>]*\bsrc=", markup, re.I)
    assert not re.search(r"<link[^>]*\bhref=\"(?!data:)", markup, re.I)
    assert not re.search(r"<link[^>]*\brel=\"icon\"", markup, re.I)  # a data: favicon is an image request too
    assert not re.search(r"\b(src|srcset|poster|data)=\"(?!data:)", markup, re.I)
    assert not re.search(r"@import|url\((?!\s*[\"']?data:)", style, re.I)
    for script in scripts:
        assert not re.search(r"\bimport\s*\(|^\s*import\s|^\s*export\s|from\s+\"[./]", script, re.M)
        assert "sourceMappingURL" not in script


def test_the_zipapp_serves_the_document_a_checkout_builds(tmp_path_factory, tmp_path):
    from helpers import zipapp_support as zs

    pyz = zs.shared_pyz(tmp_path_factory)
    child = zs.StdioChild([sys.executable, pyz], tmp_path, zs.child_env(tmp_path))
    try:
        child.initialize()
        (content,) = child.result("resources/read", {"uri": URI})["contents"]
    finally:
        child.close()
    tree = zs.shared_tree(tmp_path_factory)
    with open(os.path.join(tree, "askrich.py"), "rb") as source:
        assert b"def build_app_document" in source.read()
    built = askrich.build_app_document(lambda name: open(os.path.join(tree, "assets", name), "rb").read())
    assert content["text"] == built.decode("utf-8")


def test_the_builder_refuses_what_it_could_not_inline():
    sources = {"js/main.js": b'import { a } from "./b.js";\n', "js/b.js": b'import { m } from "./main.js";\nexport const a = 1;\n'}
    with pytest.raises(ValueError, match="cycle"):
        askrich.app_module_order(sources.__getitem__)
    with pytest.raises(ValueError, match="export"):
        askrich.app_module_body("js/x.js", "export let a = 1;\n", {})
    with pytest.raises(ValueError, match="inline"):
        askrich.app_module_order({"js/main.js": b'import x from "https://cdn.example/x.js";\n'}.__getitem__)
    with pytest.raises(ValueError, match="cannot inline"):
        askrich.app_module_body("js/x.js", 'export * from "./y.js";\n', {})
    assert askrich.app_module_body("js/x.js", "const a = 1;\nexport default a;\n", {}).endswith("return { default: __default };")


# -- the call -------------------------------------------------------------------------------


def test_the_call_returns_at_once_and_tells_the_model_what_to_do(host, server):
    result = host.tool("ask_user_rich", interview(title="Plan"))
    shown = result["structuredContent"]
    assert shown["status"] == "awaiting" and shown["reason"] == "Shown in the conversation."
    assert re.fullmatch(r"[0-9a-f]{12}", shown["sessionId"]) and "/s/" in shown["url"]
    text = result["content"][0]["text"]
    assert "form shown in the conversation" in text and shown["url"] in text
    assert 'await_user_answers with sessionId "%s"' % shown["sessionId"] in text
    assert "when the user says they have answered" in text.lower() and "call it now to wait" in text
    # Nothing was opened: the host shows the form.
    assert server.runtime.hub.get(shown["sessionId"]).activity()["pageViews"] == 0


def test_link_and_elicitation_deliveries_keep_their_own_behaviour_in_a_host(host):
    shown = host.tool("ask_user_rich", interview(delivery="link"))["structuredContent"]
    assert shown["reason"] == "Browser opening was skipped (delivery=link)."


# -- the app-only tools -----------------------------------------------------------------------


def test_form_state_answers_as_its_routes_and_refuses_a_wrong_token(host):
    session = ask(host, choice("db", "pg", "my"))
    status, body, error = form(host, "form_state", session)
    assert (status, error) == (200, False)
    assert {key: body[key] for key in ("state", "waiting", "version")} == {"state": "pending", "waiting": False, "version": 1}
    status, body, _ = form(host, "form_state", session, full=True)
    assert body["id"] == session[0] and [q["id"] for q in body["spec"]["questions"]] == ["db"]
    for wrong in ((session[0], "x" * 24), ("0" * 12, session[1])):
        status, body, error = form(host, "form_state", wrong)
        assert (status, body["code"], error) == (404, "not-found", True)
    status, body, error = form(host, "form_state", (session[0], None))
    assert (status, body["code"], error) == (400, "bad-request", True)


def test_form_progress_records_the_counts_and_refuses_bad_ones(host, server):
    session = ask(host, choice("a", "x"), choice("b", "x"))
    status, body, error = form(host, "form_progress", session, answered=1, deferred=0, needsInfo=0, open=1)
    assert (status, body, error) == (204, {"statusCode": 204}, False)
    assert server.runtime.hub.get(session[0]).activity()["counts"] == {"answered": 1, "deferred": 0, "needsInfo": 0, "open": 1}
    status, body, error = form(host, "form_progress", session, answered=-1)
    assert (status, body["code"], error) == (422, "invalid-progress", True)


def test_form_submit_checks_like_the_route_and_the_first_submit_wins(host, server):
    session = ask(host, choice("db", "pg", "my"))
    status, body, error = form(host, "form_submit", session, answers={"db": {"selected": ["mongo"]}})
    assert (status, body["code"], error) == (422, "invalid-answers", True)
    assert 'unknown option id "mongo"' in body["error"]
    host.tool("append_questions", {"sessionId": session[0], "questions": [choice("more", "y")]})
    status, body, _ = form(host, "form_submit", session, answers={"db": {"selected": ["pg"]}}, specVersion=1)
    assert (status, body["code"], body["version"]) == (409, "stale-version", 2)
    status, body, error = form(host, "form_submit", session, answers={"db": {"selected": ["pg"]}}, specVersion=2)
    assert (status, error, body["ok"], body["counts"]["answered"]) == (200, False, True, 1)
    assert body["summary"].startswith('"Test interview" submitted')
    answers = host.tool("await_user_answers", {"sessionId": session[0]})["structuredContent"]
    assert answers["status"] == "submitted" and answers["answers"][0]["selected"] == ["pg"]
    assert answers["via"] == "app" and [(row["by"], row["via"]) for row in answers["answers"]] == [("person", "app")] * 2
    # The browser form of the same interview is told it is over, and so is a second app submit.
    url = server.runtime.form_url(server.runtime.hub.get(session[0]))
    assert http_request(api_url(url, "submit"), "POST", {"answers": {}}).json()["code"] == "not-pending"
    status, body, _ = form(host, "form_submit", session, answers={})
    assert (status, body["code"]) == (409, "not-pending")


def test_the_browser_submit_first_leaves_the_app_the_submitted_state(host, server):
    session = ask(host, choice("db", "pg"))
    url = server.runtime.form_url(server.runtime.hub.get(session[0]))
    assert http_request(api_url(url, "submit"), "POST", {"answers": {"db": {"selected": ["pg"]}}}).status == 200
    status, body, _ = form(host, "form_submit", session, answers={"db": {"selected": ["pg"]}})
    assert (status, body["code"]) == (409, "not-pending")
    assert form(host, "form_state", session)[1]["state"] == "submitted"


def chunks(data: bytes, size: int):
    return [data[i:i + size] for i in range(0, len(data), size)] or [b""]


def test_form_attach_takes_a_file_in_chunks_and_the_submit_names_it(host, server):
    session = ask(host, choice("shot", "a"))
    data = os.urandom(393216 + 1000)  # one full chunk (512 KiB of base64) and a little more
    first, second = chunks(data, 393216)
    status, body, _ = form(host, "form_attach", session, name="screen.png", mimeType="image/png",
                           size=len(data), offset=0, data=base64.b64encode(first).decode())
    assert status == 202 and body["received"] == len(first)
    status, body, error = form(host, "form_attach", session, uploadId=body["uploadId"], offset=len(first),
                               data=base64.b64encode(second).decode())
    assert (status, error) == (201, False)
    assert {key: body[key] for key in ("name", "mimeType", "bytes")} == {"name": "screen.png", "mimeType": "image/png", "bytes": len(data)}
    form(host, "form_submit", session, answers={"shot": {"selected": ["a"]}}, attachments={"shot": [body["id"]]})
    row = host.tool("await_user_answers", {"sessionId": session[0]})["structuredContent"]["answers"][0]
    with open(row["attachments"][0]["path"], "rb") as stored:
        assert stored.read() == data


def test_form_attach_refuses_as_the_upload_route_does(host):
    session = ask(host, choice("a", "x"))
    fields = {"name": "f.txt", "mimeType": "text/plain", "offset": 0}
    cases = [
        (dict(fields, size=10, data="A" * (512 * 1024 + 4)), 413, "too-large"),
        (dict(fields, size=askrich.ATTACHMENT_MAX_BYTES + 1, data=""), 413, "too-large"),
        (dict(fields, size=3, data="not base64!"), 400, "bad-request"),
        (dict(fields, size=3, data="AAAA", uploadId="nope"), 404, "not-found"),
        (dict(fields, size=1, data="AAAA"), 400, "upload-incomplete"),  # 3 bytes for a 1-byte file
        ({"size": 3, "data": "AAAA"}, 400, "bad-request"),  # no name
    ]
    for arguments, status, code in cases:
        got = form(host, "form_attach", session, **arguments)
        assert (got[0], got[1]["code"], got[2]) == (status, code, True), arguments
    for _ in range(4):  # unfinished uploads are held in memory: a few at a time
        assert form(host, "form_attach", session, **dict(fields, size=6, data="AAAA"))[0] == 202
    got = form(host, "form_attach", session, **dict(fields, size=6, data="AAAA"))
    assert (got[0], got[1]["code"]) == (413, "too-many-files")
    form(host, "form_submit", session, answers={})
    got = form(host, "form_attach", session, **dict(fields, size=4, data="AAAA"))
    assert (got[0], got[1]["code"]) == (409, "not-pending")
    assert not host.server.server.tools.app_uploads.uploads  # dropped with the interview


def test_form_detach_removes_an_upload_and_refuses_as_the_route_does(host):
    session = ask(host, choice("a", "x"))
    status, body, _ = form(host, "form_attach", session, name="n.txt", size=3, data="AAAA")
    assert status == 201
    assert form(host, "form_detach", session, id=body["id"])[:2] == (204, {"statusCode": 204})
    assert form(host, "form_detach", session, id=body["id"])[1]["code"] == "not-found"
    status, kept, _ = form(host, "form_attach", session, name="n.txt", size=3, data="AAAA")
    form(host, "form_submit", session, answers={})
    got = form(host, "form_detach", session, id=kept["id"])
    assert (got[0], got[1]["code"], got[2]) == (409, "not-pending", True)


# -- in real hosts ----------------------------------------------------------------------------


def test_the_app_key_rides_in_meta_only_and_the_token_alone_is_refused(host):
    result = host.tool("ask_user_rich", interview(choice("db", "pg")))
    key = result["_meta"][APP_META]["key"]
    # What the model reads (content, structuredContent) never holds the key.
    assert key not in json.dumps(result["content"]) and key not in json.dumps(result["structuredContent"])
    session = ask(host, choice("db", "pg"))
    for wrong in (session[:2], session[:2] + ("",), session[:2] + (key,)):  # none, empty, another interview's
        status, body, error = form(host, "form_submit", wrong, answers={"db": {"selected": ["pg"]}})
        assert (status, body["code"], error) == (403, "app-key-required", True)
        assert "appKey" in body["error"]
    assert form(host, "form_state", session)[1]["state"] == "pending"


def test_resource_templates_are_an_empty_list(host, era):
    listed = result_of(host.call("resources/templates/list"))
    assert listed["resourceTemplates"] == []
    if era == "modern":
        assert listed["ttlMs"] > 0 and listed["cacheScope"] == "public" and listed["resultType"] == "complete"
        assert host.call("resources/templates/list", {"cursor": "x"})["error"]["code"] == -32602


APP_ELICITATION = {"elicitation": {"form": {}}, "extensions": {UI: {"mimeTypes": [MIME], "elicitation": {}}}}


@pytest.mark.parametrize("capabilities, declared", [
    (APP_ELICITATION, {"elicitation": {}}),
    (APPS, {}),  # no elicitation in its UI extension
    ({"extensions": APP_ELICITATION["extensions"]}, {}),  # no form elicitation
])
def test_app_elicitation_is_declared_to_a_client_that_renders_it(server, era, capabilities, declared):
    if era == "legacy":
        shown = server.initialize(capabilities=capabilities)["result"]["capabilities"]
    else:
        reply = result_of(call_modern(server, "server/discover", capabilities=capabilities))
        shown = reply["capabilities"]
        assert reply["cacheScope"] == ("private" if declared else "public")
    assert shown["extensions"][UI] == declared


def test_an_app_rendered_elicitation_names_the_form_and_the_app_answers_in_it(tmp_path):
    from helpers.delivery_support import FLAT_INTERVIEW
    from test_elicitation import Wire, call_ask

    client = Wire(tmp_path, APP_ELICITATION)
    try:
        request = call_ask(client, dict(FLAT_INTERVIEW, delivery="elicitation"))
        params = request["params"]
        assert params["mode"] == "form" and params["requestedSchema"]["type"] == "object"
        assert params["_meta"]["ui"] == {"resourceUri": URI}
        app = params["_meta"][APP_META]
        answers = {"db": {"selected": ["pg"]}, "free": {"other": "Nothing"}}
        client.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "form_submit", "arguments": {
            "sessionId": app["sessionId"], "token": app["token"], "appKey": app["key"], "answers": answers,
            "generalNotes": "from the dialog"}}})
        submitted = client.receive_until(lambda m: m.get("id") == 2)["result"]["structuredContent"]
        assert submitted["statusCode"] == 200
        # Then the app answers the host's dialog, which closes it: no cancellation from us.
        client.send({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept", "content": {"db": "pg"}}})
        seen = []
        result = client.receive_until(lambda m: seen.append(m) or m.get("id") == 1)["result"]["structuredContent"]
        assert not [m for m in seen if m.get("method") == "notifications/cancelled"]
        assert (result["status"], result["via"], result["generalNotes"]) == ("submitted", "app", "from the dialog")
    finally:
        client.close()


def test_a_ranking_and_an_options_text_go_to_the_app_in_the_dialog_and_the_hosts_own_form(tmp_path):
    """The app shows them in the host's dialog; a host that cannot run the app shows its own
    form of the schema, where the ranking and the option's text are typed, and still count."""
    from test_elicitation import RANKED, WITH_TEXT, Wire, call_ask

    client = Wire(tmp_path, APP_ELICITATION)
    try:
        request = call_ask(client, {"title": "Release plan", "delivery": "elicitation", "questions": [RANKED, WITH_TEXT]})
        params = request["params"]
        assert params["_meta"]["ui"] == {"resourceUri": URI}
        fields = params["requestedSchema"]["properties"]
        assert fields["order"]["type"] == "string" and "1. The API\n2. The docs\n3. The UI" in fields["order"]["description"]
        assert fields["why__else"]["type"] == "string"
        client.send({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept", "content": {
            "order": "2, 3, 1", "why": "else", "why__else": "A deadline"}}})
        result = client.receive_until(lambda m: m.get("id") == 1)["result"]["structuredContent"]
        order, why = result["answers"]
        assert (result["status"], result["via"]) == ("submitted", "elicitation")
        assert (order["ranked"], why["selected"], why["optionTexts"]) == (["docs", "ui", "api"], ["else"], {"else": "A deadline"})
    finally:
        client.close()


def test_a_client_without_app_elicitation_gets_the_plain_form_elicitation(tmp_path):
    from helpers.delivery_support import FLAT_INTERVIEW
    from test_elicitation import Wire, call_ask

    client = Wire(tmp_path, dict(APPS, elicitation={"form": {}}))
    try:
        request = call_ask(client, dict(FLAT_INTERVIEW, delivery="elicitation"))
        assert "_meta" not in request["params"]
    finally:
        client.close()


def test_a_host_that_never_loads_the_app_gets_the_browser_after_the_fallback(tmp_path):
    from test_elicitation import Wire
    from helpers.support import wait_for_file

    opened = tmp_path / "opened"
    opener = tmp_path / "open.sh"
    opener.write_text('#!/bin/sh\necho "$1" >> "%s"\n' % opened)
    opener.chmod(0o755)
    client = Wire(tmp_path, APPS, open_cmd=str(opener), app_fallback=1)
    try:
        def ask_in_host(request_id):
            client.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                         "params": {"name": "ask_user_rich", "arguments": interview(choice("db", "pg"))}})
            return client.receive_until(lambda m: m.get("id") == request_id)["result"]

        loaded = ask_in_host(1)
        app = loaded["_meta"][APP_META]
        client.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "form_state", "arguments": {
            "sessionId": app["sessionId"], "token": app["token"], "appKey": app["key"], "full": True}}})
        client.receive_until(lambda m: m.get("id") == 2)
        stranded = ask_in_host(3)
        assert stranded["structuredContent"]["url"] in stranded["content"][0]["text"]  # the link, always
        wait_for_file(str(opened))
        # Only the interview no app loaded went to the browser, once its delay had passed.
        assert opened.read_text().split() == [stranded["structuredContent"]["url"]]
    finally:
        client.close()


def test_the_apps_polls_are_logged_only_at_debug(host, server):
    """A client that asked for the log at info (some hosts narrate it to the agent) hears of the
    app's load, not of every poll."""
    session = ask(host, choice("db", "pg"))
    heard = []
    server.runtime.log.listener = lambda level, event, fields, about: heard.append(
        (fields.get("tool"), fields.get("request"), level))
    form(host, "form_state", session)
    poll = next(request for tool, request, _ in heard if tool == "form_state")
    form(host, "form_state", session, full=True)
    levels = {}
    for tool, request, level in heard:
        if tool == "form_state":
            levels.setdefault("poll" if request == poll else "load", set()).add(level)
    assert levels == {"poll": {"debug"}, "load": {"info"}}


def test_a_modern_app_rendered_elicitation_rides_in_the_input_request(server):
    from helpers.delivery_support import FLAT_INTERVIEW

    reply = result_of(call_modern(server, "tools/call", {"name": "ask_user_rich", "arguments": dict(
        FLAT_INTERVIEW, delivery="elicitation")}, capabilities=APP_ELICITATION))
    assert reply["resultType"] == "input_required"
    (request,) = reply["inputRequests"].values()
    assert request["method"] == "elicitation/create"
    assert request["params"]["_meta"]["ui"] == {"resourceUri": URI}
    assert set(request["params"]["_meta"][APP_META]) == {"sessionId", "token", "key"}


def test_the_fallback_delay_is_read_from_the_environment():
    config, warnings = askrich.Config.from_env({"ASK_USER_RICH_APP_FALLBACK": "3"})
    assert (config.app_fallback, warnings) == (3, [])
    config, warnings = askrich.Config.from_env({"ASK_USER_RICH_APP_FALLBACK": "soon"})
    assert config.app_fallback == 15 and "ASK_USER_RICH_APP_FALLBACK" in warnings[0]


@pytest.mark.parametrize("value, said", [
    (None, "if the host shows no form within 15s of the call, the browser gets it (ASK_USER_RICH_APP_FALLBACK)"),
    ("40", "within 40s of the call"),
    ("0", "the browser gets it at once as well (ASK_USER_RICH_APP_FALLBACK=0)"),
])
def test_doctor_says_when_the_browser_takes_over_from_an_app_host(tmp_path, value, said):
    import io
    from helpers.delivery_support import linux_facts

    env = {"ASK_USER_RICH_LOG_DIR": str(tmp_path / "logs"), "ASK_USER_RICH_INBOX_PORT": "0"}
    if value is not None:
        env["ASK_USER_RICH_APP_FALLBACK"] = value
    out = io.StringIO()
    askrich.run_doctor(environ=env, facts=linux_facts(), out=out)
    assert "form in an app host: " in out.getvalue() and said in out.getvalue()
