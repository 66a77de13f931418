"""The form at the edges: a submit waits for a file still uploading on a slow network, and
says so; a submit the server could not keep (a full disk) keeps every answer and sends again;
a free text counts down near its limit, and a longer paste is offered as a .txt attachment."""
import os

from playwright.sync_api import expect

from formkit import answer_of, choice, isolated, wait_for_result
from helpers.support import WAIT, disk_full

SPEC = {"title": "Bug report", "questions": [choice("where", "Where does it break?", ["login", "search"])]}
MIB = 1024 * 1024


def throttle(f, upload_bytes_per_second):
    """Chromium's own network emulation: every request body leaves the browser at that rate."""
    cdp = f.context.new_cdp_session(f.page)
    cdp.send("Network.enable")
    cdp.send("Network.emulateNetworkConditions", {
        "offline": False, "latency": 20, "downloadThroughput": -1, "uploadThroughput": upload_bytes_per_second,
    })
    return cdp


def answer_everything(f):
    f.option("where", "login").check()


def test_a_submit_waits_for_a_screenshot_still_uploading_on_a_slow_network(form):
    f = form(SPEC)
    answer_everything(f)
    throttle(f, 1 * MIB)  # a 3 MiB screenshot takes about three seconds
    screenshot = os.urandom(3 * MIB)
    block = f.section("where").locator(".attach")
    # Handing 3 MiB to the browser is slow on a loaded machine: more than the default 5 s.
    block.locator(".attach-input").set_input_files(
        files=[{"name": "screenshot.png", "mimeType": "image/png", "buffer": screenshot}], timeout=60000)
    expect(block.locator(".attach-item.pending")).to_have_count(1)
    f.press("Escape", "End")
    f.page.locator("#btn-submit").click()
    status = f.page.locator(".review .submit-status")
    expect(status).to_have_text("Waiting for 1 file to finish uploading before the answers are sent…")
    assert f.interview.state == "pending", "the answers left before the file they should name"
    f.page.wait_for_selector("section.end", timeout=30000)
    result = wait_for_result(f.rt, f.interview.id, timeout=WAIT)
    files = answer_of(result, "where")["attachments"]
    assert [(a["name"], a["bytes"]) for a in files] == [("screenshot.png", 3 * MIB)]
    assert open(files[0]["path"], "rb").read() == screenshot


def test_a_free_text_counts_down_near_the_limit_and_a_longer_paste_becomes_a_txt_file(form):
    f = form(SPEC)
    note = f.section("where").locator(".note-text")
    note.fill("n" * 19500)
    counter = f.section("where").locator(".text-left")
    expect(counter).to_have_text("500 characters left")
    assert note.evaluate("el => el.maxLength") == 20000
    assert counter.get_attribute("id") in note.get_attribute("aria-describedby").split()
    note.fill("short")
    expect(counter).to_be_hidden()
    long_text = "line of a pasted log\n" * 1500  # 31,500 characters
    note.focus()
    kept = f.page.evaluate("""(text) => {
      const data = new DataTransfer();
      data.setData("text/plain", text);
      const ev = new ClipboardEvent("paste", {clipboardData: data, bubbles: true, cancelable: true});
      document.activeElement.dispatchEvent(ev);
      return !ev.defaultPrevented;
    }""", long_text)
    assert kept is False
    offer = f.section("where").locator(".text-offer")
    expect(offer.locator("p")).to_have_text(
        "This text has 31,500 characters, more than the 20,000 a field can hold. Attach it as a text file instead?")
    assert f.focused("el => el.textContent") == "Attach as a " + isolated(".txt") + " file"
    f.press("Enter")
    block = f.section("where").locator(".attach")
    expect(block.locator(".attach-item:not(.pending) .attach-name")).to_have_text(["pasted-text.txt"])
    expect(offer).to_have_count(0)
    assert note.input_value() == "short"
    answer_everything(f)
    result = f.submit_and_collect()
    files = answer_of(result, "where")["attachments"]
    assert [(a["name"], a["mimeType"], a["bytes"]) for a in files] == [("pasted-text.txt", "text/plain", len(long_text))]
    assert open(files[0]["path"], encoding="utf-8").read() == long_text
    assert answer_of(result, "where")["notes"] == "short"


def test_answers_the_server_could_not_save_stay_in_the_form_and_are_sent_again(form, monkeypatch):
    import askrich

    f = form(SPEC)
    f.allow("507")  # the browser logs the refused request
    real = askrich.write_private_file
    monkeypatch.setattr(askrich, "write_private_file", disk_full)
    answer_everything(f)
    f.section("where").locator(".note-text").fill("every word of it")
    f.press("Escape", "End")
    f.page.locator("#btn-submit").click()
    problem = f.page.locator(".review .submit-problem")
    expect(problem.locator("p")).to_have_text(
        "The answers could not be saved on this computer (%s). Nothing is lost: "
        "they are still in this form. Send them again once there is room." % isolated("No space left on device"))
    assert f.interview.state == "pending"
    f.reload()  # the draft still holds every answer
    assert f.section("where").locator(".note-text").input_value() == "every word of it"
    f.press("Escape", "End")
    f.page.locator("#btn-submit").click()
    again = problem.locator(".send-again")
    expect(again).to_have_text("Send again")
    monkeypatch.setattr(askrich, "write_private_file", real)  # room again
    again.click()
    f.page.wait_for_selector("section.end")
    result = wait_for_result(f.rt, f.interview.id, timeout=WAIT)
    assert answer_of(result, "where")["selected"] == ["login"]
    assert answer_of(result, "where")["notes"] == "every word of it"
    assert result["archivePath"] and os.path.exists(result["archivePath"])
