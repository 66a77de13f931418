#!/usr/bin/env bash
# The one test command (README "Run the tests"): installs what the tests need, then runs them all.
# Works on a fresh machine: pip packages from tests/requirements.txt, Debian's Chromium for the
# browser tests (Playwright cannot download its own browser here, so we drive /usr/bin/chromium),
# and the pinned MCP client CLIs from npm for the registration tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

install() { "$1" -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt; }
if ! install "$PY"; then
  # A system Python that refuses pip installs (PEP 668, as Debian's does): a private venv.
  echo "tests/run.sh: installing the test dependencies into tests/.venv instead" >&2
  "$PY" -m venv tests/.venv
  PY=tests/.venv/bin/python
  install "$PY"
fi

apt_install() {
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}
[ -x /usr/bin/chromium ] || apt_install chromium
# CJK fonts, so that the Japanese, Chinese and Korean pages are laid out (and screenshotted) with
# real glyphs rather than boxes of another width.
if ! { command -v fc-list >/dev/null && [ -n "$(fc-list :lang=ja)" ]; }; then apt_install fonts-noto-cjk; fi
# The front door's real tunnels: an OpenSSH server and client on loopback (ssh -L), and nginx as
# a TLS reverse proxy with a certificate openssl makes at test time; zbarimg reads back the
# "Open on another device" QR codes.
missing=()
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v ssh >/dev/null || missing+=(openssh-client)
[ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v openssl >/dev/null || missing+=(openssl)
command -v zbarimg >/dev/null || missing+=(zbar-tools)
# A real desktop notice: a notification daemon (dunst) on a virtual screen (Xvfb), on a session
# bus of the test's own, shown by notify-send.
command -v Xvfb >/dev/null || missing+=(xvfb)
command -v dunst >/dev/null || missing+=(dunst)
command -v notify-send >/dev/null || missing+=(libnotify-bin)
command -v dbus-daemon >/dev/null || missing+=(dbus-daemon)
[ ${#missing[@]} = 0 ] || apt_install "${missing[@]}"

# The MCP clients' own CLIs (Claude Code, Gemini CLI, Codex), pinned, on a Node 22 from npm,
# cached per machine and reused by later runs (tests/helpers/clients_support.py holds the pins). npm itself
# comes from Debian when the machine has none. The same step installs the MCP Apps test host
# (AppBridge from @modelcontextprotocol/ext-apps, bundled by esbuild; pins in clients_support.py).
command -v npm >/dev/null || apt_install npm
ASK_USER_RICH_TESTS_CLIENTS_DIR=$("$PY" tests/helpers/clients_support.py)
export ASK_USER_RICH_TESTS_CLIENTS_DIR

# Chromium and the client CLIs were just ensured, so a test that finds one missing must fail, not skip.
export ASK_USER_RICH_TESTS_REQUIRE_CHROMIUM=1
export ASK_USER_RICH_TESTS_REQUIRE_CLIENTS=1
export ASK_USER_RICH_TESTS_REQUIRE_DESKTOP=1
# The attacks by another local user run as uid 65534 through setpriv, which needs root (or sudo
# without a password): CI has it, so there they must run; a developer's run may skip them and says why.
if [ "$(id -u)" = 0 ] || [ -n "${CI:-}" ]; then export ASK_USER_RICH_TESTS_REQUIRE_OTHER_USER=1; fi
# Paths among the arguments (tests/form, tests/cli/test_hook.py::test_x) run alone; without any,
# the whole suite runs.
targets=(tests)
for arg in "$@"; do
  if [ -e "${arg%%::*}" ]; then targets=(); break; fi
done
exec "$PY" -m pytest "${targets[@]}" "$@"
