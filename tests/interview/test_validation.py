"""Validation: every problem at once, with the exact texts and their fixes."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import askrich
from helpers.support import choice, interview


def problems_of(args) -> list:
    with pytest.raises(askrich.InvalidInterview) as caught:
        askrich.validate_interview(args)
    text = str(caught.value)
    assert text.startswith("Invalid interview:\n")
    return text.splitlines()[1:]


def test_a_valid_interview_comes_back_with_every_default_filled():
    spec, options = askrich.validate_interview(
        interview(choice("db", "pg", "my", recommended="pg"))
    )
    assert options == {"delivery": "browser", "timeoutSeconds": None}
    question = spec["questions"][0]
    assert question == {
        "id": "db",
        "header": "Question db?",
        "body": None,
        "kind": "choice",
        "options": [
            {"id": "pg", "label": "PG", "description": None, "preview": None, "textInput": None},
            {"id": "my", "label": "MY", "description": None, "preview": None, "textInput": None},
        ],
        "recommended": ["pg"],
        "rationale": None,
        "multiSelect": False,
        "allowOther": True,
        "dependsOn": [],
        "needsPerson": False,
    }
    assert spec["intro"] is None


def test_missing_title_and_questions_are_both_reported():
    assert problems_of({}) == [
        '- title: "title" is required',
        '- questions: "questions" must be a non-empty array',
    ]


def test_required_header_and_wrong_types_name_the_value():
    lines = problems_of(
        interview(choice("a", "x"), choice("b", "x"), {"id": "x", "multiSelect": "yes", "options": []})
    )
    assert lines == [
        '- questions[2] (x): "header" is required',
        '- questions[2] (x): "multiSelect" must be true or false, not "yes"',
    ]


def test_unknown_field_suggests_the_close_match():
    lines = problems_of(interview(choice("db", "a", "b", multiselect=True)))
    assert lines == [
        '- questions[0] (db): unknown field "multiselect"; did you mean "multiSelect"?'
    ]


def test_unknown_field_without_a_close_match_has_no_suggestion():
    lines = problems_of(interview(choice("db", "a", "b", zzzqqq=1)))
    assert lines == ['- questions[0] (db): unknown field "zzzqqq"']


def test_unknown_top_level_field_is_an_error():
    lines = problems_of(interview(timeout=5))
    assert lines == ['- timeout: unknown field "timeout"; did you mean "timeoutSeconds"?']


def test_non_ascii_id_gets_the_slug_suggestion():
    lines = problems_of(interview(choice("seção-tabs", "a")))
    assert lines == [
        '- questions[0] (seção-tabs): id "seção-tabs" is not ASCII-safe: ids may only contain '
        "A-Z, a-z, 0-9, '_', '.', ':' and '-' (no accents, spaces or other Unicode); "
        'use "secao-tabs" instead. Labels and headers may use any characters.'
    ]


def test_id_with_no_possible_slug_leaves_out_the_suggestion():
    lines = problems_of(interview(choice("日本", "a")))
    assert lines[0].endswith("(no accents, spaces or other Unicode). Labels and headers may use any characters.")
    assert "instead" not in lines[0]


def test_option_ids_recommended_and_depends_on_entries_are_checked_as_ids():
    lines = problems_of(
        interview(
            choice("a", "x"),
            {
                "id": "b",
                "header": "B?",
                "options": [{"id": "opção 1", "label": "One"}],
                "dependsOn": ["á"],
            },
        )
    )
    assert any(l.startswith('- questions[1] (b).options[0]: id "opção 1" is not ASCII-safe') and 'use "opcao-1" instead.' in l for l in lines)
    assert any(l.startswith('- questions[1] (b): id "á" is not ASCII-safe') and 'use "a" instead.' in l for l in lines)


def test_a_repeated_question_or_option_id_is_reported_at_the_repeat():
    lines = problems_of(
        interview(choice("a", "x", "x"), choice("a", "y"))
    )
    assert '- questions[0] (a).options[2]: duplicate option id "x"' not in lines
    assert '- questions[0] (a).options[1]: duplicate option id "x"' in lines
    assert '- questions[1] (a): duplicate question id "a"' in lines


def test_question_that_cannot_be_answered():
    lines = problems_of(interview(choice("free", allowOther=False)))
    assert lines == ["- questions[0] (free): has no options and allowOther=false, so it cannot be answered"]


def test_recommendation_problems_on_choice_questions():
    lines = problems_of(
        interview(
            choice("one", "a", "b", recommended=["a", "b"]),
            choice("two", "a", "b", recommended="nope"),
            {"id": "db", "header": "DB?", "options": [{"id": "pg", "label": "Postgres"}], "recommended": "Postgres"},
            {"id": "db2", "header": "DB?", "options": [{"id": "pg", "label": "Postgres SQL"}], "recommended": "Postgres-SQL"},
        )
    )
    assert lines == [
        "- questions[0] (one): several recommended ids but multiSelect is false",
        '- questions[1] (two): recommended "nope" is not one of its option ids (ids: a, b)',
        '- questions[2] (db): recommended "Postgres" is not one of its option ids (it looks like a label; use the id "pg")',
        '- questions[3] (db2): recommended "Postgres-SQL" is not one of its option ids (it looks like a label; use the id "pg")',
    ]


def test_multi_select_takes_an_array_of_recommended_ids():
    spec, _ = askrich.validate_interview(
        interview(choice("m", "a", "b", "c", multiSelect=True, recommended=["a", "c"]))
    )
    assert spec["questions"][0]["recommended"] == ["a", "c"]


def test_rank_questions_refuse_one_option_multiselect_a_single_or_partial_order_and_text_inputs():
    lines = problems_of(
        interview(
            choice("r1", "a", kind="rank"),
            choice("r2", "a", "b", kind="rank", multiSelect=True),
            choice("r3", "a", "b", kind="rank", recommended="a"),
            choice("r4", "a", "b", "c", kind="rank", recommended=["a", "b", "b", "zzz"]),
            {"id": "r5", "header": "R?", "kind": "rank", "options": [
                {"id": "a", "label": "A", "textInput": {}}, {"id": "b", "label": "B"}]},
        )
    )
    assert lines == [
        "- questions[0] (r1): a rank question needs at least 2 options to order (it has 1)",
        "- questions[1] (r2): multiSelect does not apply to rank questions; drop it (the user orders every option)",
        '- questions[2] (r3): recommended on a rank question is the recommended order, an array holding every option id exactly once (e.g. ["a", "b"]), not the single id "a"',
        '- questions[3] (r4): recommended must list every option id exactly once, in the order you recommend (missing "c"; not option ids: "zzz"; repeated "b"; ids: ["a", "b", "c"])',
        "- questions[4] (r5).options[0]: textInput does not apply to rank options",
    ]


def test_rank_questions_never_allow_other():
    spec, _ = askrich.validate_interview(interview(choice("r", "a", "b", kind="rank")))
    assert spec["questions"][0]["allowOther"] is False


def test_allow_other_true_on_a_rank_question_is_accepted_and_changes_nothing():
    spec, _ = askrich.validate_interview(interview(choice("r", "a", "b", kind="rank", allowOther=True)))
    assert spec["questions"][0]["allowOther"] is False
    plain, _ = askrich.validate_interview(interview(choice("r", "a", "b", kind="rank")))
    assert spec == plain


def test_depends_on_itself_a_later_or_an_unknown_question_is_reported():
    lines = problems_of(
        interview(
            choice("a", "x", dependsOn=["a"]),
            choice("b", "x", dependsOn=["c"]),
            choice("c", "x", dependsOn=["zz"]),
        )
    )
    assert lines == [
        "- questions[0] (a): depends on itself",
        '- questions[1] (b): dependsOn "c" points at a later question; move "c" before "b" or drop the link',
        '- questions[2] (c): dependsOn "zz" is not an earlier question id',
    ]


def test_timeout_seconds_outside_1_to_604800_and_an_unknown_delivery_are_reported():
    lines = problems_of(interview(timeoutSeconds=0, delivery="email"))
    assert lines == [
        '- delivery: "delivery" must be one of "browser", "link", "elicitation", not "email"',
        '- timeoutSeconds: "timeoutSeconds" must be an integer from 1 to 604800 (seconds), not 0',
    ]
    assert problems_of(interview(timeoutSeconds=1.5))
    assert problems_of(interview(timeoutSeconds=True))
    assert problems_of(interview(timeoutSeconds=604801))
    _, options = askrich.validate_interview(interview(timeoutSeconds=604800, delivery="link"))
    assert options == {"delivery": "link", "timeoutSeconds": 604800}


def test_text_input_is_normalized_and_checked():
    spec, _ = askrich.validate_interview(
        interview({"id": "s", "header": "S?", "options": [
            {"id": "up", "label": "Upgrade", "textInput": {"required": True}},
            {"id": "keep", "label": "Keep", "textInput": {"placeholder": "why"}},
        ]})
    )
    options = spec["questions"][0]["options"]
    assert options[0]["textInput"] == {"placeholder": None, "required": True}
    assert options[1]["textInput"] == {"placeholder": "why", "required": False}
    lines = problems_of(
        interview({"id": "s", "header": "S?", "options": [
            {"id": "up", "label": "Up", "textInput": {"required": "yes", "hint": 1}}]})
    )
    assert lines == [
        '- questions[0] (s).options[0].textInput: unknown field "hint"',
        '- questions[0] (s).options[0].textInput: "required" must be true or false, not "yes"',
    ]


def test_every_problem_of_a_long_interview_is_reported_in_one_go():
    questions = [choice("q%d" % i, "a", recommended="b") for i in range(30)]
    assert len(problems_of(interview(*questions))) == 30


def test_no_upper_bound_on_questions_options_or_header_length():
    options = ["o%d" % i for i in range(200)]
    questions = [choice("q%d" % i, *options, header="x" * 5000) for i in range(150)]
    spec, _ = askrich.validate_interview(interview(*questions))
    assert len(spec["questions"]) == 150


def test_appended_questions_are_numbered_from_zero_and_may_depend_on_existing_ones():
    questions = askrich.validate_questions([choice("n", "a", dependsOn=["old"])], ["old"])
    assert questions[0]["dependsOn"] == ["old"]
    with pytest.raises(askrich.InvalidInterview) as caught:
        askrich.validate_questions(
            [choice("old", "a"), choice("m", "a", dependsOn=["x"])],
            ["old"],
            heading="Invalid follow-up questions:",
        )
    assert str(caught.value).splitlines() == [
        "Invalid follow-up questions:",
        '- questions[0] (old): duplicate question id "old"',
        '- questions[1] (m): dependsOn "x" is not an earlier question id',
    ]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(list(askrich.ASK_FIELDS + askrich.QUESTION_FIELDS + askrich.OPTION_FIELDS) + ["x"]),
        children,
        max_size=6,
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_validation_never_raises_anything_but_a_problem_list(value):
    try:
        spec, _ = askrich.validate_interview(value)
    except askrich.InvalidInterview as problems:
        assert problems.problems and all(": " in line for line in problems.problems)
    else:
        json.dumps(spec)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(askrich.QUESTION_FIELDS),
        json_values,
        max_size=len(askrich.QUESTION_FIELDS),
    )
)
def test_question_validation_never_raises_on_any_field_values(question):
    try:
        askrich.validate_interview({"title": "t", "questions": [question]})
    except askrich.InvalidInterview:
        pass


def tool_schema(name):
    return next(tool["inputSchema"] for tool in askrich.TOOLS if tool["name"] == name)


def schema_and_fields():
    """(JSON schema, the validator's table of its fields) for every object a tool takes."""
    question = askrich.QUESTION_SCHEMA
    option = question["properties"]["options"]["items"]
    return [
        (tool_schema("ask_user_rich"), askrich.ASK_FIELDS),
        (tool_schema("append_questions"), askrich.APPEND_FIELDS),
        (tool_schema("await_user_answers"), askrich.AWAIT_FIELDS),
        (question, askrich.QUESTION_FIELDS),
        (option, askrich.OPTION_FIELDS),
        (option["properties"]["textInput"], askrich.TEXT_INPUT_FIELDS),
    ]


def test_every_field_the_schemas_name_is_one_the_validator_takes_and_no_other():
    for schema, fields in schema_and_fields():
        assert list(schema["properties"]) == list(fields)
        assert schema["additionalProperties"] is False
    # What the validator does with each name the schemas give, whatever its value.
    text_input = {name: None for name in askrich.TEXT_INPUT_FIELDS}
    option = dict({name: None for name in askrich.OPTION_FIELDS}, id="a", label="A", textInput=text_input)
    question = dict({name: None for name in askrich.QUESTION_FIELDS}, id="q", header="Q?", options=[option])
    args = dict({name: None for name in askrich.ASK_FIELDS}, title="T", questions=[question])
    assert askrich.validate_interview(args)
    for broken in ({"zzqq": 1}, {"options": [dict(option, zzqq=1)]},
                   {"options": [dict(option, textInput=dict(text_input, zzqq=1))]}):
        assert problems_of(dict(args, questions=[dict(question, **broken)]))[-1].endswith('unknown field "zzqq"')
    for fields in (askrich.APPEND_FIELDS, askrich.AWAIT_FIELDS):
        problems = askrich.check_session_arguments(dict({name: None for name in fields}, sessionId="x", zzqq=1), fields)
        assert problems.lines == ['zzqq: unknown field "zzqq"']


def test_a_schema_and_its_fields_that_drift_apart_stop_the_module():
    with pytest.raises(ValueError, match="differ: \\['extra'\\]"):
        askrich.fields_schema(("id",), {"id": {"type": "string"}, "extra": {"type": "string"}})
    with pytest.raises(ValueError, match="differ: \\['label'\\]"):
        askrich.fields_schema(("id", "label"), {"id": {"type": "string"}})


def test_the_rules_and_the_delivery_description_list_every_delivery_and_the_limits_in_force():
    ask = next(tool for tool in askrich.TOOLS if tool["name"] == "ask_user_rich")
    delivery = ask["inputSchema"]["properties"]["delivery"]
    assert delivery["enum"] == list(askrich.DELIVERIES) and delivery["default"] == askrich.DELIVERIES[0]
    said = [delivery["description"].index(name + (" (default)" if name == "browser" else "") + ":")
            for name in askrich.DELIVERIES]
    assert said == sorted(said)
    assert 'delivery is "browser", "link" or "elicitation".' in askrich.RULES_TEXT
    assert "match %s:" % askrich.ID_PATTERN in askrich.RULES_TEXT
    assert "from 1 to %d;" % askrich.MAX_TIMEOUT_SECONDS in askrich.RULES_TEXT
    assert askrich.RULES_TEXT in ask["description"]
    assert askrich.spoken_list(["a"]) == '"a"' and askrich.spoken_list(["a", "b"]) == '"a" or "b"'
    pattern = re.compile(askrich.ID_PATTERN)
    assert pattern.match("a" * askrich.ID_MAX) and not pattern.match("a" * (askrich.ID_MAX + 1))
    assert {ch for ch in map(chr, range(128)) if pattern.match(ch)} == askrich.ID_ALLOWED


def test_every_answer_status_is_counted_and_stated_by_the_result_schema():
    statuses = set(askrich.ANSWER_MODES.values()) | {askrich.unanswered()["status"]}
    assert set(askrich.ANSWER_COUNT_KEYS) == statuses
    answer = askrich.ANSWER_SCHEMA["properties"]["status"]["enum"]
    counts = askrich.RESULT_SCHEMA["properties"]["counts"]["properties"]
    assert set(answer) == statuses and list(counts) == list(askrich.ANSWER_COUNT_KEYS.values())
    lines = askrich.Problems()
    askrich._check_answer(askrich.validate_interview(interview())[0]["questions"][0], {"status": "maybe"},
                          "answers.q", lines)
    assert lines.lines == ['answers.q: status must be "answer", "defer" or "needs-info", not "maybe"']
