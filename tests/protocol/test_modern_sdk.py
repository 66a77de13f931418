"""The official MCP Python SDK (2.3) as a 2026-07-28 client: `mode="auto"` must stay modern,
and its own multi round-trip loop answers our elicitations through its callback."""

from __future__ import annotations

import sys

import anyio
import pytest

from helpers.delivery_support import CALL_TIMEOUT, FLAT_INTERVIEW, SERVER, progress_recorder, server_env, submit_like_a_browser
from helpers.modern_support import DECLINED_URL_REASON, MODERN, form_state, log_events
from helpers.support import api_url, choice, http_request, interview, submit

mcp = pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters, types  # noqa: E402


def parameters(tmp_path, **env):
    return StdioServerParameters(command=sys.executable, args=[SERVER],
                                 env=server_env(tmp_path / "logs", **env))


def run(scenario):
    async def bounded():
        with anyio.fail_after(CALL_TIMEOUT):
            return await scenario()

    return anyio.run(bounded)


def dumped(model) -> dict:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def test_auto_mode_ends_on_2026_07_28_and_lists_the_legacy_tools(tmp_path):
    async def scenario():
        async with Client(parameters(tmp_path, ASK_USER_RICH_OPEN="0")) as client:
            modern = (client.protocol_version, client.server_info, client.instructions,
                      [dumped(tool) for tool in (await client.list_tools()).tools])
        async with Client(parameters(tmp_path, ASK_USER_RICH_OPEN="0"), mode="legacy") as client:
            legacy = (client.protocol_version, client.instructions,
                      [dumped(tool) for tool in (await client.list_tools()).tools])
        return modern, legacy

    (version, info, instructions, tools), (legacy_version, legacy_instructions, legacy_tools) = run(scenario)
    assert version == MODERN and legacy_version == "2025-11-25"
    assert info.name == "ask-user-rich" and info.title == "Ask User Rich"
    assert instructions == legacy_instructions and "await_user_answers" in instructions
    assert [tool["name"] for tool in tools] == ["ask_user_rich", "append_questions", "await_user_answers"]
    assert tools == legacy_tools
    eras = {fields.get("era") for fields in log_events(tmp_path / "logs", "request")}
    assert eras == {"modern", "legacy"}


def test_a_modern_sdk_asks_by_link_and_awaits_the_answers_with_progress_while_the_user_submits(tmp_path):
    progress = []

    async def scenario():
        on_progress, ticked = progress_recorder(progress)
        async with Client(parameters(tmp_path, ASK_USER_RICH_OPEN="0", ASK_USER_RICH_PROGRESS_MS="200")) as client:
            assert client.protocol_version == MODERN
            asked = await client.call_tool("ask_user_rich", interview(
                choice("db", "pg", "my", recommended="pg"), delivery="link"))
            awaiting = asked.structured_content
            assert awaiting["status"] == "awaiting"
            appended = await client.call_tool("append_questions", {
                "sessionId": awaiting["sessionId"], "questions": [choice("more", "yes", "no")]})
            assert appended.structured_content["version"] == 2

            async def user_submits():
                await ticked.wait()  # the call waits, and an interval tick followed
                assert (await anyio.to_thread.run_sync(form_state, awaiting["url"]))["waiting"]
                response = await anyio.to_thread.run_sync(lambda: submit(awaiting["url"], {
                    "db": {"selected": ["pg"]}, "more": {"status": "defer"}}, specVersion=2))
                assert response.status == 200

            async with anyio.create_task_group() as group:
                group.start_soon(user_submits)
                return await client.call_tool("await_user_answers", {"sessionId": awaiting["sessionId"]},
                                              progress_callback=on_progress)

    result = run(scenario)
    assert not result.is_error
    structured = result.structured_content
    assert structured["status"] == "submitted"
    assert structured["counts"] == {"answered": 1, "deferred": 1, "needsInfo": 0, "unanswered": 0}
    assert structured["answers"][0]["followedRecommendation"] is True
    values = [value for value, _ in progress]
    assert len(values) >= 2 and values == sorted(set(values)), values
    assert all(message.startswith('Waiting for answers to "Test interview": ') for _, message in progress)
    assert ("tools/call", "modern") in {(f.get("method"), f.get("era")) for f in log_events(tmp_path / "logs", "request")}


