"""The form of Claude Code's own questions (the AskUserQuestion hook, tests/README.md "Claude
Code's own questions"): when the hook gives up before Claude Code's limit, the open page says
that the questions went back to the terminal, in the page's language."""

from __future__ import annotations

import askrich
from playwright.sync_api import expect
from helpers.support import ASK_USER_QUESTION


def _hand_back(f):
    """What the hook does when it stops waiting: the interview cancelled, handed back."""
    interview = f.interview
    answers = {question["id"]: askrich.unanswered() for question in interview.spec["questions"]}
    f.rt.hub.settle_without_form(interview, answers, askrich.CANCELLED, "browser", handed_back=True)


def test_an_open_form_says_the_questions_went_back_to_the_terminal(form):
    f = form(askrich.interview_from_ask_user_question(ASK_USER_QUESTION), agent="Claude Code")
    _hand_back(f)
    end = f.page.locator("section.end")
    expect(end.locator("h2")).to_have_text("These questions went back to the terminal")
    expect(end).to_contain_text("Claude Code\u2069 stopped waiting here and asks them in its terminal instead")
    german = form(askrich.interview_from_ask_user_question(ASK_USER_QUESTION), agent="Claude Code", locale="de-DE")
    _hand_back(german)
    expect(german.page.locator("section.end h2")).to_have_text("Diese Fragen werden jetzt im Terminal gestellt")
