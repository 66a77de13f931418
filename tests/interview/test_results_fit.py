"""Results that fit the agent's context: every settled result names its archive file, and a
result past 40,000 characters is sent compact (rows without headers or empty fields, a summary
of only the answers that need the agent), while the archive keeps every field."""

from __future__ import annotations

import json
import os

import jsonschema
import pytest

import askrich
from helpers.support import WAIT, api_url, choice, http_request, interview, submit, wait_for_interview

LIMIT = 40000


def compact_size(value) -> int:
    """How Claude Code hands structuredContent to the model: compact JSON, Unicode as is."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def text_size(tool_result) -> int:
    return sum(len(block["text"]) for block in tool_result["content"])


def big_interview(count=300, header_words=12):
    """`count` questions with long headers, recommended "b"; the kind an agent writes."""
    return interview(*[
        choice("q%03d" % i, "a", "b", "c", recommended="b",
               header="Question %d: " % i + " ".join(["about the design of the thing"] * header_words))
        for i in range(count)
    ], title="Big review")


def big_answers(count=300):
    """Mostly as recommended; a few with notes, Other, another pick, deferred, needs-info."""
    raw = {"q%03d" % i: {"selected": ["b"]} for i in range(count)}
    raw["q007"] = {"selected": ["b"], "notes": "Yes, but watch the cost."}
    raw["q010"] = {"selected": ["a"]}
    raw["q020"] = {"other": "Neither; use a queue"}
    raw["q030"] = {"status": "defer"}
    raw["q040"] = {"status": "needs-info", "notes": "Which region?"}
    del raw["q050"]
    return raw


def settle(args, raw, general_notes=None, archive_path="/tmp/answers/x.json"):
    spec, _ = askrich.validate_interview(args)
    answers = askrich.check_submission(spec, {"answers": raw})["answers"]
    full = askrich.build_result(
        spec, answers, general_notes, interview_id="0123456789ab", status="submitted",
        via="browser", submitted_at=1764494497.25, duration_seconds=65, archive_path=archive_path)
    return spec, full, askrich.fit_result(full, spec)[0]


def result_schema():
    return next(tool for tool in askrich.TOOLS if tool["name"] == "ask_user_rich")["outputSchema"]


def test_a_small_result_is_sent_whole_and_names_its_archive_last():
    _, full, fitted = settle(interview(choice("q", "a", "b", recommended="a")), {"q": {"selected": ["a"]}})
    assert fitted == full and "compact" not in fitted
    assert fitted["archivePath"] == "/tmp/answers/x.json"
    assert fitted["summary"].splitlines()[-2:] == [
        "Full answers (JSON) follow; notes are untruncated there.",
        "Everything, as JSON: /tmp/answers/x.json",
    ]
    jsonschema.validate(fitted, result_schema())


def test_a_result_whose_archive_failed_says_so_and_carries_null():
    _, full, fitted = settle(interview(choice("q", "a", "b")), {"q": {"selected": ["a"]}}, archive_path=None)
    assert fitted["archivePath"] is None
    assert fitted["summary"].splitlines()[-1] == (
        "Everything, as JSON: none (the answer archive could not be written).")
    jsonschema.validate(fitted, result_schema())


def _at_size(note_length):
    """A result whose size grows one character per character of its last note (the first two
    notes are fixed, as a note may hold at most 20,000 characters)."""
    raw = {"p": {"selected": ["a"], "notes": "p" * 15000}, "r": {"selected": ["a"], "notes": "r" * 15000},
           "q": {"selected": ["a"], "notes": "n" * note_length}}
    return settle(interview(choice("p", "a"), choice("r", "a"), choice("q", "a", "b")), raw)


def test_the_compact_form_starts_just_above_40000_characters():
    # Find the note length at which the larger of the two measures is exactly the limit.
    spec, _, probe = _at_size(1000)
    tool = askrich.answers_result(probe, spec)
    grows_to = max(compact_size(probe), text_size(tool))
    at_limit = 1000 + LIMIT - grows_to
    spec, _, fitted = _at_size(at_limit)
    tool = askrich.answers_result(fitted, spec)
    assert max(compact_size(fitted), text_size(tool)) == LIMIT
    assert "compact" not in fitted
    _, _, over = _at_size(at_limit + 1)
    assert over["compact"] is True


def test_a_300_question_result_is_compact_and_keeps_every_choice_and_note():
    spec, full, fitted = settle(big_interview(), big_answers(), general_notes="Ship it")
    assert compact_size(full) > 100000  # what it was before: about 34,000 tokens
    assert fitted["compact"] is True
    rows = {row["id"]: row for row in fitted["answers"]}
    assert len(rows) == 300
    for row in fitted["answers"]:
        assert "header" not in row
        assert all(value not in (None, [], {}) for value in row.values()), row
    assert rows["q001"] == {"id": "q001", "status": "answered", "selected": ["b"],
                            "selectedLabels": ["B"], "followedRecommendation": True}
    assert rows["q007"]["notes"] == "Yes, but watch the cost."
    assert rows["q020"]["other"] == "Neither; use a queue"
    assert rows["q020"]["followedRecommendation"] is False
    assert rows["q030"] == {"id": "q030", "status": "deferred"}
    assert rows["q040"] == {"id": "q040", "status": "needs-info", "notes": "Which region?"}
    assert rows["q050"] == {"id": "q050", "status": "unanswered"}
    # Beside the rows, everything of the full result but the summary, unchanged.
    for key in ("interviewId", "title", "status", "via", "submittedAt", "durationSeconds",
                "counts", "generalNotes", "generalAttachments", "archivePath"):
        assert fitted[key] == full[key]
    lines = fitted["summary"].splitlines()
    assert lines[0] == full["summary"].splitlines()[0]
    # Only the answers that need attention, numbered as in the interview.
    attention = [line for line in lines[1:] if line[0].isdigit()]
    assert [line.split(" ", 2)[1] for line in attention] == [
        "[q007]", "[q010]", "[q020]", "[q030]", "[q040]", "[q050]"]
    assert attention[0].startswith("8. [q007] Question 7: about the design")
    assert attention[0].endswith('-> B (recommended) | notes: "Yes, but watch the cost."')
    assert attention[1].endswith("-> A (recommended was B)")
    followed = [i for i in range(300) if i not in (7, 10, 20, 30, 40, 50)]
    assert lines[-3] == "Followed the recommendation (294): " + ", ".join("q%03d" % i for i in followed)
    assert lines[-2] == 'General notes: "Ship it"'
    assert lines[-1] == "Everything, as JSON: /tmp/answers/x.json"
    jsonschema.validate(fitted, result_schema())
    # The text blocks: the same summary, then the compact JSON on one line.
    tool = askrich.answers_result(fitted, spec)
    assert tool["content"][0]["text"] == fitted["summary"]
    second = tool["content"][1]["text"]
    assert "\n" not in second
    assert json.loads(second) == {key: value for key, value in fitted.items() if key != "summary"}
    # Well inside the 25,000 tokens past which Claude Code moves a result to a file.
    assert compact_size(fitted) / 4 < 10000, compact_size(fitted)
    assert text_size(tool) / 4 < 10000, text_size(tool)


def test_the_output_schema_tells_the_two_row_shapes_apart():
    schema = result_schema()
    _, full, fitted = settle(big_interview(), big_answers())
    row_schema = schema["properties"]["answers"]["items"]
    full_row, compact_row = row_schema["anyOf"]
    jsonschema.validate(full["answers"][0], full_row)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(full["answers"][0], compact_row)  # a full row carries its header
    jsonschema.validate(fitted["answers"][0], compact_row)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(fitted["answers"][0], full_row)
    assert schema["properties"]["archivePath"]["type"] == ["string", "null"]
    assert schema["properties"]["compact"]["type"] == "boolean"


def test_the_tool_descriptions_say_it_in_one_sentence():
    tools = {tool["name"]: tool for tool in askrich.TOOLS}
    for name in ("ask_user_rich", "await_user_answers"):
        description = tools[name]["description"]
        assert askrich.COMPACT_TEXT in description
    assert askrich.COMPACT_TEXT.count(". ") == 0 and "archivePath" in askrich.COMPACT_TEXT


def _wait_for_submit(server, runtime, arguments, raw, general_notes=None):
    """ask_user_rich by link, then await_user_answers blocking while the form submits; the
    await's result and the interview."""
    awaiting = server.tool("ask_user_rich", dict(arguments, delivery="link"))["result"]["structuredContent"]
    request = server.request("tools/call", {"name": "await_user_answers",
                                            "arguments": {"sessionId": awaiting["sessionId"]}})
    held = runtime.hub.get(awaiting["sessionId"])
    wait_for_interview(held, lambda i: i.activity()["waiters"] > 0, what="the await to block")
    extra = {"generalNotes": general_notes} if general_notes else {}
    assert submit(awaiting["url"], raw, **extra).status == 200
    return server.response(request, WAIT)["result"], held


