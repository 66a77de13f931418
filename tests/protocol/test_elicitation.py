"""Delivery through the client: form elicitation (delivery "elicitation") and URL elicitation
(delivery "browser" when no opener works), driven by the official MCP Python SDK client, plus
the races between a pending elicitation and the web form, driven in-process."""

import json
import os
import queue
import sys
import threading

import anyio
import pytest

from helpers.support import DISCARD
from helpers.delivery_support import (
    CALL_TIMEOUT,
    FLAT_INTERVIEW,
    RANK_INTERVIEW,
    SERVER,
    declared_elicitation,
    server_env,
    submit_like_a_browser,
    write_fake_browser,
)

import askrich

mcp = pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters, types  # noqa: E402


def run_session(env, tool, arguments, *, on_elicit=None, on_progress=None, on_message=None, after=None):
    """Start the server under the SDK client, call one tool, return (result, after's value).

    `after(client, result)` (async) runs in the same session once the call returned."""

    async def scenario():
        params = StdioServerParameters(command=sys.executable, args=[SERVER], env=env)
        kwargs = {}
        if on_elicit is not None:
            kwargs["elicitation_callback"] = on_elicit
        if on_message is not None:
            kwargs["message_handler"] = on_message
        with anyio.fail_after(CALL_TIMEOUT):
            async with Client(params, mode="legacy", **kwargs) as client:
                result = await client.call_tool(tool, arguments, progress_callback=on_progress)
                extra = await after(client, result) if after is not None else None
                return result, extra

    return anyio.run(scenario)


def elicit_with(action, content=None, seen=None):
    async def on_elicit(context, params):
        if seen is not None:
            seen.append(params.model_dump(by_alias=True, mode="json", exclude_none=True))
        return types.ElicitResult(action=action, content=content)

    return on_elicit


def server_log(tmp_path) -> str:
    return (tmp_path / "logs" / "server.log").read_text(encoding="utf-8")


# -- form elicitation -------------------------------------------------------------------------


@pytest.mark.parametrize("capability", [{}, {"form": {}}, {"form": {}, "url": {}}])
def test_form_elicitation_accepted_returns_its_answers(tmp_path, monkeypatch, capability):
    seen = []
    content = {"db": "my", "extras": ["search", "bogus"], "db__other": "", "free": "  hello  ",
               "extras__other": "Metrics"}
    with declared_elicitation(monkeypatch, capability):
        result, _ = run_session(
            server_env(tmp_path / "logs", ASK_USER_RICH_OPEN="0"),
            "ask_user_rich",
            dict(FLAT_INTERVIEW, delivery="elicitation"),
            on_elicit=elicit_with("accept", content, seen),
        )
    assert len(seen) == 1 and seen[0]["mode"] == "form"
    structured = result.structured_content
    assert structured["status"] == "submitted" and structured["via"] == "elicitation"
    assert {(row["by"], row["via"]) for row in structured["answers"]} == {("person", "elicitation")}
    db, extras, free = structured["answers"]
    assert db["selected"] == ["my"] and db["other"] is None and db["followedRecommendation"] is False
    assert extras["selected"] == ["search"] and extras["other"] == "Metrics"
    assert free["status"] == "answered" and free["other"] == "hello"
    assert structured["summary"].startswith('"Pick a stack" submitted after ')
    assert "via elicitation" in structured["summary"].splitlines()[0]
    logged = server_log(tmp_path)
    assert 'elicitation-ignored' in logged and 'bogus' in logged  # ignored leniently, and logged


def test_form_elicitation_asks_a_field_per_question_with_the_recommendations_as_defaults(tmp_path, monkeypatch):
    seen = []
    with declared_elicitation(monkeypatch, {"form": {}}):
        run_session(
            server_env(tmp_path / "logs", ASK_USER_RICH_OPEN="0"),
            "ask_user_rich",
            dict(FLAT_INTERVIEW, delivery="elicitation"),
            on_elicit=elicit_with("cancel", None, seen),
        )
    request = seen[0]
    assert request["message"].startswith("Pick a stack\n\nThree quick ones.")
    properties = request["requestedSchema"]["properties"]
    assert list(properties) == ["db", "db__other", "extras", "extras__other", "free"]
    assert properties["db"] == {
        "type": "string",
        "title": "Which database?",
        "oneOf": [{"const": "pg", "title": "Postgres (recommended)"}, {"const": "my", "title": "MySQL"}],
        "default": "pg",
        "description": "We need **one**.\n\nWhy recommended: We run it already.",
    }
    assert properties["extras"]["type"] == "array"
    assert properties["extras"]["items"]["anyOf"][:2] == [
        {"const": "cache", "title": "Cache (recommended)"},
        {"const": "queue", "title": "Queue (recommended)"},
    ]
    assert properties["extras"]["default"] == ["cache", "queue"]
    assert properties["db__other"]["type"] == "string" and properties["db__other"]["maxLength"] == 20000
    assert properties["free"] == {"type": "string", "title": "Anything else?", "maxLength": 20000}


