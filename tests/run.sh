#!/usr/bin/env bash
# The one test command (README "Run the tests"): installs what the tests need, then runs them all.
# Works on a fresh machine: pip packages from tests/requirements.txt, and Debian's Chromium for the
# browser tests (Playwright cannot download its own browser here, so we drive /usr/bin/chromium).
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

if [ ! -x /usr/bin/chromium ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

# Chromium was just ensured, so a browser test that finds it missing must fail, not skip.
export ASK_USER_RICH_TESTS_REQUIRE_CHROMIUM=1
exec "$PY" -m pytest tests "$@"