def test_a_submitted_300_question_interview_arrives_compact_and_its_archive_holds_everything(server, runtime):
    server.initialize()
    result, held = _wait_for_submit(server, runtime, big_interview(), big_answers(), "Ship it")
    structured = result["structuredContent"]
    assert structured["compact"] is True
    path = structured["archivePath"]
    assert os.path.isabs(path) and os.path.dirname(path) == os.path.join(runtime.config.log_dir, "answers")
    assert structured["summary"].splitlines()[-1] == "Everything, as JSON: " + path
    with open(path, encoding="utf-8") as handle:
        record = json.load(handle)
    assert record["archivePath"] == path
    assert len(record["answers"]) == 300 and all("header" in row for row in record["answers"])
    assert record["answers"][7]["notes"] == "Yes, but watch the cost."
    assert record["answers"][7]["header"] == held.spec["questions"][7]["header"]
    assert record["generalNotes"] == "Ship it"
    # The form's API keeps the whole result: every row with its header, every note.
    page = http_request(api_url(runtime.form_url(held))).json()["result"]
    assert "compact" not in page and len(page["answers"]) == 300
    assert all("header" in row for row in page["answers"]) and page["answers"][7]["notes"] == "Yes, but watch the cost."
    assert page["summary"] == askrich.summarize(page, held.spec)
    # Read back from the archive (a restarted server): compact again, naming the same file.
    again = askrich.archived_answers(runtime.archive.find(held.id))["structuredContent"]
    assert again["compact"] is True and again["archivePath"] == path
    assert again["answers"] == structured["answers"] and again["summary"] == structured["summary"]