@pytest.mark.parametrize("action, status", [("decline", "declined"), ("cancel", "cancelled")])
def test_form_elicitation_declined_or_cancelled_leaves_every_answer_unanswered(tmp_path, monkeypatch, action, status):
    with declared_elicitation(monkeypatch, {}):
        result, _ = run_session(
            server_env(tmp_path / "logs", ASK_USER_RICH_OPEN="0"),
            "ask_user_rich",
            dict(FLAT_INTERVIEW, delivery="elicitation"),
            on_elicit=elicit_with(action),
        )
    structured = result.structured_content
    assert structured["status"] == status and structured["via"] == "elicitation"
    assert [row["status"] for row in structured["answers"]] == ["unanswered"] * 3
    assert structured["summary"].startswith(
        '"Pick a stack" %s via elicitation: 0 answered, 0 deferred, 0 need more info, 3 unanswered.' % status
    )
    archived = os.listdir(tmp_path / "logs" / "answers")
    assert len(archived) == 1 and archived[0].endswith(structured["interviewId"] + ".json")


def test_a_rank_interview_falls_back_to_the_browser(tmp_path, monkeypatch):
    seen = []
    command, _ = write_fake_browser(tmp_path)
    with declared_elicitation(monkeypatch, {"form": {}, "url": {}}):
        result, _ = run_session(
            server_env(tmp_path / "logs", ASK_USER_RICH_OPEN_CMD=command),
            "ask_user_rich",
            dict(RANK_INTERVIEW, delivery="elicitation"),
            on_elicit=elicit_with("accept", {}, seen),
        )
    assert seen == []  # the client's form cannot order options: it was never asked
    structured = result.structured_content
    assert structured["via"] == "browser" and structured["answers"][0]["ranked"] == ["cost", "speed"]
    assert 'elicitation-fallback' in server_log(tmp_path) and 'rank question' in server_log(tmp_path)


def test_a_text_input_option_falls_back_to_the_browser(tmp_path, monkeypatch):
    seen = []
    command, _ = write_fake_browser(tmp_path)
    interview = {
        "title": "Upgrade",
        "delivery": "elicitation",
        "questions": [{"id": "src", "header": "Upgrade it?", "options": [
            {"id": "up", "label": "Upgrade", "textInput": {"placeholder": "source URL"}},
            {"id": "keep", "label": "Keep"}]}],
    }
    with declared_elicitation(monkeypatch, {}):
        result, _ = run_session(
            server_env(tmp_path / "logs", ASK_USER_RICH_OPEN_CMD=command),
            "ask_user_rich", interview, on_elicit=elicit_with("accept", {}, seen),
        )
    assert seen == [] and result.structured_content["via"] == "browser"
    assert "textInput" in server_log(tmp_path)


def test_a_client_failing_the_form_elicitation_gets_the_browser(tmp_path):
    command, _ = write_fake_browser(tmp_path)

    async def refuse(context, params):
        return types.ErrorData(code=-32600, message="no dialogs here")

    result, _ = run_session(
        server_env(tmp_path / "logs", ASK_USER_RICH_OPEN_CMD=command),
        "ask_user_rich", dict(FLAT_INTERVIEW, delivery="elicitation"), on_elicit=refuse,
    )
    assert result.structured_content["via"] == "browser"
    assert "no dialogs here" in server_log(tmp_path)


# -- URL elicitation when no browser opens ----------------------------------------------------


