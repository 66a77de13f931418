"""Results: the structured answers and the summary the model reads first."""

from __future__ import annotations

import json

import pytest

import askrich
from helpers.support import choice, interview

EXAMPLE = interview(
    {"id": "db", "header": "Which database?", "options": [
        {"id": "pg", "label": "Postgres"}, {"id": "my", "label": "MySQL"}], "recommended": "pg"},
    {"id": "order", "header": "Rank the goals", "kind": "rank", "options": [
        {"id": "speed", "label": "Speed"}, {"id": "cost", "label": "Cost"},
        {"id": "looks", "label": "Looks"}], "recommended": ["speed", "cost", "looks"]},
    {"id": "free", "header": "Anything else?"},
    {"id": "src", "header": "Upgrade it?", "options": [
        {"id": "up", "label": "Upgrade", "textInput": {"required": True}},
        {"id": "keep", "label": "Keep"}]},
    choice("later", "a", "b", header="Pick a logo"),
    choice("more", "a", "b", header="Budget?"),
    title="Plan",
)


ARCHIVE = "/home/me/.local/state/ask-user-rich/answers/2025-11-30T09-21-37-250Z-0123456789ab.json"


def settle(args, raw_answers, general_notes=None, duration=185.0):
    spec, _ = askrich.validate_interview(args)
    answers = askrich.check_submission(spec, {"answers": raw_answers})["answers"]
    return askrich.build_result(
        spec, answers, general_notes, interview_id="0123456789ab", status="submitted",
        via="browser", submitted_at=1764494497.25, duration_seconds=duration, archive_path=ARCHIVE,
    )


def example_result():
    return settle(
        EXAMPLE,
        {
            "db": {"selected": ["pg"], "notes": "We run it already."},
            "order": {"ranked": ["speed", "cost", "looks"]},
            "free": {"other": "Nothing really"},
            "src": {"selected": ["up"], "optionTexts": {"up": " https://example.com/issue/1 "}},
            "later": {"status": "defer"},
            "more": {"status": "needs-info", "notes": "Which quarter?", "selected": ["a"]},
        },
        "Thanks",
    )


def test_summary_of_every_kind_of_answer_line_for_line():
    assert example_result()["summary"] == "\n".join([
        '"Plan" submitted after 3m05s via browser: 4 answered, 1 deferred, 1 need more info, 0 unanswered.',
        '1. [db] Which database? -> Postgres (recommended) | notes: "We run it already."',
        "2. [order] Rank the goals -> Speed > Cost > Looks (recommended)",
        '3. [free] Anything else? -> Other: "Nothing really"',
        "4. [src] Upgrade it? -> Upgrade [https://example.com/issue/1]",
        "5. [later] Pick a logo -> DEFERRED",
        '6. [more] Budget? -> NEEDS-INFO | notes: "Which quarter?"',
        'General notes: "Thanks"',
        "Full answers (JSON) follow; notes are untruncated there.",
        "Everything, as JSON: " + ARCHIVE,
    ])


def test_structured_answers_hold_ids_labels_texts_and_recommendation_flags():
    result = example_result()
    assert list(result)[0] == "summary"
    assert result["counts"] == {"answered": 4, "deferred": 1, "needsInfo": 1, "unanswered": 0}
    assert result["submittedAt"] == "2025-11-30T09:21:37.250Z"
    assert result["durationSeconds"] == 185
    rows = {row["id"]: row for row in result["answers"]}
    assert [row["id"] for row in result["answers"]] == ["db", "order", "free", "src", "later", "more"]
    assert rows["db"] == {
        "id": "db", "header": "Which database?", "status": "answered", "selected": ["pg"],
        "selectedLabels": ["Postgres"], "optionTexts": {}, "other": None, "ranked": None,
        "rankedLabels": None, "notes": "We run it already.", "followedRecommendation": True,
        "attachments": [], "by": "person", "via": "browser",
    }
    assert rows["order"]["ranked"] == ["speed", "cost", "looks"]
    assert rows["order"]["rankedLabels"] == ["Speed", "Cost", "Looks"]
    assert rows["src"]["optionTexts"] == {"up": "https://example.com/issue/1"}
    assert rows["src"]["followedRecommendation"] is None
    # Deferred and needs-info answers drop any selection but keep the notes.
    assert rows["more"]["selected"] == [] and rows["more"]["notes"] == "Which quarter?"
    assert rows["later"]["followedRecommendation"] is None


def test_other_breaks_the_recommendation_and_the_summary_says_what_was_recommended():
    args = interview(choice("db", "pg", "my", recommended="pg"))
    result = settle(args, {"db": {"selected": ["pg"], "other": "and redis"}})
    row = result["answers"][0]
    assert row["followedRecommendation"] is False
    assert result["summary"].splitlines()[1] == (
        '1. [db] Question db? -> PG, Other: "and redis" (recommended was PG)'
    )


