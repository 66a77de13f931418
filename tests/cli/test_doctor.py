"""`askrich.py doctor`: on this machine (no display), on described machines, and broken."""

import io
import os
import subprocess
import sys

import pytest

from helpers.delivery_support import SERVER, linux_facts, wsl_facts
from helpers.inbox_support import free_port

import askrich

MACHINE_VARIABLES = ("DISPLAY", "WAYLAND_DISPLAY", "SSH_CONNECTION", "SSH_CLIENT", "SSH_TTY",
                     "WSL_DISTRO_NAME")


def doctor(tmp_path, server=SERVER, **extra):
    """Run `python3 askrich.py doctor` as a user would, with no display and a fresh log dir."""
    env = {key: value for key, value in os.environ.items()
           if key not in MACHINE_VARIABLES and not key.startswith("ASK_USER_RICH_")}
    env["ASK_USER_RICH_LOG_DIR"] = str(tmp_path / "logs")
    env["ASK_USER_RICH_INBOX_PORT"] = "0"  # never the user's inbox on its well-known port
    env.update(extra)
    done = subprocess.run([sys.executable, server, "doctor"], env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8")


def doctor_in_process(tmp_path, facts, **extra):
    out = io.StringIO()
    env = {"ASK_USER_RICH_LOG_DIR": str(tmp_path / "logs"), "ASK_USER_RICH_INBOX_PORT": "0"}
    env.update(extra)
    code = askrich.run_doctor(environ=env, facts=facts, out=out)
    return code, out.getvalue()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="this machine is Linux")
def test_doctor_on_this_machine_says_there_is_no_display_and_what_to_do(tmp_path):
    code, out, _ = doctor(tmp_path)
    assert code == 0, out
    assert "Python %s" % sys.version.split()[0] in out
    assert "log directory: %s (writable)" % (tmp_path / "logs") in out
    assert "WSL: no" in out
    assert "display: none (DISPLAY and WAYLAND_DISPLAY are unset)" in out
    assert "xdg-open skipped: there is no graphical display here" in out
    assert "=> no browser can be opened from here" in out
    what_to_do = out.split("what to do:\n", 1)[1]
    assert "  - open the link by hand" in what_to_do
    assert ("form server self-test: the form page HTTP 200, the asset js/main.js HTTP 200, "
            "the interview API HTTP 200, a submit HTTP 200: OK") in out
    assert out.rstrip().endswith("no browser opens here, so share the link (see above).")


def test_doctor_exits_1_with_what_to_do_when_the_form_server_cannot_bind(tmp_path):
    # 203.0.113.0/24 is reserved for documentation: no interface here has it, so bind fails
    # at once and nothing is sent anywhere.
    code, out, _ = doctor(tmp_path, ASK_USER_RICH_HOST="203.0.113.7")
    assert code == 1
    assert "form server self-test: FAILED at starting the form server" in out
    assert "BROKEN:" in out and "ASK_USER_RICH_HOST" in out.split("BROKEN:")[1]


def test_doctor_exits_1_when_the_log_directory_cannot_be_written(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, out, _ = doctor(tmp_path, ASK_USER_RICH_LOG_DIR=str(blocker / "logs"))
    assert code == 1
    assert "(NOT writable:" in out
    assert "set ASK_USER_RICH_LOG_DIR to a directory you can write" in out


def test_doctor_reports_a_bad_setting(tmp_path):
    code, out, _ = doctor(tmp_path, ASK_USER_RICH_PORT="eighty")
    assert code == 0
    assert "config warning: ASK_USER_RICH_PORT='eighty' is not a number" in out


def test_doctor_on_wsl_without_interop_shows_the_fix(tmp_path):
    code, out = doctor_in_process(tmp_path, wsl_facts(False))
    assert code == 0
    assert "WSL: yes; interop: OFF (no WSLInterop entry in /proc/sys/fs/binfmt_misc" in out
    assert "  skip  WSL interop is disabled" in out
    assert ":WSLInterop:M::MZ::/init:PF" in out.split("what to do:")[1]


def test_doctor_on_wsl_with_interop_lists_every_candidate_in_order(tmp_path):
    code, out = doctor_in_process(tmp_path, wsl_facts(True), ASK_USER_RICH_PORT="0")
    plan = [text for text in out.splitlines() if text.startswith("  try")]
    assert plan == [
        "  try   /usr/bin/wslview <url>",
        "  try   /mnt/c/Windows/explorer.exe <url>  (exit 0 or 1 = opened)",
        '  try   /mnt/c/Windows/System32/cmd.exe /c start "" <url>  (in /mnt/c)',
        "  try   /mnt/c/Windows/System32/WindowsPowerShell/v1.0/powershell.exe -NoProfile "
        "-NonInteractive -Command Start-Process '<url>'  (in /mnt/c)",
    ]
    assert "what to do:" not in out and "no browser can be opened" not in out


def test_doctor_over_ssh_says_how_to_forward_the_fixed_port(tmp_path):
    facts = linux_facts(ssh=True, display={"DISPLAY": "", "WAYLAND_DISPLAY": ""})
    port = free_port()  # whatever port the person fixed; one that another program holds is another test
    code, out = doctor_in_process(tmp_path, facts, ASK_USER_RICH_PORT=str(port))
    assert "SSH session: yes" in out
    assert "ssh -L %d:localhost:%d" % (port, port) in out
    assert "fixed port %d: free" % port in out


def test_doctor_on_a_desktop_plans_xdg_open_and_gives_no_advice(tmp_path):
    code, out = doctor_in_process(tmp_path, linux_facts())
    assert code == 0
    assert "display: DISPLAY=:0" in out and "  try   /usr/bin/xdg-open <url>" in out
    assert "what to do:" not in out and out.rstrip().endswith("ok: the form server works.")


def test_doctor_with_opening_disabled_says_so(tmp_path):
    code, out = doctor_in_process(tmp_path, linux_facts(open_enabled=False))
    assert "  skip  opening is disabled (ASK_USER_RICH_OPEN=0)" in out
    assert "what to do:" not in out


@pytest.mark.skipif(not hasattr(os, "symlink") or sys.platform == "win32", reason="POSIX symlinks")
def test_a_checkout_run_through_a_symlink_finds_its_form_files(tmp_path):
    """`ln -s ~/src/ask-user-rich/askrich.py ~/bin/askrich`: the form's files are beside the real
    file, not beside the link."""
    link = tmp_path / "bin" / "askrich"
    link.parent.mkdir()
    link.symlink_to(SERVER)
    code, out, _ = doctor(tmp_path, server=str(link))
    assert code == 0, out
    assert "the asset js/main.js HTTP 200" in out and "a submit HTTP 200: OK" in out, out