def test_url_only_client_gets_a_url_elicitation_and_the_call_returns_after_the_http_submit(tmp_path, monkeypatch):
    requests, completions = [], []
    waiting = None
    completed = None

    async def on_elicit(context, params):
        requests.append(params.model_dump(by_alias=True, mode="json", exclude_none=True))
        return types.ElicitResult(action="accept")

    async def on_progress(progress, total, message):
        # The first progress comes from the wait that follows the user's consent: the gate
        # for the submit, so the accept path (not a race with it) is what this test proves.
        if not waiting.is_set():
            waiting.set()

    async def on_message(message):
        if isinstance(message, types.ElicitCompleteNotification):
            completions.append(message.params.elicitation_id)
            completed.set()

    async def scenario():
        nonlocal waiting, completed
        waiting, completed = anyio.Event(), anyio.Event()
        env = server_env(tmp_path / "logs", ASK_USER_RICH_OPEN_CMD="false")
        params = StdioServerParameters(command=sys.executable, args=[SERVER], env=env)
        outcome = {}
        with anyio.fail_after(CALL_TIMEOUT):
            async with Client(params, mode="legacy", elicitation_callback=on_elicit, message_handler=on_message) as client:
                async def call():
                    outcome["result"] = await client.call_tool(
                        "ask_user_rich", FLAT_INTERVIEW, progress_callback=on_progress
                    )

                async with anyio.create_task_group() as group:
                    group.start_soon(call)
                    await waiting.wait()
                    outcome["submit"] = await anyio.to_thread.run_sync(
                        submit_like_a_browser, requests[0]["url"]
                    )
                await completed.wait()
        return outcome

    with declared_elicitation(monkeypatch, {"url": {}}):
        outcome = anyio.run(scenario)
    assert len(requests) == 1
    request = requests[0]
    assert request["mode"] == "url" and "/s/" in request["url"] and "Pick a stack" in request["message"]
    assert outcome["submit"]["delivered"] is True
    structured = outcome["result"].structured_content
    assert structured["status"] == "submitted" and structured["via"] == "browser"
    assert [row["selected"] for row in structured["answers"]] == [["pg"], ["cache"], []]
    assert completions == [request["elicitationId"]]


def test_a_declined_url_elicitation_returns_awaiting_with_every_reason(tmp_path, monkeypatch):
    with declared_elicitation(monkeypatch, {"url": {}}):
        result, _ = run_session(
            server_env(tmp_path / "logs", ASK_USER_RICH_OPEN_CMD="false"),
            "ask_user_rich", FLAT_INTERVIEW, on_elicit=elicit_with("decline"),
        )
    structured = result.structured_content
    assert structured["status"] == "awaiting"
    assert structured["reason"] == (
        "Could not open the browser (ASK_USER_RICH_OPEN_CMD (false) exited with 1; open the link "
        "by hand). The client was asked to open the link (URL elicitation) and the user declined it."
    )


def test_a_form_only_client_gets_no_url_elicitation(tmp_path, monkeypatch):
    seen = []
    with declared_elicitation(monkeypatch, {}):
        result, _ = run_session(
            server_env(tmp_path / "logs", ASK_USER_RICH_OPEN_CMD="false"),
            "ask_user_rich", FLAT_INTERVIEW, on_elicit=elicit_with("accept", None, seen),
        )
    assert seen == [] and result.structured_content["status"] == "awaiting"


def test_open_0_returns_the_link_without_asking_the_client(tmp_path):
    seen = []
    result, _ = run_session(
        server_env(tmp_path / "logs", ASK_USER_RICH_OPEN="0"),
        "ask_user_rich", FLAT_INTERVIEW, on_elicit=elicit_with("accept", None, seen),
    )
    assert seen == []
    assert result.structured_content["reason"] == (
        "Could not open the browser (opening is disabled (ASK_USER_RICH_OPEN=0))."
    )


def test_a_client_without_elicitation_gets_awaiting_with_the_reason_then_the_answers(tmp_path, monkeypatch):
    async def after(client, result):
        structured = result.structured_content
        await anyio.to_thread.run_sync(submit_like_a_browser, structured["url"])
        return await client.call_tool("await_user_answers", {"sessionId": structured["sessionId"]})

    with declared_elicitation(monkeypatch, None):
        result, answers = run_session(
            server_env(tmp_path / "logs", ASK_USER_RICH_OPEN_CMD="false"),
            "ask_user_rich", dict(FLAT_INTERVIEW, delivery="elicitation"), after=after,
        )
    structured = result.structured_content
    assert structured["status"] == "awaiting"
    assert structured["reason"] == (
        "Could not open the browser (ASK_USER_RICH_OPEN_CMD (false) exited with 1; open the link by hand)."
    )
    assert result.content[0].text.startswith(structured["reason"] + "\nThe interview \"Pick a stack\" is waiting at:\n")
    assert answers.structured_content["status"] == "submitted"
    assert "client declared no form elicitation" in server_log(tmp_path)


