"""Attachments: uploads to an interview, stored fsynced with safe names under the log dir, served
back for thumbnails, removed while pending, named by the submit and carried by the result, its
summary, the archive and the outputSchema."""

from __future__ import annotations

import io
import os
import signal
import socket
import stat
import urllib.parse

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import askrich
from helpers.support import (InProcessServer, SubprocessServer, WAIT, api_url, choice, http_request, interview, submit,
                     wait_for_result)

PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f"
       b"\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00"
       b"\x00\x00\x00IEND\xaeB`\x82")
MIB = 1024 * 1024
# What an upload may be refused with (tests/README.md, "The form server's HTTP API", and the
# checks of every request).
UPLOAD_STATUSES = {400, 403, 404, 409, 411, 413}


def upload(url, data=b"data", name="notes.txt", content_type="text/plain", headers=None):
    sent = {"Content-Type": content_type}
    if name is not None:
        # Bytes as they are (not UTF-8, perhaps); text with its lone surrogates kept as bytes.
        raw = name if isinstance(name, bytes) else name.encode("utf-8", "surrogatepass")
        sent["X-Attachment-Name"] = urllib.parse.quote(raw, safe="")
    sent.update(headers or {})
    return http_request(api_url(url, "attachments"), "POST", data, sent)


def attachment_url(url, attachment_id):
    return api_url(url, "attachments/" + attachment_id)


def folder_of(runtime, opened):
    return os.path.join(runtime.config.log_dir, "attachments", opened.id)


def stored_path(runtime, opened, reply):
    return os.path.join(folder_of(runtime, opened), "%s-%s" % (reply["id"], reply["name"]))


def raw_upload(url, length: int, body: bytes = b"") -> bytes:
    """An upload to the form at `url` that declares `length` bytes and sends `body`, then
    only reads: the raw response."""
    port = urllib.parse.urlsplit(url).port
    path = urllib.parse.urlsplit(api_url(url, "attachments")).path
    head = ("POST %s HTTP/1.1\r\nHost: localhost:%d\r\nContent-Type: image/png\r\n"
            "X-Attachment-Name: big.png\r\nContent-Length: %d\r\n\r\n" % (path, port, length))
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        sock.sendall(head.encode() + body)
        sock.shutdown(socket.SHUT_WR)
        with sock.makefile("rb") as response:
            return response.read()


# The questions of the `opened` fixture's interview (form/conftest.py).
OPENED = (choice("db", "pg", "my"), choice("r", "x", "y"))


# -- upload -------------------------------------------------------------------------------------


def test_an_upload_is_201_once_stored_whole_in_a_0700_folder_as_a_0600_file(opened, runtime):
    response = upload(runtime.form_url(opened), PNG, "screen shot.png", "image/png")
    assert response.status == 201
    reply = response.json()
    assert set(reply) == {"id", "name", "mimeType", "bytes"}
    assert (reply["name"], reply["mimeType"], reply["bytes"]) == ("screen shot.png", "image/png", len(PNG))
    path = stored_path(runtime, opened, reply)
    assert open(path, "rb").read() == PNG
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(folder_of(runtime, opened)).st_mode) == 0o700
    assert os.listdir(folder_of(runtime, opened)) == [os.path.basename(path)], "a temporary file was left"


def test_an_upload_of_unknown_or_strange_type_is_stored_as_octet_stream(runtime, opened):
    assert upload(runtime.form_url(opened), b"x", content_type="").json()["mimeType"] == "application/octet-stream"
    assert upload(runtime.form_url(opened), b"x", content_type="nonsense").json()["mimeType"] == "application/octet-stream"
    assert upload(runtime.form_url(opened), b"x", content_type="Text/Plain; charset=utf-8").json()["mimeType"] == "text/plain"


def test_an_upload_without_its_name_header_is_400_and_stores_nothing(opened, runtime):
    response = upload(runtime.form_url(opened), b"data", name=None)
    assert response.status == 400
    assert "X-Attachment-Name" in response.json()["error"]
    assert not os.path.exists(folder_of(runtime, opened))


