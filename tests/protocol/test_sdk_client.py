"""End to end with the official MCP Python SDK as the client (it validates structuredContent
against each tool's outputSchema, as Claude Code's SDK does), pinned to the initialize
handshake: test_modern_sdk.py drives the same SDK on the 2026-07-28 era."""

from __future__ import annotations

import os
import sys

import anyio
import pytest

from helpers.delivery_support import progress_recorder
from helpers.support import MODULE, api_url, choice, http_request, interview, submit

mcp = pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters  # noqa: E402


def server_parameters(tmp_path, **env):
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "ASK_USER_RICH_LOG_DIR": str(tmp_path / "logs"),
        "ASK_USER_RICH_OPEN": "0",
        "ASK_USER_RICH_INBOX_PORT": "0",  # never the user's inbox on its well-known port
        "ASK_USER_RICH_PROGRESS_MS": "200",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),  # never the user's cache folder
    }
    environment.update(env)
    return StdioServerParameters(command=sys.executable, args=[MODULE], env=environment)


def run(coroutine_function):
    return anyio.run(coroutine_function)


def test_sdk_lists_tools_asks_by_link_and_awaits_the_answers_with_progress(tmp_path):
    progress = []

    async def scenario():
        async with Client(server_parameters(tmp_path), mode="legacy") as client:
            assert client.server_info.name == "ask-user-rich"
            assert client.protocol_version == "2025-11-25"
            tools = (await client.list_tools()).tools
            assert [tool.name for tool in tools] == ["ask_user_rich", "append_questions", "await_user_answers"]

            asked = await client.call_tool("ask_user_rich", interview(
                choice("db", "pg", "my", recommended="pg", rationale="We **run** it."),
                choice("order", "speed", "cost", kind="rank", recommended=["speed", "cost"]),
                delivery="link",
            ))
            assert not asked.is_error
            awaiting = asked.structured_content
            assert awaiting["status"] == "awaiting"

            appended = await client.call_tool("append_questions", {
                "sessionId": awaiting["sessionId"], "questions": [choice("more", "yes", "no")],
                "note": "One more"})
            assert appended.structured_content["total"] == 3

            on_progress, ticked = progress_recorder(progress)

            async def user_submits():
                # The first progress message goes out once the call waits, the next one at the
                # first interval tick: after that, answer like the form does.
                with anyio.fail_after(10):
                    await ticked.wait()
                assert http_request(api_url(awaiting["url"], "state")).json()["waiting"] is True
                response = await anyio.to_thread.run_sync(lambda: submit(awaiting["url"], {
                    "db": {"selected": ["pg"], "notes": "fine"},
                    "order": {"ranked": ["cost", "speed"]},
                    "more": {"status": "needs-info", "notes": "why?"},
                }, specVersion=2, generalNotes="thanks"))
                assert response.status == 200

            async with anyio.create_task_group() as group:
                group.start_soon(user_submits)
                result = await client.call_tool(
                    "await_user_answers", {"sessionId": awaiting["sessionId"]},
                    progress_callback=on_progress,
                )
            return result

    result = run(scenario)
    assert not result.is_error
    structured = result.structured_content
    assert structured["status"] == "submitted"
    assert structured["counts"] == {"answered": 2, "deferred": 0, "needsInfo": 1, "unanswered": 0}
    rows = {row["id"]: row for row in structured["answers"]}
    assert rows["db"]["followedRecommendation"] is True and rows["db"]["notes"] == "fine"
    assert rows["order"]["rankedLabels"] == ["COST", "SPEED"]
    assert rows["order"]["followedRecommendation"] is False
    assert rows["more"]["status"] == "needs-info"
    assert structured["generalNotes"] == "thanks"
    assert result.content[0].text == structured["summary"]
    values = [value for value, _ in progress]
    assert values and values == sorted(set(values)), values
    assert all("Waiting for answers to" in message for _, message in progress)


def test_sdk_sees_validation_problems_as_a_tool_error(tmp_path):
    async def scenario():
        async with Client(server_parameters(tmp_path), mode="legacy") as client:
            return await client.call_tool("ask_user_rich", {"title": "T", "questions": [
                {"id": "seção", "header": "H", "options": [{"id": "a", "label": "A"}],
                 "recommended": "A"}]})

    result = run(scenario)
    assert result.is_error
    text = result.content[0].text
    assert text.startswith("Invalid interview:\n")
    assert 'use "secao" instead.' in text
    assert 'recommended "A" is not one of its option ids (it looks like a label; use the id "a")' in text
