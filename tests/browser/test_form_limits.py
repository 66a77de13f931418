"""The form keeps the server's limits, read from /api/s: lowered in the server, they are lowered
in the page (no number of the form's own)."""
import os

from playwright.sync_api import expect

import askrich
from formkit import choice, isolated

SPEC = {"title": "Bug report", "questions": [choice("where", "Where does it break?", ["login", "search"])]}

PICK = """(input, files) => {
  const data = new DataTransfer();
  for (const [name, size] of files) data.items.add(new File([new Uint8Array(size)], name, {type: "text/plain"}));
  input.files = data.files;
  input.dispatchEvent(new Event("change", {bubbles: true}));
}"""


def test_the_form_counts_down_and_refuses_files_by_the_limits_the_server_sends(form, monkeypatch):
    monkeypatch.setattr(askrich, "FREE_TEXT_MAX", 300)
    monkeypatch.setattr(askrich, "ATTACHMENT_MAX_BYTES", 1000)
    monkeypatch.setattr(askrich, "ATTACHMENTS_MAX_COUNT", 2)
    f = form(SPEC)
    note = f.section("where").locator(".note-text")
    note.fill("n" * 290)
    assert note.evaluate("el => el.maxLength") == 300
    expect(f.section("where").locator(".text-left")).to_have_text("10 characters left")
    block = f.section("where").locator(".attach")
    block.locator(".attach-input").evaluate(PICK, [["big.log", 1001], ["one.log", 1000], ["two.log", 5],
                                                   ["three.log", 5]])
    expect(block.locator(".attach-item .attach-name")).to_have_text(["one.log", "two.log"])
    problems = block.locator(".attach-problem")
    expect(problems).to_contain_text(isolated("big.log") + " is not attached")
    expect(problems).to_contain_text(isolated("three.log") + " is not attached")
    # Refused in the page, before any upload: the server stored the two it was sent.
    assert len(os.listdir(os.path.join(f.rt.config.log_dir, "attachments", f.interview.id))) == 2