def test_an_empty_file_is_stored(opened, runtime):
    response = upload(runtime.form_url(opened), b"", "empty.log")
    assert response.status == 201 and response.json()["bytes"] == 0
    assert open(stored_path(runtime, opened, response.json()), "rb").read() == b""


@pytest.mark.parametrize("headers, error", [
    ({"Host": "evil.example"}, "forbidden host"),
    ({"Origin": "http://evil.example"}, "forbidden origin"),
    ({"Origin": "null"}, "forbidden origin"),
])
def test_uploads_from_a_foreign_host_or_origin_are_403(opened, runtime, headers, error):
    response = upload(runtime.form_url(opened), b"data", headers=headers)
    assert response.status == 403 and response.json() == {"error": error, "code": error.replace(" ", "-")}
    assert not os.path.exists(folder_of(runtime, opened))


def test_an_upload_to_an_unknown_interview_is_404(runtime, opened):
    base = runtime.form_url(opened).rsplit("/s/", 1)[0]
    assert upload(base + "/s/" + "A" * 24).status == 404


def test_an_upload_after_the_submit_is_409(runtime, opened):
    assert submit(runtime.form_url(opened), {}).status == 200
    response = upload(runtime.form_url(opened))
    assert response.status == 409
    assert response.json() == {"error": "interview already submitted", "code": "not-pending"}


def test_a_file_over_10_mib_is_413_without_the_server_reading_it(opened, runtime):
    raw = raw_upload(runtime.form_url(opened), 10 * MIB + 1)  # no body at all: the answer comes from the length
    assert raw.startswith(b"HTTP/1.0 413") or raw.startswith(b"HTTP/1.1 413"), raw[:200]
    assert raw.endswith(b'{"error": "a file may be at most 10 MiB", "code": "too-large"}')
    assert b"nosniff" in raw
    assert upload(runtime.form_url(opened), b"x" * (10 * MIB), "exactly.bin").status == 201


def test_the_21st_upload_is_413_naming_the_limit_and_a_removal_frees_its_place(runtime, opened):
    ids = [upload(runtime.form_url(opened), b"%d" % i, "f%d.txt" % i).json()["id"] for i in range(20)]
    response = upload(runtime.form_url(opened), b"one more")
    assert response.status == 413
    assert response.json() == {"error": "an interview may have at most 20 attachments", "code": "too-many-files"}
    assert http_request(attachment_url(runtime.form_url(opened), ids[0]), "DELETE").status == 204
    assert upload(runtime.form_url(opened), b"one more").status == 201


def test_uploads_past_50_mib_in_one_interview_are_413_naming_the_limit(runtime, opened):
    chunk = b"z" * (10 * MIB)
    for number in range(5):
        assert upload(runtime.form_url(opened), chunk, "part%d.bin" % number).status == 201
    response = upload(runtime.form_url(opened), b"1")
    assert response.status == 413
    assert response.json() == {"error": "an interview's attachments may be at most 50 MiB in all", "code": "attachments-too-large"}


def test_an_upload_cut_short_is_refused_and_leaves_no_file(opened, runtime):
    raw = raw_upload(runtime.form_url(opened), 1000, b"x" * 10)
    assert b" 400 " in raw.split(b"\r\n", 1)[0], raw[:200]
    assert b"ended after 10 of its 1000 bytes" in raw
    assert os.listdir(folder_of(runtime, opened)) == []
    assert upload(runtime.form_url(opened)).status == 201, "the refused upload still counts against the limits"


def test_a_log_dir_that_cannot_hold_attachments_is_a_clear_500_and_the_server_keeps_serving(opened, runtime):
    with open(os.path.join(runtime.config.log_dir, "attachments"), "w") as blocker:
        blocker.write("not a folder")
    response = upload(runtime.form_url(opened))
    assert response.status == 500
    assert response.json()["error"].startswith("the file could not be stored in ")
    assert http_request(api_url(runtime.form_url(opened), "state")).json()["state"] == "pending"
    os.unlink(os.path.join(runtime.config.log_dir, "attachments"))
    assert upload(runtime.form_url(opened)).status == 201, "the refused upload still counts against the limits"