def test_rank_not_committed_is_unanswered_and_a_different_order_is_not_followed():
    args = interview(choice("r", "a", "b", "c", kind="rank", recommended=["a", "b", "c"]))
    assert settle(args, {"r": {"notes": "hmm"}})["answers"][0]["status"] == "unanswered"
    result = settle(args, {"r": {"ranked": ["b", "a", "c"]}})
    assert result["answers"][0]["followedRecommendation"] is False
    assert "-> B > A > C (recommended was A > B > C)" in result["summary"]


def test_multi_select_follows_the_recommendation_as_a_set():
    args = interview(choice("m", "a", "b", "c", multiSelect=True, recommended=["c", "a"]))
    result = settle(args, {"m": {"selected": ["a", "c"]}})
    assert result["answers"][0]["followedRecommendation"] is True
    assert result["answers"][0]["selectedLabels"] == ["A", "C"]


def test_summary_cuts_and_collapses_long_texts():
    args = interview(choice("q", "a", header="Why\n\n  " + "h" * 200))
    result = settle(args, {"q": {"other": "o" * 300, "notes": "n" * 300}}, "g" * 900)
    line = result["summary"].splitlines()[1]
    header = line.split("] ", 1)[1].split(" -> ")[0]
    assert header.startswith("Why hhh") and len(header) == 80 and header.endswith("…")
    assert 'Other: "' + "o" * 99 + '…"' in line
    assert '| notes: "' + "n" * 139 + '…"' in line
    assert result["summary"].splitlines()[-3] == 'General notes: "' + "g" * 399 + '…"'
    # The structured answers are never cut.
    assert result["answers"][0]["notes"] == "n" * 300


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (42, "42s"), (185, "3m05s"), (3725, "1h02m05s")])
def test_durations_read_as_hours_minutes_and_seconds(seconds, text):
    assert askrich.format_duration(seconds) == text


def test_a_declined_summary_says_declined_via_and_leaves_every_answer_unanswered():
    spec, _ = askrich.validate_interview(interview(choice("q", "a")))
    result = askrich.build_result(
        spec, {}, None, interview_id="0123456789ab", status="declined", via="elicitation",
        submitted_at=0, duration_seconds=3,
    )
    assert result["summary"].splitlines()[0] == (
        '"Test interview" declined via elicitation: 0 answered, 0 deferred, 0 need more info, 1 unanswered.'
    )
    assert result["answers"][0]["status"] == "unanswered"


def test_a_100_question_result_stays_well_under_100_kb():
    questions = [
        choice("q%03d" % i, *["opt%d" % j for j in range(8)], header="A fairly long question %d about the design?" % i,
               recommended="opt1")
        for i in range(100)
    ]
    raw = {"q%03d" % i: {"selected": ["opt1"], "notes": "a note of some length " * 3} for i in range(100)}
    spec, _ = askrich.validate_interview(interview(*questions))
    result = settle(interview(*questions), raw)
    tool_result = askrich.answers_result(result, spec)
    sent, _ = askrich.fit_result(result, spec)
    assert json.loads(tool_result["content"][1]["text"]) == {
        key: value for key, value in sent.items() if key != "summary"
    }
    # What the model reads (Claude Code shows it structuredContent alone) stays well under
    # 100 KB, i.e. far below the ~25k tokens past which a result is moved to a file.
    size = len(json.dumps(tool_result["structuredContent"], ensure_ascii=False))
    assert size < 60_000, size


@pytest.mark.parametrize(
    "raw, error",
    [
        ({"db": {"selected": ["mongo"]}}, 'question "db": unknown option id "mongo"'),
        ({"db": {"selected": ["pg", "my"]}}, 'question "db": single-select got 2 options'),
        ({"r": {"ranked": ["a", "b"]}}, 'question "r": ranked must list every option id exactly once (missing "c")'),
        ({"src": {"selected": ["up"]}}, 'question "src": option "up" needs its text'),
        ({"src": {"selected": ["up"], "optionTexts": {"up": "   "}}}, 'question "src": option "up" needs its text'),
        ({"nope": {}}, 'unknown question id "nope"'),
        ({"db": {"status": "maybe"}}, 'question "db": status must be "answer", "defer" or "needs-info", not "maybe"'),
        ({"db": "pg"}, 'question "db": an answer must be an object, not "pg"'),
    ],
)
def test_bad_answers_are_refused_with_a_clear_text(raw, error):
    spec, _ = askrich.validate_interview(
        interview(
            choice("db", "pg", "my"),
            choice("r", "a", "b", "c", kind="rank"),
            {"id": "src", "header": "S?", "options": [
                {"id": "up", "label": "Up", "textInput": {"required": True}}]},
        )
    )
    with pytest.raises(askrich.InvalidAnswers) as caught:
        askrich.check_submission(spec, {"answers": raw})
    status, body = askrich.http_error(caught.value)
    assert status == 422
    assert body["error"] == error


def test_option_text_of_an_unpicked_option_is_kept_out_of_the_result():
    args = interview({"id": "s", "header": "S?", "options": [
        {"id": "up", "label": "Up", "textInput": {}}, {"id": "keep", "label": "Keep"}]})
    result = settle(args, {"s": {"selected": ["keep"], "optionTexts": {"up": "typed then unpicked"}}})
    assert result["answers"][0]["optionTexts"] == {}
