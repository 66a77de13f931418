"""A squatter takes the ports of a form and of the inbox the moment their server exits, as
another user of this machine (uid 65534, tests/helpers/other_user.py), and logs every request it gets.
The pages open in Chromium reconnect to it: each asks it to prove it knows the page's secret,
gets a wrong proof, sends it nothing more, and tells the person why (tests/README.md, "Another
user of this machine")."""
from __future__ import annotations

from formkit import DESKTOP, WATCH_CSP  # noqa: E402
from helpers.inbox_support import free_port, read_key  # noqa: E402
from helpers.other_user import OtherUserProcess  # noqa: E402
from helpers.support import quiet_runtime, watched_runtime  # noqa: E402

ROTATE = {"title": "Rotate the keys?", "questions": [
    {"id": "go", "header": "Rotate now?", "options": [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}]}]}

# What both of the other user's programs below start with: report(value) writes one JSON line
# from any thread; read_head(connection) reads a request up to the end of its head (less when
# the peer closed first).
REPORTING = r"""
import json, re, socket, sys, threading, time
said = threading.Lock()

def report(value):
    with said:
        sys.stdout.write(json.dumps(value) + "\n")
        sys.stdout.flush()

def read_head(connection):
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = connection.recv(65536)
        if not chunk:
            break
        head += chunk
    return head
"""

# Binds every port it is given on both loopbacks as soon as it can, reports each request head
# (one JSON line), and answers every prove with a proof it cannot know.
SQUATTER = REPORTING + r"""
def serve(listener, port):
    while True:
        connection, _ = listener.accept()
        report({"port": port, "request": read_head(connection).decode("latin-1")})
        body = b'{"proof": "%s", "pageProof": "%s"}' % (b"0" * 64, b"0" * 64)
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                           b"Connection: close\r\n\r\n%s" % (len(body), body))
        connection.close()

def squat(port):
    for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        listener = socket.socket(family)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        while True:
            try:
                listener.bind((address, port))
                break
            except OSError:
                time.sleep(0.01)
        listener.listen(16)
        threading.Thread(target=serve, args=(listener, port), daemon=True).start()
    report({"squatting": port})

for port in sys.argv[1:]:
    threading.Thread(target=squat, args=(int(port),), daemon=True).start()
threading.Event().wait()
"""


def test_pages_whose_servers_were_replaced_by_another_user_send_it_no_secret(browser, tmp_path):
    inbox_port = free_port()
    rt = watched_runtime(tmp_path / "logs", inbox_port=inbox_port)
    context = browser.new_context(viewport=DESKTOP, locale="en-US")
    context.add_init_script(WATCH_CSP)
    squatter = None
    try:
        form = rt.open_interview(ROTATE)
        other = rt.open_interview({"title": "Another", "questions": [{"id": "q", "header": "Ok?"}]})
        rt.watch.wait_for("inbox-holding")
        key = read_key(tmp_path / "logs")
        form_port = rt.form_server.port
        page = context.new_page()
        page.goto(rt.form_url(form))
        page.wait_for_selector("body.ready")
        page.locator("#inbox-more").wait_for(state="visible")
        with context.expect_page() as opened:
            page.locator("#inbox-more").click()  # the inbox through a ticket and a session cookie
        by_cookie = opened.value
        by_cookie.wait_for_function("() => document.querySelectorAll('#inbox-list > li').length === 2")
        by_key = context.new_page()
        by_key.goto("http://localhost:%d/inbox/%s" % (inbox_port, key))
        by_key.wait_for_function("() => document.querySelectorAll('#inbox-list > li').length === 2")
        assert context.cookies() == []  # no cookie, which a browser sends to every port of localhost
        session = by_cookie.evaluate("JSON.parse(sessionStorage.getItem('ask-user-rich-inbox-session')).session")

        squatter = OtherUserProcess(SQUATTER, str(form_port), str(inbox_port))
        rt.close()  # the agent's process is gone; the squatter takes both ports
        for port in (form_port, inbox_port):
            squatter.wait_for(lambda r: r.get("squatting") == port, "squatting on %d" % port)
        # Gated on the squatter's own log: the form and both inbox pages asked it for a proof.
        squatter.wait_for(lambda r: r.get("request", "").startswith("GET /api/prove?"), "the form's proof request")
        for n in (1, 2):
            squatter.wait_for(lambda r, n=n: sum(s.get("request", "").startswith("GET /api/inbox/prove?")
                                                 for s in squatter.seen) >= n, "inbox proof request %d" % n)
        page.locator('[data-id="impostor"]').wait_for()
        by_key.locator('[data-id="impostor"]').wait_for()
        by_cookie.locator('[data-id="impostor"]').wait_for()
        assert "could not prove" in page.locator('[data-id="impostor"]').inner_text()
        assert "could not prove" in by_key.locator('[data-id="impostor"]').inner_text()
        received = "\n".join(report.get("request", "") for report in squatter.seen)
        for secret in (form.token, other.token, key, session):
            assert secret not in received
        assert "/api/s/" not in received and "/events" not in received and "Cookie:" not in received
        assert "X-Ask-User-Rich-Session" not in received
        # The person's answers are still on the page.
        assert page.locator("#main").is_visible()
    finally:
        context.close()
        rt.close()
        if squatter is not None:
            squatter.close()


