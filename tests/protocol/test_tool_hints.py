"""Claude Code's tool hints in every tool's `_meta`, in both eras: the words its tool search
matches while MCP tools are deferred, and the size up to which a result stays in the
conversation instead of being saved to a file."""

from __future__ import annotations

import json
import re

import askrich
from helpers.support import choice, interview

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _hints_hold(tools):
    assert [tool["name"] for tool in tools] == ["ask_user_rich", "append_questions", "await_user_answers"]
    for tool in tools:
        meta = tool["_meta"]
        assert meta["anthropic/maxResultSizeChars"] == 500000, tool["name"]
        assert isinstance(meta["anthropic/searchHint"], str) and meta["anthropic/searchHint"], tool["name"]


def test_both_eras_list_the_hints_on_every_tool(server):
    server.initialize()
    _hints_hold(server.call("tools/list")["result"]["tools"])
    _hints_hold(server.call("tools/list", {"_meta": dict(MODERN_META)})["result"]["tools"])


def test_the_hint_finds_ask_user_rich_by_words_that_neither_its_name_nor_its_description_has():
    # Claude Code's keyword search matches whole words, lower-cased, in the name, the
    # description and the hint; these are what an agent types when it wants the user's say.
    tool = askrich.TOOLS[0]
    hint = tool["_meta"]["anthropic/searchHint"].lower()
    description = tool["description"].lower()
    for word in ("clarify", "preferences", "approval", "confirm", "survey", "interview", "questions"):
        assert re.search(r"\b%s\b" % word, hint), word
    assert not any(re.search(r"\b%s\b" % word, description) for word in ("clarify", "approval", "survey"))


def test_no_smaller_inline_size_covers_the_largest_result_within_the_limits():
    # 30 questions whose notes and Other each hold the 20,000 characters a field may hold: the
    # compact result the model gets is still past 500,000 characters, so Claude Code's ceiling
    # is the only figure that keeps as much inline as it can.
    count = 30
    spec, _ = askrich.validate_interview(interview(*[choice("q%d" % i, "a") for i in range(count)]))
    raw = {"q%d" % i: {"other": "o" * 20000, "notes": "n" * 20000} for i in range(count)}
    answers = askrich.check_submission(spec, {"answers": raw})["answers"]
    result = askrich.fit_result(askrich.build_result(
        spec, answers, "g" * 20000, interview_id="0123456789ab", status="submitted", via="browser",
        submitted_at=0.0, duration_seconds=1, archive_path="/x.json"), spec)[0]
    assert result["compact"] is True
    assert len(json.dumps(result, ensure_ascii=False, separators=(",", ":"))) > 500000