def test_a_planted_symlink_for_the_interview_folder_is_refused(opened, runtime, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.makedirs(os.path.join(runtime.config.log_dir, "attachments"))
    os.symlink(str(elsewhere), folder_of(runtime, opened))
    response = upload(runtime.form_url(opened))
    assert response.status == 500 and "is not a folder" in response.json()["error"]
    assert os.listdir(str(elsewhere)) == []


# -- safe names ---------------------------------------------------------------------------------


@pytest.mark.parametrize("given_name, safe", [
    ("../../etc/passwd", "passwd"),
    ("..\\..\\Windows\\evil.exe", "evil.exe"),
    ("/absolute/path.txt", "path.txt"),
    ("..", "attachment"),
    ("...", "attachment"),
    ("", "attachment"),
    ("/", "attachment"),
    (".bashrc", "bashrc"),
    ("...hidden..txt", "hidden.txt"),
    ("a\x00b\x1fc\x7f\u200bd.txt", "abcd.txt"),
    ("line\nbreak\r.txt", "linebreak.txt"),
    ('what?<is>:this|"*.txt', "what__is__this___.txt"),
    ("trailing dots...", "trailing dots"),
    ("  spaced  ", "spaced"),
    ("x" * 300 + ".png", "x" * 96 + ".png"),
    ("é" * 150, "é" * 100),
    ("\U0001f600" * 120 + ".png", "\U0001f600" * 49 + ".png"),
])
def test_hostile_names_are_reduced_to_one_safe_base_name(given_name, safe):
    assert askrich.safe_attachment_name(given_name) == safe


@pytest.mark.parametrize("given_name", ["../../../../tmp/escape", "..", ".", "%2e%2e%2fx", "a/../../b",
                                        "\x00", "." * 300, "x" * 5000])
def test_a_hostile_name_is_stored_inside_the_interview_folder(opened, runtime, given_name):
    response = upload(runtime.form_url(opened), b"payload", given_name)
    assert response.status == 201
    path = stored_path(runtime, opened, response.json())
    folder = os.path.realpath(folder_of(runtime, opened))
    assert os.path.dirname(os.path.realpath(path)) == folder
    assert open(path, "rb").read() == b"payload"
    assert len(response.json()["name"]) <= 100 and not response.json()["name"].startswith(".")


def test_a_name_sent_raw_rather_than_percent_encoded_is_still_made_safe(opened, runtime):
    response = upload(runtime.form_url(opened), b"p", name=None, headers={"X-Attachment-Name": "../x%ZZ.txt"})
    assert response.status == 201 and response.json()["name"] == "x%ZZ.txt"


@pytest.fixture(scope="module")
def property_runtime(tmp_path_factory):
    log_dir = str(tmp_path_factory.mktemp("attachment-logs"))
    rt = askrich.Runtime(askrich.Config(log_dir=log_dir, open_browser=False), askrich.Log(log_dir, io.StringIO()))
    yield rt
    rt.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.one_of(st.text(max_size=300), st.binary(max_size=300)), data=st.binary(max_size=4096),
       content_type=st.sampled_from(["image/png", "image/webp", "text/html", "image/svg+xml", "", "a/b/c"]))
@example(name="../" * 50 + "passwd", data=b"\x00" * 10, content_type="text/html")
@example(name="\ud800.png", data=PNG, content_type="image/png")
def test_any_name_and_bytes_are_stored_inside_the_folder_and_come_back_identical_or_refused(
    property_runtime, name, data, content_type
):
    opened = property_runtime.open_interview(interview())
    response = upload(property_runtime.form_url(opened), data, name, content_type)
    if response.status != 201:
        assert response.status in UPLOAD_STATUSES and isinstance(response.json()["error"], str)
        return
    reply = response.json()
    raw = name if isinstance(name, bytes) else name.encode("utf-8", "surrogatepass")
    assert reply["name"] == askrich.safe_attachment_name(raw.decode("utf-8", "replace"))
    folder = os.path.realpath(folder_of(property_runtime, opened))
    assert os.listdir(folder) == ["%s-%s" % (reply["id"], reply["name"])]
    back = http_request(attachment_url(property_runtime.form_url(opened), reply["id"]))
    assert back.status == 200 and back.body == data
    assert back.headers["X-Content-Type-Options"] == "nosniff"


