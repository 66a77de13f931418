"""Hostile HTTP (tests/README.md, "Security"): fuzzed methods, paths, headers and bodies on every route; malformed
requests; traversal; slow clients and 200 held connections; SSE streams piling up; tokens kept
out of logs, error texts and later progress messages, and looked up by digest.

Requests are written on raw sockets so that nothing (Host, Content-Length, the request line)
is fixed up by a client library on the way."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import secrets
import socket
import threading
import time
import urllib.parse

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import askrich
from helpers import hypothesis_profiles
from helpers import strategies
from helpers.support import InProcessServer, choice, interview, threads_still_running, wait_for_interview, wait_for_result

# Under ASK_USER_RICH_FUZZ=long every test here is a long run: `-m slow` selects them.
pytestmark = [pytest.mark.slow] if hypothesis_profiles.LONG else []

# Every status the form server may send (tests/README.md, "The form server's HTTP API", plus what http.server itself answers to
# requests it cannot parse: 414, 431, 501, 505).
DOCUMENTED = {200, 204, 400, 403, 404, 405, 409, 411, 413, 414, 415, 422, 431, 501, 505}
SECURITY_HEADERS = {
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "content-security-policy": askrich.CONTENT_SECURITY_POLICY,
}
LEAK_MARKERS = (b"Traceback (most recent call last)", b'File "/', b"<title>Error response</title>")


class Response:
    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("iso-8859-1").split("\r\n")
        match = re.match(r"HTTP/1\.[01] (\d{3}) ", lines[0] + " ")
        assert match, "not an HTTP response (no status line): %r" % raw[:200]
        self.status = int(match.group(1))
        self.headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers.setdefault(name.strip().lower(), value.strip())

    def json(self):
        return askrich.parse_json(self.body.decode("utf-8"))


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def exchange(port: int, data: bytes, timeout: float = 10.0) -> Response:
    with connect(port, timeout) as sock:
        sock.sendall(data)
        return Response(read_all(sock))


def build(method: str, path: str, headers=(), body: bytes = b"", length=True, close=True) -> bytes:
    lines = ["%s %s HTTP/1.1" % (method, path)]
    lines += ["%s: %s" % pair for pair in headers]
    if length and body:
        lines.append("Content-Length: %d" % len(body))
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + body


def _documented_error_codes() -> frozenset:
    """The codes in the table of tests/README.md: what a local tool may rely on."""
    text = open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "README.md"), encoding="utf-8").read()
    table = text.split("Every JSON error body also carries a stable `code`", 1)[1].split("\n\n", 2)[1]
    return frozenset(re.findall(r"^\| `([a-z-]+)` \|", table, re.M))


ERROR_CODES = _documented_error_codes()


def test_every_error_code_the_server_can_give_is_documented():
    given = set(askrich.ERROR_CODES.values()) | set(askrich.ATTACHMENT_STATUS)
    # The codes a refusal names itself, where its status's own would be too vague.
    source = open(askrich.__file__, encoding="utf-8").read()
    given |= set(re.findall(r'code="([a-z-]+)"', source))
    given |= set(re.findall(r'error_body\(\d+, [^\n]*?"([a-z-]+)"(?:, version=[^)]*)?\)', source))
    assert given == ERROR_CODES
    assert {"bad-json", "forbidden-origin", "invalid-progress", "stale-version", "not-pending"} <= given


def assert_safe(response: Response, token: str) -> None:
    """What every response must be, whatever was asked."""
    assert response.status in DOCUMENTED, response.raw[:300]
    for name, value in SECURITY_HEADERS.items():
        assert response.headers.get(name) == value, (name, response.raw[:400])
    for marker in LEAK_MARKERS:
        assert marker not in response.body, response.body[:400]
    assert token.encode() not in response.raw, "the token came back in a response"
    if response.status >= 400 and response.body:
        if response.headers.get("content-type", "").startswith("application/json"):
            assert isinstance(response.json().get("error"), str)
            assert response.json().get("code") in ERROR_CODES, response.body[:300]
        else:
            assert response.body == askrich.NOT_FOUND_TEXT.encode()


@pytest.fixture(scope="module")
def rt(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("http-logs")
    stderr = io.StringIO()
    runtime = askrich.Runtime(askrich.Config(log_dir=str(log_dir), open_browser=False),
                              askrich.Log(str(log_dir), stream=stderr))
    runtime.captured_stderr = stderr
    yield runtime
    runtime.close()


def open_form(rt, *questions):
    form = rt.open_interview(interview(*(questions or (choice("q", "a", "b"), choice("r", "x")))))
    form.port = int(urllib.parse.urlsplit(rt.form_url(form)).port)
    return form


def state_of(form) -> dict:
    host = [("Host", "localhost:%d" % form.port)]
    response = exchange(form.port, build("GET", "/api/s/%s/state" % form.token, host))
    assert response.status == 200
    return response.json()


def forge(token: str, how: str) -> str:
    return {
        "live": token,
        "prefix": token[:-1],
        "last-char": token[:-1] + ("A" if token[-1] != "A" else "B"),
        "longer": token + "A",
        "empty": "",
        "encoded": "%%%02X" % ord(token[0]) + token[1:],
        "other": secrets.token_urlsafe(18),
    }[how]


# -- the fuzz -----------------------------------------------------------------------------------


@given(
    method=strategies.http_methods,
    target=strategies.paths,
    host=st.sampled_from(strategies.HOSTS),
    origin=st.sampled_from(strategies.ORIGINS),
    content_type=st.sampled_from(strategies.CONTENT_TYPES),
    extra=strategies.http_headers,
    body=strategies.http_bodies,
)
@example(method="POST", target=("/api/s/{t}/submit", "live"), host="{own}", origin=None,
         content_type="application/json", extra={"Content-Length": "\u00b2"}, body=b"")
@example(method="GET", target=("/assets/../askrich.py", "live"), host="{own}", origin=None,
         content_type=None, extra={}, body=b"")
def test_fuzzed_requests_get_only_documented_statuses_with_security_headers_and_no_leaks(
    rt, method, target, host, origin, content_type, extra, body
):
    form = open_form(rt)
    template, how = target
    path = template.replace("{t}", forge(form.token, how))
    fill = {"own": "localhost:%d" % form.port, "port": str(form.port)}
    headers = []
    if host:
        headers.append(("Host", host.format(**fill)))
    if origin is not None:
        headers.append(("Origin", origin.format(**fill)))
    if content_type is not None:
        headers.append(("Content-Type", content_type))
    headers += [(name, value) for name, value in extra.items()
                if name.lower() not in ("host", "origin", "connection", "transfer-encoding")]
    has_length = any(name.lower() == "content-length" for name, _ in headers)
    response = exchange(form.port, build(method, path, headers, body, length=not has_length))
    assert_safe(response, form.token)
    host_ok = askrich.host_name(host.format(**fill)) in {"localhost", "127.0.0.1", "[::1]"} if host else False
    if response.status in (200, 204):
        assert host_ok and origin in (None, "http://localhost:{port}", "http://127.0.0.1:{port}")
    if not host_ok and response.status not in (400, 414, 431, 501, 505):
        assert response.status == 403
    # The server is still there for the real form.
    assert state_of(form)["state"] in ("pending", "submitted")


# -- malformed requests -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, status",
    [
        (b"GET\r\n\r\n", 400),
        (b"GET /\r\n\r\n", 400),  # HTTP/0.9: no status line or headers would come back
        (b"GET / HTTP/9.9\r\nHost: localhost\r\n\r\n", 505),
        (b"GET / HTTP/1.1 extra\r\nHost: localhost\r\n\r\n", 400),
        (b"GET / HTTP/1.x\r\nHost: localhost\r\n\r\n", 400),
        (b"\x00\x01\x02\xff\r\n\r\n", 400),
        (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414),
        (b"GET /assets/form.css HTTP/1.1\r\nHost: localhost\r\n" + b"X: " + b"y" * 70000 + b"\r\n\r\n", 431),
        (b"GET /assets/form.css HTTP/1.1\r\nHost: localhost\r\n"
         + b"".join(b"X-%d: y\r\n" % i for i in range(150)) + b"\r\n", 431),
        (b"GET /assets/form.css HTTP/1.1\r\nHost: localhost\r\nbroken header line\r\n\r\n", 200),
        (b"FOO /assets/form.css HTTP/1.1\r\nHost: localhost\r\n\r\n", 501),
        (b"HEAD /assets/form.css HTTP/1.1\r\nHost: localhost\r\n\r\n", 405),
        (b"OPTIONS * HTTP/1.1\r\nHost: localhost\r\nOrigin: http://evil.example\r\n"
         b"Access-Control-Request-Method: POST\r\n\r\n", 403),
    ],
)
def test_malformed_requests_get_a_json_error_with_every_security_header(rt, raw, status):
    form = open_form(rt)
    response = exchange(form.port, raw.replace(b"Host: localhost", b"Host: localhost:%d" % form.port))
    assert response.status == status, response.raw[:300]
    assert_safe(response, form.token)
    assert state_of(form)["state"] == "pending"


def test_an_http09_request_for_the_form_is_refused_not_served_without_its_csp(rt):
    form = open_form(rt)
    response = exchange(form.port, b"GET /s/%s\r\nHost: localhost:%d\r\n\r\n" % (form.token.encode(), form.port))
    assert response.status == 400
    assert b"<html" not in response.body.lower()
    assert_safe(response, form.token)


def test_error_texts_never_echo_the_request_line_or_its_token(rt):
    form = open_form(rt)
    for raw in (b"GET /s/%s HTTP/1.1 extra\r\n\r\n", b"GET /s/%s HTTP/7\r\n\r\n", b"GET /s/%s\r\n\r\n",
                b"FOO /s/%s HTTP/1.1\r\nHost: localhost\r\n\r\n"):
        response = exchange(form.port, raw % form.token.encode())
        assert form.token.encode() not in response.raw
        assert form.token[:8].encode() not in response.raw


@pytest.mark.parametrize(
    "length, status",
    [("-1", 411), ("abc", 411), ("\u00b2", 411), ("1e3", 411), ("0x10", 411), ("", 411),
     (" 2 ", 422), ("99999999999999999999999", 413), (str(askrich.MAX_BODY_BYTES + 1), 413)],
)
def test_content_length_that_is_negative_huge_or_not_a_number_is_refused(rt, length, status):
    form = open_form(rt)
    headers = [("Host", "localhost:%d" % form.port), ("Content-Type", "application/json"),
               ("Content-Length", length)]
    response = exchange(form.port, build("POST", "/api/s/%s/submit" % form.token, headers, b"{}", length=False))
    assert response.status == status, response.raw[:300]
    assert_safe(response, form.token)
    assert state_of(form)["state"] == "pending"


def test_an_oversized_body_is_refused_before_it_is_read(rt):
    form = open_form(rt)
    headers = [("Host", "localhost:%d" % form.port), ("Content-Type", "application/json"),
               ("Content-Length", str(askrich.MAX_BODY_BYTES + 1))]
    with connect(form.port) as sock:
        sock.sendall(build("POST", "/api/s/%s/submit" % form.token, headers, length=False))
        started = time.monotonic()
        response = Response(read_all(sock))  # answered and closed without waiting for 5 MiB
    assert response.status == 413 and time.monotonic() - started < 5


@pytest.mark.parametrize("depth", [100000, 5000])
def test_a_json_nesting_bomb_in_a_submit_is_a_400_and_the_interview_stays_open(rt, depth):
    form = open_form(rt)
    body = b'{"answers":' + b"[" * depth + b"]" * depth + b"}"
    headers = [("Host", "localhost:%d" % form.port), ("Content-Type", "application/json")]
    response = exchange(form.port, build("POST", "/api/s/%s/submit" % form.token, headers, body))
    assert response.status == 400 and response.json()["error"].startswith("invalid JSON")
    assert state_of(form)["state"] == "pending"


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", "application/json-seq"])
def test_a_submit_that_is_not_json_is_415_and_changes_nothing(rt, content_type):
    form = open_form(rt)
    headers = [("Host", "localhost:%d" % form.port)]
    if content_type:
        headers.append(("Content-Type", content_type))
    body = json.dumps({"answers": {"q": {"selected": ["a"]}}}).encode()
    response = exchange(form.port, build("POST", "/api/s/%s/submit" % form.token, headers, body))
    assert response.status == 415 and response.json() == {"error": "expected application/json", "code": "unsupported-media-type"}
    assert state_of(form)["state"] == "pending"


# -- traversal and assets -----------------------------------------------------------------------


@pytest.mark.parametrize("path", strategies.TRAVERSALS)
def test_asset_paths_outside_the_allow_list_are_never_served(rt, path):
    form = open_form(rt)
    response = exchange(form.port, build("GET", path, [("Host", "localhost:%d" % form.port)]))
    assert_safe(response, form.token)
    # http.server itself folds a leading "//" into "/" (an open-redirect guard).
    clean = "/" + path.split("?", 1)[0].lstrip("/")
    name = clean[len("/assets/"):] if clean.startswith("/assets/") else None
    if response.status == 200:
        assert name in askrich.ASSET_FILES, path
    assert b"def read_asset" not in response.body and b"root:x:0:0" not in response.body


@pytest.mark.parametrize("name", sorted(askrich.ASSET_FILES))
def test_every_allow_listed_asset_is_served_with_its_fixed_type(rt, name):
    form = open_form(rt)
    response = exchange(form.port, build("GET", "/assets/" + name, [("Host", "localhost:%d" % form.port)]))
    assert response.status == 200
    assert response.headers["content-type"] == askrich.ASSET_CONTENT_TYPES[os.path.splitext(name)[1]]
    assert_safe(response, form.token)


# -- Host and Origin ----------------------------------------------------------------------------

ROUTES = ("GET /s/{t}", "GET /api/s/{t}", "GET /api/s/{t}/state", "GET /api/s/{t}/events",
          "POST /api/s/{t}/progress", "POST /api/s/{t}/visibility", "POST /api/s/{t}/submit",
          "GET /assets/form.html")


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("host, origin", [
    ("evil.example:{port}", None),                    # DNS rebinding: the attacker's name
    ("localhost.evil.example:{port}", None),
    ("127.0.0.1.nip.io:{port}", None),
    (None, None),
    ("localhost:{port}", "null"),                     # a sandboxed frame or a file: page
    ("localhost:{port}", "http://localhost:1"),       # another localhost port
    ("localhost:{port}", "http://evil.example"),
    ("localhost:{port}", "https://localhost:{port}"),
])
def test_a_foreign_host_or_origin_is_403_on_every_route(rt, route, host, origin):
    form = open_form(rt)
    method, template = route.split(" ")
    headers = []
    if host:
        headers.append(("Host", host.format(port=form.port)))
    if origin:
        headers.append(("Origin", origin.format(port=form.port)))
    headers.append(("Content-Type", "application/json"))
    body = json.dumps({"answers": {}}).encode() if method == "POST" else b""
    response = exchange(form.port, build(method, template.replace("{t}", form.token), headers, body))
    assert response.status == 403, response.raw[:300]
    assert response.json()["error"] in ("forbidden host", "forbidden origin")
    assert_safe(response, form.token)
    assert state_of(form)["state"] == "pending"


def test_two_host_headers_are_judged_by_the_first(rt):
    form = open_form(rt)
    headers = [("Host", "evil.example"), ("Host", "localhost:%d" % form.port)]
    assert exchange(form.port, build("GET", "/s/" + form.token, headers)).status == 403


# -- slow clients and many connections ----------------------------------------------------------


def test_a_trickling_request_and_a_body_that_never_arrives_do_not_block_other_requests(rt):
    form = open_form(rt)
    own = ("Host", "localhost:%d" % form.port)
    stalled_body = connect(form.port)
    stalled_body.sendall(build("POST", "/api/s/%s/submit" % form.token,
                               [own, ("Content-Type", "application/json"), ("Content-Length", "5000")],
                               b'{"answers":', length=False))
    trickle = connect(form.port)
    trickle.sendall(b"GET /s/")  # and then nothing: a request line arriving a byte at a time
    try:
        started = time.monotonic()
        page = exchange(form.port, build("GET", "/s/" + form.token, [own]))
        body = json.dumps({"answers": {"q": {"selected": ["a"]}}}).encode()
        done = exchange(form.port, build("POST", "/api/s/%s/submit" % form.token,
                                         [own, ("Content-Type", "application/json")], body))
        elapsed = time.monotonic() - started
        assert page.status == 200 and done.status == 200, done.raw[:300]
        assert elapsed < 2.0, elapsed
    finally:
        stalled_body.close()
        trickle.close()


def _threads() -> int:
    return threading.active_count()


def test_200_connections_held_open_do_not_stop_the_form_and_are_released(rt):
    form = open_form(rt)
    own = ("Host", "localhost:%d" % form.port)
    baseline = _threads()
    threads_before = set(threading.enumerate())
    held = []
    try:
        for index in range(200):
            sock = connect(form.port)
            if index % 2:
                sock.sendall(b"GET /api/s/%s/state HTTP/1.1\r\nHost: loc" % form.token.encode())
            held.append(sock)
        started = time.monotonic()
        assert exchange(form.port, build("GET", "/s/" + form.token, [own])).status == 200
        assert state_of(form)["state"] == "pending"
        body = json.dumps({"answers": {"q": {"selected": ["b"]}}}).encode()
        done = exchange(form.port, build("POST", "/api/s/%s/submit" % form.token,
                                         [own, ("Content-Type", "application/json")], body))
        elapsed = time.monotonic() - started
        peak = _threads()
        print("200 held connections: %d handler threads, form answered in %.2fs" % (peak - baseline, elapsed))
        assert done.status == 200 and elapsed < 3.0, elapsed
    finally:
        for sock in held:
            sock.close()
    # Each held connection's thread ends once its client goes away (bounded wait).
    left = threads_still_running(threads_before, timeout=10)
    assert len(left) <= 5, left


def _open_stream(form) -> socket.socket:
    sock = connect(form.port)
    sock.sendall(build("GET", "/api/s/%s/events" % form.token, [("Host", "localhost:%d" % form.port)], close=False))
    data = b""
    while b"event: state" not in data:
        chunk = sock.recv(4096)
        assert chunk, data
        data += chunk
    assert b"text/event-stream" in data and b"no-store" in data
    return sock


def test_event_streams_piling_up_are_all_released_on_the_next_change_and_on_close(rt):
    form = open_form(rt)
    interview_obj = rt.hub.get(form.id)
    streams = [_open_stream(form) for _ in range(60)]
    assert interview_obj.activity()["streams"] == 60  # sixty handler threads, each in its stream loop
    for sock in streams:
        sock.close()
    # A change makes every stream write, and each one whose page went away ends.
    rt.append_questions(form.id, [choice("later", "a")])
    wait_for_interview(interview_obj, lambda i: i.activity()["streams"] == 0, timeout=10, what="every stream ending")
    # Streams still open end at shutdown (the hub closing), without waiting for a ping.
    live = [_open_stream(form) for _ in range(5)]
    try:
        other = askrich.Runtime(askrich.Config(log_dir=rt.config.log_dir, open_browser=False),
                                askrich.Log(rt.config.log_dir, stream=io.StringIO()))
        second = other.open_interview(interview())
        second.port = int(urllib.parse.urlsplit(other.form_url(second)).port)
        socks = [_open_stream(second) for _ in range(5)]
        started = time.monotonic()
        other.close()
        for sock in socks:
            sock.settimeout(5)
            assert read_all(sock) is not None  # the server ended the stream
        assert time.monotonic() - started < 3
    finally:
        for sock in live:
            sock.close()


# -- tokens -------------------------------------------------------------------------------------


def test_tokens_are_looked_up_by_their_sha256_digest_then_compared_in_constant_time(rt, monkeypatch):
    import hmac

    form = open_form(rt)
    digest = hashlib.sha256(form.token.encode()).digest()
    assert rt.hub.by_token[digest].id == form.id
    assert all(isinstance(key, bytes) and len(key) == 32 for key in rt.hub.by_token)
    assert not any(form.token in repr(key) for key in rt.hub.by_token)
    compared = []
    real = hmac.compare_digest
    monkeypatch.setattr(hmac, "compare_digest", lambda a, b: compared.append((a, b)) or real(a, b))
    assert rt.hub.find_by_token(form.token) is not None
    assert compared, "a found token must still be compared with compare_digest"
    # A guess sharing all but the last character costs the same lookup as one sharing nothing:
    # both are a miss on a digest that has nothing in common with the token.
    near, far = form.token[:-1] + ("A" if form.token[-1] != "A" else "B"), secrets.token_urlsafe(18)
    assert rt.hub.find_by_token(near) is None and rt.hub.find_by_token(far) is None


def test_token_lookup_time_does_not_depend_on_how_much_of_the_token_matches(rt):
    form = open_form(rt)
    for _ in range(200):
        open_form(rt)  # a realistic table
    near = form.token[:-1] + ("A" if form.token[-1] != "A" else "B")
    far = ("B" if form.token[0] != "B" else "C") + secrets.token_urlsafe(18)[1:]

    def median_ns(token: str) -> float:
        samples = []
        for _ in range(15):
            started = time.perf_counter_ns()
            for _ in range(300):
                rt.hub.find_by_token(token)
            samples.append(time.perf_counter_ns() - started)
        return sorted(samples)[len(samples) // 2]

    median_ns(near), median_ns(far)  # warm up
    ratios = [median_ns(near) / median_ns(far) for _ in range(3)]
    # Loose on purpose (a shared CI machine is noisy): a prefix-dependent comparison of a
    # 24-character string would not show here anyway; the digest test above pins the design.
    assert 0.5 < sorted(ratios)[1] < 2.0, ratios


def test_no_token_in_the_log_or_stderr_after_every_kind_of_request(rt):
    form = open_form(rt)
    own = ("Host", "localhost:%d" % form.port)
    token = form.token.encode()
    exchange(form.port, build("GET", "/s/" + form.token, [own, ("User-Agent", "tests")]))
    exchange(form.port, b"GET /s/%s HTTP/1.1 extra\r\n\r\n" % token)
    exchange(form.port, build("GET", "/api/s/%s/nope" % form.token, [own]))
    exchange(form.port, build("POST", "/api/s/%s/progress" % form.token,
                              [own, ("Content-Type", "application/json")], b'{"answered": 1}'))
    exchange(form.port, build("POST", "/api/s/%s/submit" % form.token,
                              [own, ("Content-Type", "application/json")], b'{"answers": {"q": {"selected": ["zz"]}}}'))
    exchange(form.port, build("POST", "/api/s/%s/submit" % form.token,
                              [own, ("Content-Type", "application/json")], b'{"answers": {"q": {"selected": ["a"]}}}'))
    with open(os.path.join(rt.config.log_dir, "server.log"), encoding="utf-8") as log:
        text = log.read()
    stderr = rt.captured_stderr.getvalue()
    for where in (text, stderr):
        assert form.token not in where
        assert form.token[:5] not in where  # not even a longer prefix than the redaction
        assert "token=%s…" % form.token[:4] in where
    archived = os.listdir(os.path.join(rt.config.log_dir, "answers"))
    for name in archived:
        with open(os.path.join(rt.config.log_dir, "answers", name), encoding="utf-8") as record:
            assert form.token not in record.read()


def test_progress_messages_carry_the_form_link_and_nothing_else_does(tmp_path):
    config = askrich.Config(log_dir=str(tmp_path), open_browser=False, progress_ms=30)
    runtime = askrich.Runtime(config, askrich.Log(str(tmp_path), stream=io.StringIO()))
    peer = InProcessServer(runtime)
    try:
        peer.initialize()
        awaiting = peer.tool("ask_user_rich", dict(interview(), delivery="link"))["result"]["structuredContent"]
        token = awaiting["url"].rsplit("/", 1)[1]
        peer.request("tools/call", {"name": "await_user_answers", "arguments": {"sessionId": awaiting["sessionId"]},
                                    "_meta": {"progressToken": "tok"}})
        messages = [peer.receive(lambda m: m.get("method") == "notifications/progress")["params"]["message"]
                    for _ in range(5)]
        # Each ends with the link: a terminal client shows only the latest message.
        assert all(message.endswith(". Form: " + awaiting["url"]) and message.count(token) == 1
                   for message in messages)
        # And a rejected submit's error text does not carry it either.
        from helpers.support import submit

        bad = submit(awaiting["url"], {"q": {"selected": ["nope"]}})
        assert bad.status == 422 and token not in bad.body.decode()
    finally:
        peer.close()
        runtime.close()


@pytest.mark.parametrize("field", ["ranked", "selected"])
def test_a_4_mb_answer_array_is_judged_in_linear_time_and_the_log_line_stays_short(rt, field):
    form = open_form(rt, {"id": "r", "header": "Order", "kind": "rank",
                          "options": [{"id": "o%d" % i, "label": "O%d" % i} for i in range(300)]},
                     choice("q", *["o%d" % i for i in range(300)], multiSelect=True))
    values = ["o%d" % (i % 300) for i in range(550000)] + ["zz"] * 5000
    answers = {"r": {"ranked": values}} if field == "ranked" else {"q": {"selected": values}}
    body = json.dumps({"answers": answers}).encode()
    assert 3 * 1024 * 1024 < len(body) < askrich.MAX_BODY_BYTES
    headers = [("Host", "localhost:%d" % form.port), ("Content-Type", "application/json")]
    started = time.monotonic()
    response = exchange(form.port, build("POST", "/api/s/%s/submit" % form.token, headers, body))
    elapsed = time.monotonic() - started
    assert response.status == 422 and elapsed < 5.0, (response.status, elapsed)
    assert state_of(form)["state"] == "pending"
    with open(os.path.join(rt.config.log_dir, "server.log"), encoding="utf-8") as log:
        assert max(len(line) for line in log) < 2000


def test_lone_surrogates_in_the_interview_and_the_answers_lose_nothing(rt):
    """JSON may carry "\\ud800", which UTF-8 cannot encode: it once crashed every submit of such
    an interview without a response, and turned file logging off."""
    odd = "x\ud800y\udfff"
    form = open_form(rt, {"id": "q", "header": "H" + odd, "options": [{"id": "a", "label": "A" + odd}]})
    page = exchange(form.port, build("GET", "/api/s/" + form.token, [("Host", "localhost:%d" % form.port)]))
    assert page.status == 200 and page.json()["spec"]["questions"][0]["header"] == "H" + odd
    got = []
    waiter = threading.Thread(target=lambda: got.append(wait_for_result(rt, form.id, 20)))
    waiter.start()
    body = json.dumps({"answers": {"q": {"selected": ["a"], "notes": "n" + odd}}, "generalNotes": odd}).encode()
    headers = [("Host", "localhost:%d" % form.port), ("Content-Type", "application/json")]
    response = exchange(form.port, build("POST", "/api/s/%s/submit" % form.token, headers, body))
    waiter.join(20)
    assert response.status == 200, response.raw[:300]
    assert got and got[0]["answers"][0]["notes"] == "n" + odd and got[0]["generalNotes"] == odd
    record = rt.archive.find(form.id)
    assert record["answers"][0]["notes"] == "n" + odd
    assert rt.log.descriptor is not None, "file logging was turned off"
    with open(os.path.join(rt.config.log_dir, "server.log"), encoding="utf-8") as log:
        assert "interview=%s" % form.id in log.read().split("submitted ")[-1]


def test_an_event_stream_sends_every_state_of_a_burst_of_changes(rt):
    form = open_form(rt)
    sock = _open_stream(form)
    try:
        for index in range(10):  # faster than the stream thread can write each one
            rt.append_questions(form.id, [choice("burst%d" % index, "a")])
        data = b""
        sock.settimeout(10)
        while b'"version": 11' not in data:
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
        versions = [json.loads(line[6:])["version"] for line in data.decode().splitlines()
                    if line.startswith("data: ")]
        assert versions == list(range(2, 12)), versions
    finally:
        sock.close()


answer_values = st.fixed_dictionaries({}, optional={
    "status": st.sampled_from(["answer", "defer", "needs-info", "skip"]),
    "selected": st.one_of(st.lists(st.sampled_from(["a", "b", "x", "y", "zz"]), max_size=3), strategies.json_values(2)),
    "other": st.one_of(strategies.any_text, strategies.json_values(1)),
    "notes": st.one_of(strategies.any_text, strategies.json_values(1)),
    "ranked": st.one_of(st.permutations(["a", "b"]), strategies.json_values(2)),
    "optionTexts": st.dictionaries(st.sampled_from(["a", "x"]), strategies.any_text, max_size=2),
})
submit_bodies = st.one_of(
    strategies.http_bodies,
    st.fixed_dictionaries(
        {"answers": st.dictionaries(st.sampled_from(["q", "r", "zz"]), answer_values, max_size=3)},
        optional={"generalNotes": st.one_of(strategies.any_text, strategies.json_values(1)),
                  "specVersion": st.one_of(st.just(1), strategies.json_values(1))},
    ).map(strategies.encode),
)


@given(body=submit_bodies)
@example(body=b"null")  # once answered with nothing at all: None meant "already answered"
@example(body=b'{"answers": {"q": {"selected": ["a"], "notes": "\\ud800"}}}')
def test_any_submit_body_settles_the_interview_exactly_as_answered_or_changes_nothing(rt, body):
    form = open_form(rt)
    headers = [("Host", "localhost:%d" % form.port), ("Content-Type", "application/json")]
    response = exchange(form.port, build("POST", "/api/s/%s/submit" % form.token, headers, body))
    assert_safe(response, form.token)
    interview_obj = rt.hub.get(form.id)
    record = rt.archive.find(form.id)
    if response.status == 200:
        assert interview_obj.state == "submitted" and response.json()["ok"] is True
        assert [answer["id"] for answer in interview_obj.settled_result()["answers"]] == ["q", "r"]
        assert record is not None and record["answers"] == interview_obj.settled_result()["answers"]
        assert response.json()["counts"] == interview_obj.settled_result()["counts"]
        again = exchange(form.port, build("POST", "/api/s/%s/submit" % form.token, headers, body))
        assert again.status == 409  # exactly once
    else:
        assert response.status in (400, 409, 411, 413, 422), response.raw[:300]
        assert interview_obj.state == "pending" and record is None


def test_no_token_in_log_notifications_to_the_client_even_at_debug(tmp_path):
    runtime = askrich.Runtime(askrich.Config(log_dir=str(tmp_path), open_browser=False),
                              askrich.Log(str(tmp_path), stream=io.StringIO()))
    peer = InProcessServer(runtime)
    try:
        peer.initialize()
        assert peer.call("logging/setLevel", {"level": "debug"})["result"] == {}
        awaiting = peer.tool("ask_user_rich", dict(interview(), delivery="link"))["result"]["structuredContent"]
        token = awaiting["url"].rsplit("/", 1)[1]
        port = int(urllib.parse.urlsplit(awaiting["url"]).port)
        own = ("Host", "localhost:%d" % port)
        exchange(port, build("GET", "/s/" + token, [own, ("User-Agent", "tests")]))
        exchange(port, build("POST", "/api/s/%s/progress" % token, [own, ("Content-Type", "application/json")],
                             b'{"answered": 1}'))
        exchange(port, build("POST", "/api/s/%s/submit" % token, [own, ("Content-Type", "application/json")],
                             b'{"answers": {"q": {"selected": ["a"]}}}'))
        done = peer.tool("await_user_answers", {"sessionId": awaiting["sessionId"]})["result"]
        assert done["structuredContent"]["status"] == "submitted"
        assert token not in json.dumps(done)
        notes = [m for m in peer.pending if m.get("method") == "notifications/message"]
        events = {m["params"]["data"]["event"] for m in notes}
        assert {"session-created", "page-view", "submitted"} <= events, events
        assert not any(token in json.dumps(m) or token[:5] in json.dumps(m) for m in notes)
    finally:
        peer.close()
        runtime.close()
