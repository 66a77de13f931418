"""The opener plan (pure, every platform from injected facts), the walker (real commands), and
the whole browser path end to end with a fake browser behind ASK_USER_RICH_OPEN_CMD."""

import json
import os
import sys

import anyio
import pytest

from helpers.support import DISCARD
from helpers.delivery_support import (
    CALL_TIMEOUT,
    FLAT_INTERVIEW,
    SERVER,
    linux_facts,
    server_env,
    write_fake_browser,
    wsl_facts,
)

import askrich
from askrich import Opener, open_browser, opener_advice, plan_openers, walk_openers

URL = "http://localhost:48123/s/AbCdEfGhIjKlMnOpQrStUvWx"


def names(candidates):
    return [opener.name for opener in candidates]


# -- configuration first ----------------------------------------------------------------------


def test_open_0_plans_nothing_and_says_why():
    candidates, notes = plan_openers(URL, wsl_facts(True, open_enabled=False))
    assert candidates == []
    assert notes == ["opening is disabled (ASK_USER_RICH_OPEN=0)"]


def test_open_cmd_is_the_only_candidate_with_the_url_as_its_own_argument():
    facts = wsl_facts(True, open_cmd=["firefox", "--new-window"])
    candidates, notes = plan_openers(URL, facts)
    assert len(candidates) == 1 and notes == []
    assert candidates[0].argv == ["firefox", "--new-window", URL]
    assert "ASK_USER_RICH_OPEN_CMD" in candidates[0].name


def test_open_cmd_naming_a_program_with_spaces_is_kept_whole(tmp_path):
    program = tmp_path / "my browser"
    program.write_text("#!/bin/sh\n")
    config = askrich.Config(open_cmd=str(program), log_dir=str(tmp_path))
    assert askrich.opener_facts(config, {"PATH": ""})["open_cmd"] == [str(program)]
    config = askrich.Config(open_cmd="'%s' --flag" % program, log_dir=str(tmp_path))
    assert askrich.opener_facts(config, {"PATH": ""})["open_cmd"] == [str(program), "--flag"]


# -- one plan per platform --------------------------------------------------------------------


def test_macos_uses_open():
    candidates, _ = plan_openers(URL, linux_facts(platform="darwin"))
    assert [c.argv for c in candidates] == [["open", URL]]


def test_macos_over_ssh_skips_open_and_says_why():
    candidates, notes = plan_openers(URL, linux_facts(platform="darwin", ssh=True))
    assert candidates == [] and "SSH session" in notes[0]
    assert "ssh -L 48123:localhost:48123" in " ".join(opener_advice(URL, linux_facts(platform="darwin", ssh=True)))


def test_windows_uses_cmd_start_with_an_empty_title():
    candidates, _ = plan_openers(URL, linux_facts(platform="win32"))
    assert [c.argv for c in candidates] == [["cmd", "/c", "start", "", URL]]


def test_windows_skips_cmd_for_a_url_it_would_reinterpret():
    candidates, notes = plan_openers(URL + "?a=1&b=2", linux_facts(platform="win32"))
    assert candidates == []
    assert "reinterpret" in notes[0] and '"&"' in notes[0]


def test_linux_desktop_uses_xdg_open():
    candidates, notes = plan_openers(URL, linux_facts())
    assert [c.argv for c in candidates] == [["/usr/bin/xdg-open", URL]] and notes == []


def test_linux_on_wayland_alone_uses_xdg_open():
    facts = linux_facts(display={"DISPLAY": "", "WAYLAND_DISPLAY": "wayland-0"})
    assert names(plan_openers(URL, facts)[0]) == ["xdg-open"]


def test_linux_without_a_display_skips_xdg_open_and_says_why():
    # SSH sessions and containers: xdg-open would "succeed" and nothing would ever appear.
    facts = linux_facts(display={"DISPLAY": "", "WAYLAND_DISPLAY": ""}, ssh=True)
    candidates, notes = plan_openers(URL, facts)
    assert candidates == []
    assert "no graphical display" in notes[0] and "DISPLAY" in notes[0]


def test_linux_without_xdg_open_says_so():
    installed = dict(linux_facts()["installed"], **{"xdg-open": None})
    candidates, notes = plan_openers(URL, linux_facts(installed=installed))
    assert candidates == [] and notes == ["xdg-open is not installed"]


# -- WSL --------------------------------------------------------------------------------------