# Passes every connection on to the form's own port, byte for byte, as another user; reports
# each request head, and cuts the page's events stream after a moment, so that the page must
# prove the server again: a proof it gets only from the form's own port, through the relay.
RELAY = REPORTING + r"""
owner = int(sys.argv[1])
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)

def pipe(source, sink, clean=False):
    try:
        while True:
            chunk = source.recv(65536)
            if not chunk:
                break
            sink.sendall(re.sub(rb"\r\nOrigin: [^\r]*", b"", chunk) if clean else chunk)
    except OSError:
        pass
    for end in (source, sink):
        try:
            end.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

def relay(page):
    head = read_head(page)
    if b"\r\n\r\n" not in head:
        return
    report({"request": head.split(b"\r\n\r\n")[0].decode("latin-1")})
    upstream = socket.create_connection(("127.0.0.1", owner))
    # As the owner's own page would ask: its Host, no Origin.
    head = re.sub(rb"\r\nHost: [^\r]*", b"\r\nHost: localhost:%d" % owner, head)
    upstream.sendall(re.sub(rb"\r\nOrigin: [^\r]*", b"", head))
    threading.Thread(target=pipe, args=(upstream, page), daemon=True).start()
    if b"/events" in head.split(b"\r\n")[0]:
        time.sleep(1.5)
        for end in (page, upstream):
            end.shutdown(socket.SHUT_RDWR)
        return
    pipe(page, upstream, clean=True)

report({"port": listener.getsockname()[1]})
while True:
    connection, _ = listener.accept()
    threading.Thread(target=relay, args=(connection,), daemon=True).start()
"""


def test_a_proof_relayed_from_the_forms_own_port_is_refused_and_the_page_says_why(browser, tmp_path):
    rt = quiet_runtime(tmp_path / "logs", inbox_port=0)
    context = browser.new_context(viewport=DESKTOP, locale="en-US")
    context.add_init_script(WATCH_CSP)
    relay = None
    try:
        form = rt.open_interview(ROTATE)
        relay = OtherUserProcess(RELAY, str(rt.form_server.port))
        port = relay.wait_for(lambda r: "port" in r, "its port")["port"]
        page = context.new_page()
        page.goto("http://localhost:%d/s/%s" % (port, form.token))  # the link, followed to the relay
        page.wait_for_selector("body.ready")
        relay.wait_for(lambda r: r.get("request", "").startswith("GET /api/prove?"), "the page's proof request")
        notice = page.locator('[data-id="impostor"]')
        notice.wait_for()
        assert "passed this page's check on" in notice.inner_text()
        proved_at = max(n for n, r in enumerate(relay.seen) if r.get("request", "").startswith("GET /api/prove?"))
        later = [r["request"] for r in relay.seen[proved_at + 1:] if "request" in r]
        assert not [head for head in later if form.token in head]  # nothing carrying the token went on
        assert form.is_pending()
    finally:
        context.close()
        rt.close()
        if relay is not None:
            relay.close()
