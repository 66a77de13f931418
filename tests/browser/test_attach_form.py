"""Attachments in the form: the Attach button's file picker, paste into a note, drop onto a
question or the general notes; thumbnails from our own route under the strict CSP; Remove;
refusals shown where the file was added; uploads kept across a reload; all from the keyboard."""
import base64
import json
import os

import pytest
from playwright.sync_api import expect

from formkit import PHONE, answer_of, choice, isolated
from test_screens import clipped, serious_violations

# A 2 x 2 PNG, a real image the browser decodes (a thumbnail that failed would have no width).
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg=="
)
SPEC = {"title": "Bug report", "questions": [
    choice("where", "Where does it break?", ["login", "search"]),
    choice("when", "Since when?", ["today", "always"]),
]}

PASTE_IMAGE = """([selector, bytes]) => {
  const data = new DataTransfer();
  data.items.add(new File([new Uint8Array(bytes)], "image.png", {type: "image/png"}));
  const field = document.querySelector(selector);
  field.focus();
  field.dispatchEvent(new ClipboardEvent("paste", {clipboardData: data, bubbles: true, cancelable: true}));
}"""
DROP_FILE = """([selector, name, text]) => {
  const data = new DataTransfer();
  data.items.add(new File([text], name, {type: "text/plain"}));
  const target = document.querySelector(selector);
  for (const type of ["dragenter", "dragover", "drop"]) {
    target.dispatchEvent(new DragEvent(type, {dataTransfer: data, bubbles: true, cancelable: true}));
  }
}"""
THUMBS_LOADED = """(n) => {
  const imgs = [...document.querySelectorAll("img.attach-thumb")];
  return imgs.length === n && imgs.every((img) => img.complete && img.naturalWidth === 2);
}"""


def attach_block(f, qid):
    return f.section(qid).locator(".attach")


def test_a_picked_png_and_a_pasted_one_show_thumbnails_one_is_removed_and_the_other_reaches_the_result(form):
    f = form(SPEC)
    block = attach_block(f, "where")
    block.locator(".attach-input").set_input_files(files=[{"name": "login.png", "mimeType": "image/png", "buffer": PNG}])
    expect(block.locator(".attach-item .attach-name")).to_have_text(["login.png"])
    f.page.evaluate(PASTE_IMAGE, ['section.question[data-qid="where"] .note-text', list(PNG)])
    expect(block.locator(".attach-item .attach-name")).to_have_text(["login.png", "image.png"])
    f.page.wait_for_function(THUMBS_LOADED, arg=2)
    expect(block.locator(".attach-size").first).to_have_text("%d B" % len(PNG))
    expect(f.page.locator("#announcer")).to_have_text("Attached %s (%s)." % (isolated("image.png"), isolated("%d B" % len(PNG))))

    folder = os.path.join(f.rt.config.log_dir, "attachments", f.interview.id)
    assert len(os.listdir(folder)) == 2
    block.locator(".attach-item").first.locator(".attach-remove").click()
    expect(block.locator(".attach-item .attach-name")).to_have_text(["image.png"])
    expect(f.page.locator("#announcer")).to_have_text("Removed %s." % isolated("login.png"))
    # Focus stays where the removed file was: on the Remove of the file that took its place.
    assert f.focused("el => el.getAttribute('aria-label')") == "Remove image.png"
    assert [name.split("-", 1)[1] for name in os.listdir(folder)] == ["image.png"]

    result = f.submit_and_collect()
    files = answer_of(result, "where")["attachments"]
    assert [(a["name"], a["mimeType"], a["bytes"]) for a in files] == [("image.png", "image/png", len(PNG))]
    assert os.path.isabs(files[0]["path"]) and open(files[0]["path"], "rb").read() == PNG
    assert answer_of(result, "when")["attachments"] == [] and result["generalAttachments"] == []


def test_uploads_survive_a_reload_with_the_draft(form):
    f = form(SPEC)
    block = attach_block(f, "where")
    block.locator(".attach-input").set_input_files(files=[{"name": "kept.png", "mimeType": "image/png", "buffer": PNG}])
    expect(block.locator(".attach-item .attach-name")).to_have_text(["kept.png"])
    f.reload()
    expect(attach_block(f, "where").locator(".attach-item .attach-name")).to_have_text(["kept.png"])
    f.page.wait_for_function(THUMBS_LOADED, arg=1)
    result = f.submit_and_collect()
    assert [a["name"] for a in answer_of(result, "where")["attachments"]] == ["kept.png"]