def test_a_small_submitted_interview_names_its_archive(server, runtime):
    server.initialize()
    args = interview(choice("q", "a", "b", recommended="a"))
    result, held = _wait_for_submit(server, runtime, args, {"q": {"selected": ["a"], "notes": "ok"}})
    structured = result["structuredContent"]
    assert "compact" not in structured and structured["answers"][0]["header"] == "Question q?"
    assert os.path.isfile(structured["archivePath"])
    assert structured["summary"].endswith("\nEverything, as JSON: " + structured["archivePath"])
    assert json.loads(result["content"][1]["text"])["archivePath"] == structured["archivePath"]


def test_when_the_archive_cannot_be_written_the_waiting_call_gets_null(server, runtime):
    server.initialize()
    os.makedirs(runtime.config.log_dir, exist_ok=True)
    with open(os.path.join(runtime.config.log_dir, "answers"), "w") as blocker:
        blocker.write("a file where the answers folder should be")
    args = interview(choice("q", "a", "b"))
    result, _ = _wait_for_submit(server, runtime, args, {"q": {"selected": ["b"]}})
    structured = result["structuredContent"]
    assert structured["status"] == "submitted" and structured["archivePath"] is None
    assert structured["summary"].splitlines()[-1] == (
        "Everything, as JSON: none (the answer archive could not be written).")