# -- reading back and removing ------------------------------------------------------------------


@pytest.mark.parametrize("content_type", sorted(askrich.ATTACHMENT_IMAGE_TYPES))
def test_the_four_image_types_come_back_as_themselves_for_thumbnails(runtime, opened, content_type):
    reply = upload(runtime.form_url(opened), PNG, "shot", content_type).json()
    response = http_request(attachment_url(runtime.form_url(opened), reply["id"]))
    assert response.status == 200 and response.body == PNG
    assert response.headers["Content-Type"] == content_type
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert "Content-Disposition" not in response.headers
    assert response.headers["Content-Security-Policy"] == askrich.CONTENT_SECURITY_POLICY


@pytest.mark.parametrize("content_type", ["text/html", "image/svg+xml", "application/javascript", "text/plain",
                                          "application/octet-stream"])
def test_anything_else_comes_back_only_as_a_download(runtime, opened, content_type):
    reply = upload(runtime.form_url(opened), b"<script>alert(1)</script>", "page é.html", content_type).json()
    response = http_request(attachment_url(runtime.form_url(opened), reply["id"]))
    assert response.status == 200 and response.body == b"<script>alert(1)</script>"
    assert response.headers["Content-Type"] == "application/octet-stream"
    assert response.headers["Content-Disposition"] == "attachment; filename*=UTF-8''page%20%C3%A9.html"
    assert response.headers["X-Content-Type-Options"] == "nosniff"


def test_an_unknown_attachment_is_404_and_another_interviews_is_not_reachable(opened, runtime):
    other = runtime.open_interview(interview())
    reply = upload(runtime.form_url(other), PNG, "theirs.png", "image/png").json()
    assert http_request(attachment_url(runtime.form_url(opened), reply["id"])).status == 404
    assert http_request(attachment_url(runtime.form_url(opened), "0123456789abcdef")).status == 404
    assert http_request(attachment_url(runtime.form_url(opened), "..%2f..%2fserver.log")).status == 404
    assert http_request(attachment_url(runtime.form_url(opened), reply["id"]), "DELETE").status == 404
    assert http_request(attachment_url(runtime.form_url(other), reply["id"])).status == 200


def test_a_removal_while_pending_is_204_and_the_file_is_gone(opened, runtime):
    reply = upload(runtime.form_url(opened), PNG, "gone.png", "image/png").json()
    path = stored_path(runtime, opened, reply)
    response = http_request(attachment_url(runtime.form_url(opened), reply["id"]), "DELETE")
    assert response.status == 204 and response.body == b""
    assert not os.path.exists(path)
    assert http_request(attachment_url(runtime.form_url(opened), reply["id"])).status == 404
    assert http_request(attachment_url(runtime.form_url(opened), reply["id"]), "DELETE").status == 404


def test_a_removal_after_the_submit_is_409_and_the_file_stays(opened, runtime):
    reply = upload(runtime.form_url(opened), PNG, "kept.png", "image/png").json()
    assert submit(runtime.form_url(opened), {}, attachments={"db": [reply["id"]]}).status == 200
    response = http_request(attachment_url(runtime.form_url(opened), reply["id"]), "DELETE")
    assert response.status == 409 and response.json() == {"error": "interview already submitted", "code": "not-pending"}
    assert os.path.exists(stored_path(runtime, opened, reply))
    assert http_request(attachment_url(runtime.form_url(opened), reply["id"])).status == 200


