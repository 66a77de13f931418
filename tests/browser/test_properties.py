"""Properties over generated interviews: whatever the labels and whatever digits the user
presses, the answers the server receives are exactly what the keys picked."""
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import hypothesis_profiles
from formkit import Form, answer_of

TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30).filter(str.strip)


@st.composite
def rounds(draw):
    questions, presses = [], []
    for i in range(draw(st.integers(1, 3))):
        count = draw(st.integers(1, 9))
        questions.append({
            "id": f"q{i}", "header": draw(TEXT), "multiSelect": draw(st.booleans()),
            "options": [{"id": f"o{j}", "label": draw(TEXT)} for j in range(count)],
        })
        presses.append(draw(st.lists(st.integers(1, 9), max_size=6)))
    return {"title": draw(TEXT), "questions": questions}, presses


def expected(question, digits):
    ids = [o["id"] for o in question["options"]]
    picked = []
    for d in digits:
        if d > len(ids):
            continue
        oid = ids[d - 1]
        if question["multiSelect"]:
            picked = [i for i in ids if (i in picked) != (i == oid)]
        else:
            picked = [oid]
    return picked


@settings(max_examples=100 if hypothesis_profiles.LONG else 6, deadline=None)
@given(case=rounds())
def test_digits_pick_exactly_what_reaches_the_server(browser, rt, case):
    spec, presses = case
    interview = rt.open_interview(spec)
    context = browser.new_context()
    try:
        context.set_default_timeout(5000)
        f = Form(rt, interview, context, context.new_page()).goto()
        for digits in presses:
            for d in digits:
                f.press(str(d))
            f.press("ArrowRight")
        result = f.submit_and_collect()
        for question, digits in zip(spec["questions"], presses):
            a = answer_of(result, question["id"])
            want = expected(question, digits)
            assert a["selected"] == want
            labels = {o["id"]: o["label"] for o in question["options"]}
            assert a["selectedLabels"] == [labels[i] for i in want]
            assert a["status"] == ("answered" if want else "unanswered")
        f.check_clean()
    finally:
        context.close()