def test_wsl_with_interop_tries_wslview_explorer_cmd_then_powershell():
    candidates, notes = plan_openers(URL, wsl_facts(True))
    assert notes == []
    assert names(candidates) == ["wslview", "explorer.exe", "cmd.exe", "powershell.exe"]
    wslview, explorer, cmd, powershell = candidates
    assert wslview.argv == ["/usr/bin/wslview", URL]
    assert explorer.argv == ["/mnt/c/Windows/explorer.exe", URL]
    assert explorer.ok_codes == (0, 1)  # explorer.exe exits 1 after opening a URL
    assert cmd.argv == ["/mnt/c/Windows/System32/cmd.exe", "/c", "start", "", URL]
    assert cmd.cwd == "/mnt/c" and powershell.cwd == "/mnt/c"
    assert powershell.argv[1:] == [
        "-NoProfile", "-NonInteractive", "-Command", "Start-Process '%s'" % URL,
    ]


def test_wsl_with_interop_tries_only_what_is_installed_and_names_the_rest():
    facts = wsl_facts(True, installed={"wslview": None, "powershell.exe": None})
    candidates, notes = plan_openers(URL, facts)
    assert names(candidates) == ["explorer.exe", "cmd.exe"]
    assert any("wslview is not installed" in note for note in notes)
    assert any("powershell.exe was not found" in note for note in notes)


def test_wsl_skips_cmd_for_characters_cmd_would_reinterpret():
    for url in (URL + "?a=1&b=2", URL + "?x=%PATH%", URL + "?a=^1", URL + "?p=(1)|x"):
        candidates, notes = plan_openers(url, wsl_facts(True))
        assert "cmd.exe" not in names(candidates), url
        assert "powershell.exe" in names(candidates), url
        assert any(note.startswith("cmd.exe skipped") for note in notes), url


def test_wsl_doubles_single_quotes_for_powershell():
    url = URL + "?q=it's"
    powershell = plan_openers(url, wsl_facts(True))[0][-1]
    assert powershell.name == "powershell.exe"
    assert powershell.argv[-1] == "Start-Process '%s'" % (URL + "?q=it''s")


@pytest.mark.parametrize(
    "suffix, problem",
    [("?q=a b", "whitespace"), ('?q="x"', "quotes"), ("?q=\u201cx\u201d", "quotes"), ("?q=\x07", "control")],
)
def test_wsl_skips_powershell_for_whitespace_quotes_and_control_characters(suffix, problem):
    candidates, notes = plan_openers(URL + suffix, wsl_facts(True))
    assert "powershell.exe" not in names(candidates)
    assert any(note.startswith("powershell.exe skipped") and problem in note for note in notes)


def test_wsl_without_interop_tries_no_windows_opener_and_explains():
    # The Windows binaries are there, but without the binfmt entry none of them can run.
    candidates, notes = plan_openers(URL, wsl_facts(False, installed={"xdg-open": None}))
    assert candidates == []
    assert "; ".join(notes) == (
        "WSL interop is disabled (no WSLInterop entry in /proc/sys/fs/binfmt_misc), so Windows "
        "openers (explorer.exe, cmd.exe, powershell.exe) cannot run; xdg-open is not installed"
    )


def test_wsl_without_interop_or_gui_skips_xdg_open():
    candidates, notes = plan_openers(URL, wsl_facts(False))
    assert candidates == [] and "no Linux GUI" in notes[-1]