# -- races with the web form, in-process ------------------------------------------------------


class Wire:
    """An McpServer in this process on a pair of pipes, read by a thread into a queue."""

    def __init__(self, tmp_path, capabilities, **settings):
        settings.setdefault("open_browser", "open_cmd" in settings)
        config = askrich.Config(log_dir=str(tmp_path / "logs"), **settings)
        self.runtime = askrich.Runtime(config, askrich.Log(config.log_dir, stream=DISCARD))
        client_read, server_write = os.pipe()
        server_read, client_write = os.pipe()
        self.out = os.fdopen(client_write, "wb")
        self.incoming = os.fdopen(client_read, "rb")
        self.server = askrich.McpServer(self.runtime, os.fdopen(server_read, "rb"), os.fdopen(server_write, "wb"))
        self.lines = queue.Queue()
        self.threads = [
            threading.Thread(target=self.server.serve, daemon=True),
            threading.Thread(target=self._read, daemon=True),
        ]
        for thread in self.threads:
            thread.start()
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "wire", "version": "0"}}})
        assert self.receive()["id"] == 0

    def _read(self):
        for line in self.incoming:
            self.lines.put(json.loads(line))

    def send(self, message):
        self.out.write((json.dumps(message) + "\n").encode())
        self.out.flush()

    def receive(self, timeout=15):
        return self.lines.get(timeout=timeout)

    def receive_until(self, predicate, timeout=15):
        while True:
            message = self.receive(timeout)
            if predicate(message):
                return message

    def close(self):
        self.out.close()
        self.threads[0].join(5)
        self.runtime.close()
        assert not self.threads[0].is_alive()


@pytest.fixture
def wire(tmp_path):
    created = []

    def make(capabilities, **settings):
        created.append(Wire(tmp_path, capabilities, **settings))
        return created[-1]

    yield make
    for each in created:
        each.close()


def call_ask(wire, arguments, request_id=1):
    wire.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
               "params": {"name": "ask_user_rich", "arguments": arguments}})
    return wire.receive_until(lambda m: m.get("method") == "elicitation/create")


def test_a_web_submit_during_a_form_elicitation_wins_and_withdraws_the_dialog(wire):
    client = wire({"elicitation": {}})
    request = call_ask(client, dict(FLAT_INTERVIEW, delivery="elicitation"))
    (interview,) = client.runtime.hub.by_id.values()
    submit_like_a_browser(client.runtime.form_url(interview))
    cancel = client.receive_until(lambda m: m.get("method") == "notifications/cancelled")
    assert cancel["params"]["requestId"] == request["id"]
    response = client.receive_until(lambda m: m.get("id") == 1)
    assert response["result"]["structuredContent"]["via"] == "browser"
    # The dialog's late answer changes nothing.
    client.send({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "decline"}})
    assert interview.settled_result()["status"] == "submitted"


def test_a_web_submit_during_a_url_elicitation_returns_the_answers_and_completes_it(wire):
    client = wire({"elicitation": {"url": {}}}, open_cmd="false")
    request = call_ask(client, FLAT_INTERVIEW)
    assert request["params"]["mode"] == "url"
    submit_like_a_browser(request["params"]["url"])  # the user copied the link meanwhile
    seen = {}
    while len(seen) < 3:
        message = client.receive()
        seen[message.get("method", "response")] = message
    assert seen["notifications/cancelled"]["params"]["requestId"] == request["id"]
    assert seen["notifications/elicitation/complete"]["params"] == {
        "elicitationId": request["params"]["elicitationId"]}
    assert seen["response"]["result"]["structuredContent"]["status"] == "submitted"


def test_a_client_failing_the_url_elicitation_gets_awaiting_with_its_error(wire):
    client = wire({"elicitation": {"url": {}}}, open_cmd="false")
    request = call_ask(client, FLAT_INTERVIEW)
    client.send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "nope"}})
    response = client.receive_until(lambda m: m.get("id") == 1)
    reason = response["result"]["structuredContent"]["reason"]
    assert reason.startswith("Could not open the browser (ASK_USER_RICH_OPEN_CMD (false) exited with 1")
    assert reason.endswith("and the client failed: error -32601: nope.")


