"""The README's picture of a desktop notice (assets/screenshots/notice.png): a real notification
daemon (dunst) on a virtual screen (Xvfb) with its own session bus, shown by the very notify-send
command the server plans, then captured with ImageMagick's `import` and cropped.

    apt-get install xvfb dunst libnotify-bin dbus-x11 imagemagick
    python3 tests/helpers/notice_screenshot.py [OUT.png]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import askrich  # noqa: E402

DISPLAY = ":77"
SCREEN = (1024, 300)
CROP = "520x130+%d+0" % (SCREEN[0] - 524)
DUNSTRC = """[global]
    font = DejaVu Sans 13
    width = 460
    line_height = 4
    origin = top-right
    offset = 24x24
    padding = 16
    horizontal_padding = 18
    frame_width = 1
    frame_color = "#c7ccd6"
    corner_radius = 10
    markup = full
    format = "<b>%s</b>\\n%b"
    icon_position = off
[urgency_normal]
    background = "#ffffff"
    foreground = "#1f2430"
    timeout = 0
"""


def wait_for(argv: list, env: dict) -> None:
    """Run `argv` until it succeeds (the X server or the daemon coming up), for 10 s at most."""
    for _ in range(100):
        if subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
            return
        subprocess.run(["sleep", "0.1"])
    raise SystemExit("%s never succeeded" % argv[0])


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "assets", "screenshots", "notice.png")
    started = []
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, DISPLAY=DISPLAY)
        try:
            started.append(subprocess.Popen(["Xvfb", DISPLAY, "-noreset", "-screen", "0", "%dx%dx24" % SCREEN]))
            # -noreset: the root's colour stays when its last client leaves.
            wait_for(["xsetroot", "-solid", "#e9edf3"], env)
            bus = subprocess.run(["dbus-daemon", "--session", "--fork", "--print-address=1", "--print-pid=1"],
                                 env=env, stdout=subprocess.PIPE, check=True).stdout.decode().split()
            env["DBUS_SESSION_BUS_ADDRESS"] = bus[0]
            rc = os.path.join(folder, "dunstrc")
            with open(rc, "w") as handle:
                handle.write(DUNSTRC)
            started.append(subprocess.Popen(["dunst", "-config", rc], env=env))
            wait_for(["dunstctl", "is-paused"], env)
            spec = {"title": "Database migration plan", "questions": [{}] * 12, "language": "en"}
            notice = askrich.compose_notice(spec, "Claude Code", "/home/dev/shop-api", "http://localhost:47615/s/x", {})
            command, missing = askrich.plan_desktop_notice(askrich.desktop_facts(env), notice)
            assert command is not None, missing
            started.append(subprocess.Popen(command.argv, env=env))  # it waits for a click
            subprocess.run(["sleep", "1"])
            shot = os.path.join(folder, "screen.png")
            subprocess.run(["import", "-window", "root", shot], env=env, check=True)
            subprocess.run(["/usr/bin/convert", shot, "-crop", CROP, "+repage", out], check=True)
        finally:
            for process in reversed(started):
                process.kill()
                process.wait()
            if "DBUS_SESSION_BUS_ADDRESS" in env:
                subprocess.run(["kill", bus[1]])
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