def test_the_sdk_loop_answers_a_form_elicitation_through_its_callback(tmp_path):
    seen = []

    async def on_elicit(context, params):
        seen.append((context.request_id, dumped(params)))
        return types.ElicitResult(action="accept", content={"db": "my", "extras": ["cache"], "free": "ok"})

    async def scenario():
        async with Client(parameters(tmp_path, ASK_USER_RICH_OPEN="0"), elicitation_callback=on_elicit) as client:
            assert client.protocol_version == MODERN
            return await client.call_tool("ask_user_rich", dict(FLAT_INTERVIEW, delivery="elicitation"))

    result = run(scenario)
    assert len(seen) == 1
    key, params = seen[0]
    # The input request's key, not an id of a request we wrote: this came by round trip.
    assert key == "answers"
    assert params["mode"] == "form" and params["message"].startswith("Pick a stack")
    assert list(params["requestedSchema"]["properties"]) == ["db", "db__other", "extras", "extras__other", "free"]
    structured = result.structured_content
    assert structured["status"] == "submitted" and structured["via"] == "elicitation"
    assert [row["selected"] for row in structured["answers"]] == [["my"], ["cache"], []]
    assert structured["answers"][2]["other"] == "ok"


@pytest.mark.parametrize("action, status", [("decline", "declined"), ("cancel", "cancelled")])
def test_the_sdk_loop_carries_a_declined_form_elicitation(tmp_path, action, status):
    async def on_elicit(context, params):
        return types.ElicitResult(action=action)

    async def scenario():
        async with Client(parameters(tmp_path, ASK_USER_RICH_OPEN="0"), elicitation_callback=on_elicit) as client:
            assert client.protocol_version == MODERN
            return await client.call_tool("ask_user_rich", dict(FLAT_INTERVIEW, delivery="elicitation"))

    structured = run(scenario).structured_content
    assert structured["status"] == status and structured["via"] == "elicitation"
    assert structured["counts"]["unanswered"] == 3


def test_the_sdk_loop_accepts_a_url_elicitation_and_the_call_returns_after_the_http_submit(tmp_path):
    seen, completions = [], []

    async def on_elicit(context, params):
        seen.append((context.request_id, dumped(params)))
        return types.ElicitResult(action="accept")

    async def on_message(message):
        if isinstance(message, types.ElicitCompleteNotification):
            completions.append(message)

    async def scenario():
        progress = anyio.Event()

        async def on_progress(value, total, message):
            progress.set()  # the retry after the consent is waiting for the submit

        async with Client(parameters(tmp_path, ASK_USER_RICH_OPEN_CMD="/bin/false"),
                          elicitation_callback=on_elicit, message_handler=on_message) as client:
            assert client.protocol_version == MODERN
            outcome = {}

            async def call():
                outcome["result"] = await client.call_tool("ask_user_rich", FLAT_INTERVIEW, progress_callback=on_progress)

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                await progress.wait()
                url = seen[0][1]["url"]
                assert (await anyio.to_thread.run_sync(form_state, url))["waiting"]
                outcome["submit"] = await anyio.to_thread.run_sync(submit_like_a_browser, url)
            return outcome

    outcome = run(scenario)
    assert len(seen) == 1
    key, params = seen[0]
    assert key == "open-form"
    assert params["mode"] == "url" and "/s/" in params["url"] and "Pick a stack" in params["message"]
    assert "elicitationId" not in params
    assert outcome["submit"]["delivered"] is True
    structured = outcome["result"].structured_content
    assert structured["status"] == "submitted" and structured["via"] == "browser"
    assert completions == []


def test_the_sdk_loop_declining_a_url_elicitation_gets_awaiting_with_the_reason(tmp_path):
    async def on_elicit(context, params):
        return types.ElicitResult(action="decline")

    async def scenario():
        async with Client(parameters(tmp_path, ASK_USER_RICH_OPEN_CMD="/bin/false"),
                          elicitation_callback=on_elicit) as client:
            result = await client.call_tool("ask_user_rich", FLAT_INTERVIEW)
            url = result.structured_content["url"]
            state = await anyio.to_thread.run_sync(lambda: http_request(api_url(url, "state")).json())
            return result, state

    result, state = run(scenario)
    structured = result.structured_content
    assert structured["status"] == "awaiting" and structured["reason"] == DECLINED_URL_REASON
    assert state["state"] == "pending"  # the form stays open for a later await_user_answers


def test_with_the_legacy_setting_an_auto_sdk_falls_back_to_initialize_and_works(tmp_path):
    async def scenario():
        async with Client(parameters(tmp_path, ASK_USER_RICH_OPEN="0", ASK_USER_RICH_PROTOCOL="legacy")) as client:
            version = client.protocol_version
            result = await client.call_tool("ask_user_rich", interview(delivery="link"))
            return version, result

    version, result = run(scenario)
    assert version == "2025-11-25"
    assert result.structured_content["status"] == "awaiting"
    served = log_events(tmp_path / "logs", "request")
    assert served and {fields.get("era") for fields in served} == {"legacy"}