def test_cancelling_the_call_withdraws_a_pending_elicitation_and_sends_no_result(wire):
    client = wire({"elicitation": {}})
    request = call_ask(client, dict(FLAT_INTERVIEW, delivery="elicitation"), request_id=7)
    client.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})
    cancel = client.receive_until(lambda m: m.get("method") == "notifications/cancelled")
    assert cancel["params"]["requestId"] == request["id"]
    client.send({"jsonrpc": "2.0", "id": 8, "method": "ping"})
    assert client.receive_until(lambda m: "id" in m) == {"jsonrpc": "2.0", "id": 8, "result": {}}
    (interview,) = client.runtime.hub.by_id.values()
    assert interview.state == "pending"  # the form stays open and collectable


def test_no_timeout_of_ours_ends_a_pending_elicitation(wire):
    client = wire({"elicitation": {}})
    request = call_ask(client, dict(FLAT_INTERVIEW, delivery="elicitation", timeoutSeconds=1))
    # Well past timeoutSeconds, the elicitation is still waiting for the user.
    client.send({"jsonrpc": "2.0", "id": 9, "method": "ping"})
    assert client.receive_until(lambda m: "id" in m, timeout=15)["id"] == 9
    with pytest.raises(queue.Empty):
        client.receive(timeout=2)
    client.send({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept", "content": {"db": "pg"}}})
    response = client.receive_until(lambda m: m.get("id") == 1)
    assert response["result"]["structuredContent"]["answers"][0]["followedRecommendation"] is True


# -- properties of the form mapping -----------------------------------------------------------

from helpers import hypothesis_profiles  # noqa: E402,F401  (loads the fuzz profile)
from hypothesis import given, strategies as st  # noqa: E402
from helpers.strategies import json_values, valid_interviews  # noqa: E402


@given(valid_interviews(delivery="elicitation"), st.data())
def test_any_content_for_any_flat_interview_gives_valid_answers(arguments, data):
    spec, _ = askrich.validate_interview(arguments)
    questions = spec["questions"]
    if askrich.elicitation_unfit(questions) is not None:
        assert any(q["kind"] == "rank" for q in questions) or any(
            q["id"] + "__other" in {other["id"] for other in questions} for q in questions)
        return
    schema = askrich.elicitation_schema(questions)
    properties = schema["properties"]
    consts = [c["const"] for field in properties.values()
              for c in field.get("oneOf", field.get("items", {}).get("anyOf", []))] or ["x"]
    value = st.one_of(json_values(6), st.sampled_from(consts), st.lists(st.sampled_from(consts), max_size=4))
    content = data.draw(st.dictionaries(st.one_of(st.sampled_from(list(properties)), st.text(max_size=8)),
                                        value, max_size=len(properties) + 2))
    answers, ignored = askrich.answers_from_elicitation(questions, content)
    for question in questions:
        field = properties[question["id"]]
        default = field.get("default")
        if question["recommended"]:
            assert default == (question["recommended"] if question["multiSelect"] else question["recommended"][0])
        answer = answers[question["id"]]
        option_ids = [option["id"] for option in question["options"]]
        assert set(answer["selected"]) <= set(option_ids)
        assert question["multiSelect"] or len(answer["selected"]) <= 1
        assert (answer["status"] == "answered") == bool(answer["selected"] or answer["other"])
    # The answers are exactly what a web submit would produce: the result builder takes them.
    result = askrich.build_result(spec, answers, None, interview_id="0" * 12, status="submitted",
                                  via="elicitation", submitted_at=0.0, duration_seconds=1.0)
    assert result["counts"]["answered"] == sum(a["status"] == "answered" for a in answers.values())


@given(valid_interviews(delivery="elicitation"), st.data())
def test_any_content_for_any_interview_the_app_renders_gives_valid_answers(arguments, data):
    """A host that renders the app in its dialog may still show its own form of the schema:
    whatever that form sends, a ranking and option texts included, reads as answers a web
    submit could give."""
    spec, _ = askrich.validate_interview(arguments)
    questions = spec["questions"]
    if askrich.elicitation_unfit(questions, app=True) is not None:
        return  # a name clash between a question id and a derived field: the browser then
    properties = askrich.elicitation_schema(questions)["properties"]
    ids = [option["id"] for question in questions for option in question["options"]] or ["x"]
    value = st.one_of(json_values(6), st.sampled_from(ids), st.lists(st.sampled_from(ids), max_size=4),
                      st.lists(st.sampled_from(ids), max_size=6).map(", ".join))
    content = data.draw(st.dictionaries(st.one_of(st.sampled_from(list(properties)), st.text(max_size=8)),
                                        value, max_size=len(properties) + 2))
    answers, ignored = askrich.answers_from_elicitation(questions, content)
    for question in questions:
        answer = answers[question["id"]]
        option_ids = [option["id"] for option in question["options"]]
        if question["kind"] == "rank":
            assert answer["ranked"] is None or sorted(answer["ranked"]) == sorted(option_ids)
            assert (answer["status"] == "answered") == (answer["ranked"] is not None)
            continue
        assert set(answer["optionTexts"]) <= set(answer["selected"])
        assert all(option["textInput"] is not None for option in question["options"]
                   if option["id"] in answer["optionTexts"])
    result = askrich.build_result(spec, answers, None, interview_id="0" * 12, status="submitted",
                                  via="elicitation", submitted_at=0.0, duration_seconds=1.0)
    assert result["counts"]["answered"] == sum(a["status"] == "answered" for a in answers.values())


RANKED = {"id": "order", "header": "Which first?", "kind": "rank", "options": [
    {"id": "api", "label": "The API"}, {"id": "docs", "label": "The docs"}, {"id": "ui", "label": "The UI"}]}
WITH_TEXT = {"id": "why", "header": "Why now?", "options": [
    {"id": "asked", "label": "Users asked"},
    {"id": "else", "label": "Something else", "textInput": {"placeholder": "What?"}}]}


@pytest.mark.parametrize("typed, ranked", [
    ("docs, api, ui", ["docs", "api", "ui"]),  # the ids, as the app sends them
    ("2. > 1. > 3.", ["docs", "api", "ui"]),  # the numbers the field's description lists
    ("the ui; THE API; The docs", ["ui", "api", "docs"]),  # the labels, any case
    ("docs\napi\nui", ["docs", "api", "ui"]),
])
def test_a_ranking_typed_in_the_hosts_own_form_reads_as_the_order(typed, ranked):
    spec, _ = askrich.validate_interview({"title": "t", "questions": [RANKED]})
    answers, ignored = askrich.answers_from_elicitation(spec["questions"], {"order": typed})
    assert (answers["order"]["ranked"], ignored) == (ranked, [])


@pytest.mark.parametrize("typed", ["docs, api", "docs, docs, ui", "docs, api, ui, 4", "first the docs"])
def test_a_ranking_that_does_not_name_every_option_once_is_reported_not_guessed(typed):
    spec, _ = askrich.validate_interview({"title": "t", "questions": [RANKED]})
    answers, ignored = askrich.answers_from_elicitation(spec["questions"], {"order": typed})
    assert answers["order"]["status"] == "unanswered"
    assert ignored == ['order=%s (a ranking names every option once)' % json.dumps(typed)]


def test_an_options_text_is_kept_only_when_the_option_is_chosen():
    spec, _ = askrich.validate_interview({"title": "t", "questions": [WITH_TEXT]})
    questions = spec["questions"]
    schema = askrich.elicitation_schema(questions)["properties"]
    assert schema["why__else"] == {"type": "string", "title": "Why now?: Something else", "description": "What?",
                                   "maxLength": askrich.FREE_TEXT_MAX}
    answers, ignored = askrich.answers_from_elicitation(questions, {"why": "else", "why__else": "A deadline"})
    assert (answers["why"]["selected"], answers["why"]["optionTexts"], ignored) == (["else"], {"else": "A deadline"}, [])
    answers, ignored = askrich.answers_from_elicitation(questions, {"why": "asked", "why__else": "A deadline"})
    assert (answers["why"]["selected"], answers["why"]["optionTexts"]) == (["asked"], {})
    assert ignored == ['why__else (option "else" not chosen)']


def test_only_the_app_takes_a_ranking_or_an_options_text_into_the_dialog():
    spec, _ = askrich.validate_interview({"title": "t", "questions": [RANKED, WITH_TEXT]})
    questions = spec["questions"]
    assert "rank question" in askrich.elicitation_unfit(questions)
    assert askrich.elicitation_unfit(questions, app=True) is None
    clash, _ = askrich.validate_interview({"title": "t", "questions": [WITH_TEXT, dict(RANKED, id="why__else")]})
    assert "is also a question id" in askrich.elicitation_unfit(clash["questions"], app=True)