def test_wrong_methods_on_the_attachment_routes_are_405_with_allow(runtime, opened):
    reply = upload(runtime.form_url(opened)).json()
    response = http_request(attachment_url(runtime.form_url(opened), reply["id"]), "POST", b"x", {"X-Attachment-Name": "a"})
    assert response.status == 405 and response.headers["Allow"] == "GET, DELETE"
    response = http_request(api_url(runtime.form_url(opened), "attachments"))
    assert response.status == 405 and response.headers["Allow"] == "POST"


# -- the submit and the result ------------------------------------------------------------------


def test_the_result_carries_each_questions_attachments_and_the_general_ones_with_absolute_paths(opened, runtime):
    shot = upload(runtime.form_url(opened), PNG, "shot.png", "image/png").json()
    log = upload(runtime.form_url(opened), b"trace\n" * 100, "app.log", "text/plain").json()
    config = upload(runtime.form_url(opened), b"k=v", "settings.ini", "").json()
    response = submit(runtime.form_url(opened), {"db": {"selected": ["pg"]}}, generalNotes="see files",
                      attachments={"db": [shot["id"], log["id"], shot["id"]], "": [config["id"]]})
    assert response.status == 200
    result = wait_for_result(runtime, opened.id, 5)
    rows = {row["id"]: row for row in result["answers"]}
    assert rows["db"]["attachments"] == [
        {"id": shot["id"], "name": "shot.png", "path": stored_path(runtime, opened, shot),
         "mimeType": "image/png", "bytes": len(PNG)},
        {"id": log["id"], "name": "app.log", "path": stored_path(runtime, opened, log),
         "mimeType": "text/plain", "bytes": 600},
    ]
    assert rows["r"]["attachments"] == []
    assert result["generalAttachments"] == [
        {"id": config["id"], "name": "settings.ini", "path": stored_path(runtime, opened, config),
         "mimeType": "application/octet-stream", "bytes": 3}]
    for entry in rows["db"]["attachments"] + result["generalAttachments"]:
        assert os.path.isabs(entry["path"]) and os.path.isfile(entry["path"])
    lines = result["summary"].splitlines()
    assert lines[1] == "1. [db] Question db? -> PG | attachments: shot.png, app.log"
    assert lines[2] == "2. [r] Question r? -> UNANSWERED"
    assert lines[3] == 'General notes: "see files" | attachments: settings.ini'


def test_general_attachments_without_general_notes_still_get_their_summary_line(opened, runtime):
    shot = upload(runtime.form_url(opened), PNG, "only.png", "image/png").json()
    assert submit(runtime.form_url(opened), {}, attachments={"": [shot["id"]]}).status == 200
    summary = wait_for_result(runtime, opened.id, 5)["summary"]
    assert "General notes: none | attachments: only.png" in summary.splitlines()


@pytest.mark.parametrize("attachments, error", [
    ({"db": ["0123456789abcdef"]}, 'attachment "0123456789abcdef" is not one of this interview\'s uploads'),
    ({"nope": []}, 'attachments names unknown question id "nope"'),
    ({"db": "x"}, 'attachments of "db" must be an array of attachment ids'),
    ([], "attachments must be an object of question id to attachment ids"),
])
def test_a_submit_naming_an_unknown_attachment_or_question_is_422_and_stays_open(runtime, opened, attachments, error):
    response = submit(runtime.form_url(opened), {}, attachments=attachments)
    assert response.status == 422
    assert error in response.json()["error"]
    assert http_request(api_url(runtime.form_url(opened), "state")).json()["state"] == "pending"


def test_a_removed_upload_cannot_be_submitted(runtime, opened):
    reply = upload(runtime.form_url(opened)).json()
    assert http_request(attachment_url(runtime.form_url(opened), reply["id"]), "DELETE").status == 204
    response = submit(runtime.form_url(opened), {}, attachments={"": [reply["id"]]})
    assert response.status == 422 and reply["id"] in response.json()["error"]


def test_another_interviews_upload_cannot_be_submitted(opened, runtime):
    other = runtime.open_interview(interview())
    reply = upload(runtime.form_url(other)).json()
    assert submit(runtime.form_url(opened), {}, attachments={"db": [reply["id"]]}).status == 422