def test_a_file_too_big_is_refused_under_its_note_and_announced_without_an_upload(form):
    f = form(SPEC)
    block = attach_block(f, "where")
    # Made in the page: 10 MiB through Playwright's wire takes longer than the whole test.
    block.locator(".attach-input").evaluate("""(input) => {
      const data = new DataTransfer();
      data.items.add(new File([new Uint8Array(10 * 1024 * 1024 + 1)], "huge.log", {type: "text/plain"}));
      data.items.add(new File(["fine"], "small.log", {type: "text/plain"}));
      input.files = data.files;
      input.dispatchEvent(new Event("change", {bubbles: true}));
    }""")
    expect(block.locator(".attach-item .attach-name")).to_have_text(["small.log"])
    expect(block.locator(".attach-problem")).to_have_text(isolated("huge.log") + " is not attached: a file may be at most " + isolated("10 MB") + ".")
    expect(block.locator(".attach-problem")).to_be_visible()
    # Not an image: a name and a size, no thumbnail.
    assert block.locator("img").count() == 0
    expect(block.locator(".attach-size")).to_have_text("4 B")
    assert len(os.listdir(os.path.join(f.rt.config.log_dir, "attachments", f.interview.id))) == 1


def test_a_refusal_from_the_server_is_shown_where_the_file_was_added(form):
    f = form(SPEC)
    for number in range(20):
        f.page.evaluate("""(n) => fetch(`/api/s/${location.pathname.split("/")[2]}/attachments`, {
            method: "POST", headers: {"X-Attachment-Name": `f${n}.txt`}, body: "x"})""", number)
    block = attach_block(f, "where")
    f.allow("413")
    block.locator(".attach-input").set_input_files(files=[{"name": "one-more.txt", "mimeType": "text/plain", "buffer": b"x"}])
    # The server refused it (the page did not know of the other 20): said in the form's words.
    expect(block.locator(".attach-problem")).to_have_text(
        isolated("one-more.txt") + " is not attached: an interview may have at most 20 files.")
    expect(f.page.locator("#announcer")).to_have_text(
        isolated("one-more.txt") + " is not attached: an interview may have at most 20 files.")


@pytest.mark.parametrize("status, code, said", [
    (413, "too-large", "a file may be at most " + isolated("10 MB") + "."),
    (413, "attachments-too-large", "an interview's files may total at most " + isolated("50 MB") + "."),
    (413, "too-many-files", "an interview may have at most 20 files."),
    (409, "not-pending", "this interview takes no more answers."),
])
def test_the_form_words_a_refusal_by_its_code_not_by_the_servers_text(form, status, code, said):
    f = form(SPEC)
    # The server's English may be reworded at any time; the code is what the form reads.
    f.page.route("**/api/s/*/attachments", lambda route: route.fulfill(
        status=status, content_type="application/json",
        body=json.dumps({"error": "reworded, in no language the form knows", "code": code})))
    f.allow(str(status))
    block = attach_block(f, "where")
    block.locator(".attach-input").set_input_files(files=[{"name": "x.txt", "mimeType": "text/plain", "buffer": b"x"}])
    expect(block.locator(".attach-problem")).to_have_text(isolated("x.txt") + " is not attached: " + said)


def test_a_removal_the_server_has_nothing_for_is_read_by_its_code_not_its_status(form):
    f = form(SPEC)
    block = attach_block(f, "where")
    block.locator(".attach-input").set_input_files(files=[{"name": "x.txt", "mimeType": "text/plain", "buffer": b"x"}])
    expect(block.locator(".attach-item .attach-name")).to_have_text(["x.txt"])
    # "not-found": the server has it no more, which is what was asked, whatever the status.
    f.page.route("**/api/s/*/attachments/*", lambda route: route.fulfill(
        status=410, content_type="application/json",
        body=json.dumps({"error": "reworded, in no language the form knows", "code": "not-found"})))
    f.allow("410")
    block.locator(".attach-item .attach-remove").click()
    expect(block.locator(".attach-item")).to_have_count(0)
    expect(block.locator(".attach-problem")).to_be_hidden()


