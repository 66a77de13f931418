"""Helpers for the delivery tests: the askrich server under the official MCP SDK client, a
fake browser that answers a form over HTTP, and opener facts for any platform."""

import contextlib
import os
import sys
import textwrap

from helpers.support import api_url, http_request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVER = os.path.join(ROOT, "askrich.py")
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

CALL_TIMEOUT = 60  # seconds; every SDK session in these tests runs under anyio.fail_after


def linux_facts(**changes) -> dict:
    """Opener facts of a plain Linux desktop with xdg-open; `changes` override any key."""
    facts = {
        "platform": "linux",
        "open_enabled": True,
        "open_cmd": None,
        "wsl": False,
        "interop": None,
        "installed": {
            "open": None,
            "xdg-open": "/usr/bin/xdg-open",
            "xdg-mime": "/usr/bin/xdg-mime",
            "wslview": None,
            "explorer.exe": None,
            "powershell.exe": None,
            "cmd.exe": None,
        },
        "display": {"DISPLAY": ":0", "WAYLAND_DISPLAY": ""},
        "ssh": False,
        "container": False,
        "windows_root": None,
        "https_handler": None,
        "https_handler_installed": None,
    }
    facts.update(changes)
    return facts


WINDOWS_OPENERS = {
    "wslview": "/usr/bin/wslview",
    "explorer.exe": "/mnt/c/Windows/explorer.exe",
    "cmd.exe": "/mnt/c/Windows/System32/cmd.exe",
    "powershell.exe": "/mnt/c/Windows/System32/WindowsPowerShell/v1.0/powershell.exe",
}


def wsl_facts(interop: bool, installed=None, **changes) -> dict:
    """Opener facts of WSL; `installed` adds to (or, with None values, removes from) the
    Windows openers every WSL with interop has."""
    tools = dict(linux_facts()["installed"])
    tools.update(WINDOWS_OPENERS)
    tools.update(installed or {})
    changes.setdefault("display", {"DISPLAY": "", "WAYLAND_DISPLAY": ""})
    changes.setdefault("windows_root", "/mnt/c")
    return linux_facts(wsl=True, interop=interop, installed=tools, **changes)


def server_env(log_dir, **extra) -> dict:
    """The environment for the server: the SDK passes a minimal one, so name what matters."""
    env = {
        "ASK_USER_RICH_LOG_DIR": str(log_dir),
        "ASK_USER_RICH_PROGRESS_MS": "60000",
        "ASK_USER_RICH_INBOX_PORT": "0",  # never the user's inbox on its well-known port
        "ASK_USER_RICH_NOTIFY": "off",  # nor a notice on the machine the tests run on
        "PATH": os.environ.get("PATH", os.defpath),
        "XDG_CACHE_HOME": str(log_dir) + "-cache",  # never the user's cache folder
    }
    env.update({key: str(value) for key, value in extra.items()})
    return env


@contextlib.contextmanager
def declared_elicitation(monkeypatch, capability):
    """Make the SDK client declare `capability` (a dict such as {} or {"url": {}}, or None for
    no elicitation at all) instead of its fixed {form, url}."""
    from mcp import types
    from mcp.client.session import ClientSession

    original = ClientSession._build_capabilities

    def build(self, version):
        capabilities = original(self, version)
        if capability is None:
            elicitation = None
        else:
            elicitation = types.ElicitationCapability.model_validate(capability)
        return capabilities.model_copy(update={"elicitation": elicitation})

    monkeypatch.setattr(ClientSession, "_build_capabilities", build)
    yield


def progress_recorder(progress: list, ticks: int = 2):
    """(callback, event) for an SDK call: the callback keeps each (value, message) in
    `progress` and sets the anyio event once `ticks` reports came. The server reports from
    inside the wait, so the first report proves the call waits and the second that an interval
    tick followed. Make it inside the event loop."""
    import anyio

    reported = anyio.Event()

    async def on_progress(value, total, message):
        progress.append((value, message))
        if len(progress) >= ticks:
            reported.set()

    return on_progress, reported


def answer_everything(spec: dict) -> dict:
    """A submit body that answers every question: the recommendation, else the first option
    (the full order for rank), else an Other text."""
    answers = {}
    for question in spec["questions"]:
        option_ids = [option["id"] for option in question["options"]]
        recommended = question["recommended"]
        if question["kind"] == "rank":
            answers[question["id"]] = {"ranked": recommended or option_ids}
        elif option_ids:
            answers[question["id"]] = {"selected": recommended[:1] or option_ids[:1]}
        else:
            answers[question["id"]] = {"other": "typed in the fake browser"}
    return answers


def submit_like_a_browser(form_url: str) -> dict:
    """Load the page, an asset and the interview, then submit answers: what a user does."""
    page = http_request(form_url)
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html"), page.status
    loaded = http_request(api_url(form_url))
    assert loaded.status == 200, loaded.status
    payload = loaded.json()
    submit = {"answers": answer_everything(payload["spec"]), "specVersion": payload["version"]}
    sent = http_request(api_url(form_url, "submit"), "POST", submit)
    assert sent.status == 200, (sent.status, sent.body)
    return sent.json()


def write_fake_browser(directory) -> tuple:
    """A Python script that acts as ASK_USER_RICH_OPEN_CMD: it loads the page and the
    interview, submits, and records what it did. (command string, record path)."""
    import shlex

    record = os.path.join(str(directory), "fake-browser.json")
    script = os.path.join(str(directory), "fake_browser.py")
    with open(script, "w", encoding="utf-8") as handle:
        handle.write(
            textwrap.dedent(
                """\
                import json, sys
                sys.path.insert(0, %r)
                from helpers.delivery_support import submit_like_a_browser
                reply = submit_like_a_browser(sys.argv[1])
                with open(%r, "w") as handle:
                    json.dump({"argv": sys.argv[1:], "reply": reply}, handle)
                """
            )
            % (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), record)
        )
    command = "%s %s" % (shlex.quote(sys.executable), shlex.quote(script))
    return command, record


FLAT_INTERVIEW = {
    "title": "Pick a stack",
    "intro": "Three quick ones.",
    "questions": [
        {
            "id": "db",
            "header": "Which database?",
            "body": "We need **one**.",
            "options": [
                {"id": "pg", "label": "Postgres"},
                {"id": "my", "label": "MySQL"},
            ],
            "recommended": "pg",
            "rationale": "We run it already.",
        },
        {
            "id": "extras",
            "header": "Which extras?",
            "multiSelect": True,
            "options": [
                {"id": "cache", "label": "Cache"},
                {"id": "queue", "label": "Queue"},
                {"id": "search", "label": "Search"},
            ],
            "recommended": ["cache", "queue"],
        },
        {"id": "free", "header": "Anything else?"},
    ],
}

RANK_INTERVIEW = {
    "title": "Order the goals",
    "questions": [
        {
            "id": "goals",
            "header": "Rank the goals",
            "kind": "rank",
            "options": [
                {"id": "speed", "label": "Speed"},
                {"id": "cost", "label": "Cost"},
            ],
            "recommended": ["cost", "speed"],
        }
    ],
}