def test_a_result_without_the_form_has_empty_attachments(opened, runtime):
    upload(runtime.form_url(opened))
    result = runtime.hub.settle_without_form(opened, {}, "submitted", "elicitation")
    assert result["generalAttachments"] == []
    assert all(row["attachments"] == [] for row in result["answers"])


def test_the_output_schema_declares_both_attachment_fields():
    for name in ("ask_user_rich", "await_user_answers"):
        schema = next(tool for tool in askrich.TOOLS if tool["name"] == name)["outputSchema"]
        assert schema["properties"]["generalAttachments"]["type"] == "array"
        # A row in full (required there) or in a compact result (left out when empty).
        full, compact = schema["properties"]["answers"]["items"]["anyOf"]
        assert "attachments" in full["required"]
        for answer in (full, compact):
            item = answer["properties"]["attachments"]["items"]
            assert item["required"] == ["id", "name", "path", "mimeType", "bytes"]


def test_the_tool_descriptions_tell_the_model_attachments_have_paths_to_open():
    for name in ("ask_user_rich", "await_user_answers"):
        description = next(tool for tool in askrich.TOOLS if tool["name"] == name)["description"]
        assert "attachments" in description and "absolute path" in description


def test_the_archive_keeps_attachments_for_await_user_answers_after_a_restart(opened, runtime, tmp_path):
    shot = upload(runtime.form_url(opened), PNG, "kept.png", "image/png").json()
    assert submit(runtime.form_url(opened), {}, attachments={"r": [shot["id"]], "": [shot["id"]]}).status == 200
    runtime.close()
    config = askrich.Config(log_dir=runtime.config.log_dir, open_browser=False)
    fresh = askrich.Runtime(config, askrich.Log(config.log_dir, io.StringIO()))
    peer = InProcessServer(fresh)
    try:
        peer.initialize()
        reply = peer.tool("await_user_answers", {"sessionId": opened.id})["result"]
    finally:
        peer.close()
        fresh.close()
    structured = reply["structuredContent"]
    rows = {row["id"]: row for row in structured["answers"]}
    assert rows["r"]["attachments"][0]["path"] == stored_path(runtime, opened, shot)
    assert rows["db"]["attachments"] == []
    assert structured["generalAttachments"][0]["name"] == "kept.png"
    assert "2. [r] Question r? -> UNANSWERED | attachments: kept.png" in structured["summary"]


def test_an_archive_from_before_attachments_reads_back_with_empty_ones():
    record = {"interviewId": "0123456789ab", "title": "Old", "status": "submitted", "via": "browser",
              "submittedAt": "2026-01-01T00:00:00.000Z", "durationSeconds": 3,
              "counts": {"answered": 0, "deferred": 0, "needsInfo": 0, "unanswered": 1},
              "generalNotes": None,
              "answers": [{"id": "q", "header": "Q?", "status": "unanswered", "selected": [],
                           "selectedLabels": [], "optionTexts": {}, "other": None, "ranked": None,
                           "rankedLabels": None, "notes": None, "followedRecommendation": None}]}
    result = askrich.archived_result(record)
    assert result["generalAttachments"] == [] and result["answers"][0]["attachments"] == []


# -- nothing lost -------------------------------------------------------------------------------


def test_an_upload_acknowledged_with_201_survives_a_kill_9_right_after_it(tmp_path):
    peer = SubprocessServer(tmp_path / "logs")
    try:
        peer.initialize()
        awaiting = peer.tool("ask_user_rich", dict(interview(), delivery="link"))["result"]["structuredContent"]
        data = os.urandom(3 * MIB)
        response = upload(awaiting["url"], data, "dump.bin", "application/octet-stream")
        assert response.status == 201
        os.kill(peer.process.pid, signal.SIGKILL)  # no shutdown of any kind
        peer.process.wait(WAIT)
    finally:
        peer.close()
    folder = tmp_path / "logs" / "attachments" / awaiting["sessionId"]
    assert os.listdir(folder) == ["%s-dump.bin" % response.json()["id"]]
    assert (folder / os.listdir(folder)[0]).read_bytes() == data