def test_the_attach_button_opens_the_picker_from_the_keyboard(form):
    f = form(SPEC)
    block = attach_block(f, "where")
    # The picker's own dialog is the browser's: seen here as the click on the file input that
    # opens it (Playwright's file-chooser event sometimes missed a dialog opened at once).
    block.locator(".attach-input").evaluate(
        "(input) => input.addEventListener('click', (e) => { window.__picker = input.multiple; e.preventDefault(); })")
    block.locator(".attach-button").focus()
    f.press("Enter")
    f.page.wait_for_function("() => window.__picker === true")
    block.locator(".attach-input").set_input_files(files=[
        {"name": "a.txt", "mimeType": "text/plain", "buffer": b"a"},
        {"name": "b.txt", "mimeType": "text/plain", "buffer": b"bb"}])
    expect(block.locator(".attach-item .attach-name")).to_have_text(["a.txt", "b.txt"])
    f.page.evaluate("() => { window.__picker = null; }")
    f.press("Space")  # focus stayed on the button: Space opens it too
    f.page.wait_for_function("() => window.__picker === true")
    # Remove from the keyboard: Tab reaches each Remove button, Enter removes.
    f.press("Tab", "Tab")
    assert f.focused("el => el.getAttribute('aria-label')") == "Remove b.txt"
    f.press("Enter")
    expect(attach_block(f, "where").locator(".attach-item .attach-name")).to_have_text(["a.txt"])
    assert f.focused("el => el.getAttribute('aria-label')") == "Remove a.txt"


def test_a_file_dropped_on_a_question_or_the_general_notes_is_attached_there(form):
    f = form(SPEC)
    f.page.evaluate(DROP_FILE, ['section.question[data-qid="where"]', "trace.txt", "stack"])
    expect(attach_block(f, "where").locator(".attach-item .attach-name")).to_have_text(["trace.txt"])
    f.press("End")
    general = f.page.locator(".review .attach")
    f.page.evaluate(DROP_FILE, [".review .general", "setup.ini", "k=v"])
    expect(general.locator(".attach-item .attach-name")).to_have_text(["setup.ini"])
    result = f.submit_and_collect()
    assert [a["name"] for a in answer_of(result, "where")["attachments"]] == ["trace.txt"]
    assert [(a["name"], a["bytes"]) for a in result["generalAttachments"]] == [("setup.ini", 3)]
    assert "General notes: none | attachments: setup.ini" in result["summary"]


def test_a_text_paste_into_a_note_stays_text(form):
    f = form(SPEC)
    note = f.section("where").locator(".note-text")
    note.focus()
    f.page.evaluate("""() => {
      const data = new DataTransfer();
      data.setData("text/plain", "just words");
      const field = document.activeElement;
      const ev = new ClipboardEvent("paste", {clipboardData: data, bubbles: true, cancelable: true});
      field.dispatchEvent(ev);
      window.__pasteKept = !ev.defaultPrevented;
    }""")
    assert f.page.evaluate("window.__pasteKept") is True
    assert attach_block(f, "where").locator(".attach-item").count() == 0


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_list_of_uploads_passes_axe_and_fits_a_phone(form, scheme, shot):
    f = form(SPEC, color_scheme=scheme, viewport=PHONE)
    block = attach_block(f, "where")
    block.locator(".attach-input").set_input_files(files=[
        {"name": "screenshot-of-the-login-page-after-the-upgrade-to-version-two.png", "mimeType": "image/png",
         "buffer": PNG},
        {"name": "server.log", "mimeType": "text/plain", "buffer": b"x" * 5000},
    ])
    expect(block.locator(".attach-item:not(.pending)")).to_have_count(2)
    f.page.wait_for_function(THUMBS_LOADED, arg=1)
    block.locator(".attach-input").evaluate("""(input) => {
      const data = new DataTransfer();
      data.items.add(new File([new Uint8Array(10 * 1024 * 1024 + 1)], "huge.bin"));
      input.files = data.files;
      input.dispatchEvent(new Event("change", {bubbles: true}));
    }""")
    expect(block.locator(".attach-problem")).to_be_visible()
    f.settle()
    shot(f.page, f"attachments-{scheme}-phone")
    assert serious_violations(f.page) == []
    assert clipped(f.page)["out"] == []