WSLG = {"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}


def test_wslg_without_a_linux_browser_skips_xdg_open():
    facts = wsl_facts(False, display=WSLG, https_handler="", https_handler_installed=False)
    candidates, notes = plan_openers(URL, facts)
    assert candidates == [] and "names no https handler" in notes[-1]


def test_wslg_whose_https_handler_is_wslview_skips_xdg_open():
    facts = wsl_facts(False, display=WSLG, https_handler="wslview.desktop", https_handler_installed=True)
    candidates, notes = plan_openers(URL, facts)
    assert candidates == [] and "wslview.desktop, which needs interop" in notes[-1]


def test_wslg_with_a_handler_that_is_not_installed_skips_xdg_open():
    facts = wsl_facts(False, display=WSLG, https_handler="gone.desktop", https_handler_installed=False)
    candidates, notes = plan_openers(URL, facts)
    assert candidates == [] and "gone.desktop is not installed" in notes[-1]


def test_wslg_without_xdg_mime_skips_xdg_open():
    facts = wsl_facts(False, display=WSLG, installed={"xdg-mime": None})
    candidates, notes = plan_openers(URL, facts)
    assert candidates == [] and "xdg-mime is not installed" in notes[-1]


def test_wslg_with_a_real_linux_browser_uses_xdg_open():
    facts = wsl_facts(False, display=WSLG, https_handler="firefox.desktop", https_handler_installed=True)
    candidates, notes = plan_openers(URL, facts)
    assert [c.argv for c in candidates] == [["/usr/bin/xdg-open", URL]]
    assert "WSL interop is disabled" in notes[0]


# -- advice -----------------------------------------------------------------------------------


def test_advice_for_wsl_without_interop_gives_the_binfmt_fix():
    advice = " ".join(opener_advice(URL, wsl_facts(False)))
    assert ":WSLInterop:M::MZ::/init:PF" in advice and "systemd-binfmt" in advice


def test_advice_over_ssh_forwards_the_port_and_suggests_a_fixed_one():
    advice = " ".join(opener_advice(URL, linux_facts(ssh=True)))
    assert "ssh -L 48123:localhost:48123" in advice and "ASK_USER_RICH_PORT" in advice


def test_advice_in_a_container_publishes_the_port():
    advice = " ".join(opener_advice(URL, linux_facts(container=True)))
    assert "-p 127.0.0.1:48123:48123" in advice and "ASK_USER_RICH_HOST=0.0.0.0" in advice


def test_advice_always_ends_with_opening_by_hand():
    assert opener_advice(URL, linux_facts())[-1] == "open the link by hand"


# -- facts from this machine ------------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="WSL detection is Linux-only")
def test_facts_detect_wsl_from_its_variable_and_interop_from_binfmt(tmp_path, monkeypatch):
    config = askrich.Config(log_dir=str(tmp_path))
    binfmt = tmp_path / "binfmt_misc"
    binfmt.mkdir()
    monkeypatch.setattr(askrich, "WSL_INTEROP_DIR", str(binfmt))
    env = {"WSL_DISTRO_NAME": "Ubuntu", "PATH": ""}
    facts = askrich.opener_facts(config, env)
    assert facts["wsl"] is True and facts["interop"] is False
    (binfmt / "WSLInterop").write_text("enabled\ninterpreter /init\n")
    assert askrich.opener_facts(config, env)["interop"] is True
    (binfmt / "WSLInterop").write_text("disabled\n")
    assert askrich.opener_facts(config, env)["interop"] is False
    (binfmt / "WSLInterop-late").write_text("enabled\n")
    assert askrich.opener_facts(config, env)["interop"] is True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux facts")
def test_facts_read_display_ssh_and_open_settings_from_the_environment(tmp_path):
    config = askrich.Config(open_browser=False, log_dir=str(tmp_path))
    facts = askrich.opener_facts(config, {"DISPLAY": ":1", "SSH_CONNECTION": "1 2 3 4", "PATH": ""})
    assert facts["display"]["DISPLAY"] == ":1"
    assert facts["ssh"] is True and facts["open_enabled"] is False
    assert askrich.opener_facts(config, {"PATH": ""})["ssh"] is False


# -- the walker, with real commands -----------------------------------------------------------


def python_opener(name, code, **kwargs):
    return Opener(name, [sys.executable, "-c", code, URL], **kwargs)


def test_walker_succeeds_on_exit_0():
    assert walk_openers([Opener("true", ["true", URL])]) == (True, "true exited with 0 (opened)")


def test_walker_reports_a_failing_exit_code_with_what_the_opener_said():
    failing = python_opener("xdg-open", "import sys; sys.stderr.write('no method available\\n'); sys.exit(3)")
    opened, why = walk_openers([failing, Opener("false", ["false", URL])])
    assert opened is False
    assert why == "xdg-open exited with 3: no method available; false exited with 1"


def test_walker_reports_a_missing_binary_and_goes_on():
    missing = Opener("nope", ["/nonexistent/ask-user-rich-opener", URL])
    opened, why = walk_openers([missing, Opener("true", ["true", URL])])
    assert opened is True
    assert why.startswith("nope could not start (No such file or directory); true exited")


def test_walker_takes_exit_1_as_success_where_allowed():
    assert walk_openers([Opener("explorer.exe", ["false", URL], ok_codes=(0, 1))])[0] is True


def test_walker_stops_at_the_first_success(tmp_path):
    marker = tmp_path / "ran"
    later = python_opener("later", "open(%r, 'w').close()" % str(marker))
    opened, _ = walk_openers([Opener("true", ["true", URL]), later])
    assert opened is True and not marker.exists()


def test_walker_takes_a_launcher_still_running_after_the_grace_as_opened(tmp_path):
    gate = tmp_path / "gate"
    # Stays in the foreground until the test lets it go, like a browser run directly.
    launcher = python_opener(
        "firefox",
        "import os, time\nwhile not os.path.exists(%r): time.sleep(0.05)" % str(gate),
    )
    try:
        opened, why = walk_openers([launcher], grace=0.3)
    finally:
        gate.write_text("")
    assert opened is True and why == "firefox is still running after 0.3s, taken as opened"


def test_walker_passes_the_url_as_one_argument_without_a_shell(tmp_path):
    record = tmp_path / "argv.json"
    url = URL + "?q=$(touch pwned); echo hi & `id` | 'x' \"y\""
    writer = Opener(
        "recorder",
        [sys.executable, "-c", "import json, os, sys; json.dump([os.getcwd()] + sys.argv[1:], open(%r, 'w'))" % str(record), url],
        cwd=str(tmp_path),
    )
    assert walk_openers([writer])[0] is True
    assert json.loads(record.read_text()) == [str(tmp_path), url]
    assert not (tmp_path / "pwned").exists()


def test_walker_writes_nothing_to_stdout(capfd):
    walk_openers([python_opener("chatty", "print('to stdout'); import sys; sys.exit(1)")])
    assert capfd.readouterr().out == ""


def test_open_browser_reason_lists_tries_skips_and_advice_and_logs_no_token(tmp_path):
    log = askrich.Log(str(tmp_path), stream=DISCARD)
    facts = wsl_facts(True, installed={"wslview": None, "explorer.exe": "/nonexistent/explorer.exe",
                                       "cmd.exe": None, "powershell.exe": "false"},
                      windows_root=None)  # no /mnt/c on this machine to run in
    opened, why = open_browser(URL, askrich.Config(log_dir=str(tmp_path)), log, facts)
    log.close()
    assert opened is False
    assert why.split("; ") == [
        "wslview is not installed (package wslu)",
        "cmd.exe was not found at /mnt/c/Windows/System32/cmd.exe",
        "explorer.exe could not start (No such file or directory)",
        "powershell.exe exited with 1",
        "open the link by hand",
    ]
    logged = (tmp_path / "server.log").read_text()
    assert "browser-open" in logged and "opened=false" in logged
    assert "AbCdEfGh" not in logged  # the token never reaches the log


def test_open_browser_with_opening_disabled_gives_no_advice(tmp_path):
    log = askrich.Log(str(tmp_path), stream=DISCARD)
    opened, why = open_browser(URL, askrich.Config(log_dir=str(tmp_path)), log, linux_facts(open_enabled=False))
    log.close()
    assert (opened, why) == (False, "opening is disabled (ASK_USER_RICH_OPEN=0)")


# -- end to end: a blocked ask_user_rich call answered by a fake browser ----------------------


def test_a_fake_browser_behind_open_cmd_answers_the_blocked_call(tmp_path):
    from mcp import Client, StdioServerParameters

    command, record = write_fake_browser(tmp_path)
    env = server_env(tmp_path / "logs", ASK_USER_RICH_OPEN_CMD=command)

    async def scenario():
        params = StdioServerParameters(command=sys.executable, args=[SERVER], env=env)
        with anyio.fail_after(CALL_TIMEOUT):
            async with Client(params, mode="legacy") as client:
                return await client.call_tool("ask_user_rich", FLAT_INTERVIEW)

    result = anyio.run(scenario)
    structured = result.structured_content
    assert structured["status"] == "submitted" and structured["via"] == "browser"
    assert [row["selected"] for row in structured["answers"]] == [["pg"], ["cache"], []]
    assert structured["answers"][2]["other"] == "typed in the fake browser"
    done = json.loads(open(record).read())
    assert done["argv"][0].startswith("http://localhost:") and "/s/" in done["argv"][0]
    assert done["reply"]["ok"] is True


def test_advice_for_a_chosen_open_cmd_is_only_to_open_the_link_by_hand():
    facts = linux_facts(open_cmd=["my-browser"], ssh=True, container=True)
    assert opener_advice(URL, facts) == ["open the link by hand"]


# -- properties: no URL ever reaches cmd.exe or PowerShell in a form they would reinterpret ----

from helpers import hypothesis_profiles  # noqa: E402,F401  (loads the fuzz profile)
from hypothesis import example, given, strategies as st  # noqa: E402


@given(st.text(max_size=30))
@example("?a=1&b=2%PATH%")
@example("?q=it's \u2019x\u2019")
def test_every_wsl_candidate_gets_the_url_intact_or_is_skipped(suffix):
    url = URL + suffix
    candidates, notes = plan_openers(url, wsl_facts(True))
    by_name = {opener.name: opener for opener in candidates}
    for name in ("wslview", "explorer.exe"):
        assert by_name[name].argv[-1] == url
    cmd = by_name.get("cmd.exe")
    cmd_safe = not any(ch in '&|<>^%!()"' or ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url)
    assert (cmd is not None) == cmd_safe
    if cmd is not None:
        assert cmd.argv[-1] == url
    powershell = by_name.get("powershell.exe")
    if powershell is None:
        assert any(note.startswith("powershell.exe skipped") for note in notes)
    else:
        command = powershell.argv[-1]
        assert command.startswith("Start-Process '") and command.endswith("'")
        inner = command[len("Start-Process '"):-1]
        for quote in "'\u2018\u2019\u201a\u201b":
            # every single quote PowerShell knows is doubled, so none ends the string early
            assert inner.count(quote) == 2 * url.count(quote)
            inner = inner.replace(quote * 2, quote)
        assert inner == url
        assert not any(ch.isspace() or ch in '"\u201c\u201d\u201e`' or ord(ch) < 32 for ch in command[len("Start-Process"):].strip())
