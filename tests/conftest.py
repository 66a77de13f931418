"""Fixtures shared by the tests in this folder; the helpers they use live in support.py."""

from __future__ import annotations

import os
import sys

import pytest

# Every server a test starts, in this process or as a child inheriting this environment, keeps
# off the user's inbox on its well-known port (several test runs share this machine); a test
# that wants an inbox names a free port of its own.
os.environ["ASK_USER_RICH_INBOX_PORT"] = "0"
# Nor does one pop a notice up on the machine the tests run on: a test of notices turns them on
# with a stand-in notifier or a loopback push target of its own.
os.environ["ASK_USER_RICH_NOTIFY"] = "off"

# The tests live in folders by what they exercise (tests/README.md, "Layout"), beside the helpers
# in this one; a test module that reuses another's finds it by its file name, whatever the folder
# and whichever pytest collects first.
_TESTS = os.path.dirname(os.path.abspath(__file__))
for _folder in sorted(os.listdir(_TESTS)):
    _path = os.path.join(_TESTS, _folder)
    if os.path.isdir(_path) and any(name.startswith("test_") for name in os.listdir(_path)):
        sys.path.insert(1, _path)

from modern_support import assert_every_modern_message_fits  # noqa: E402
from support import DISCARD, InProcessServer, SubprocessServer, askrich  # noqa: E402


@pytest.fixture
def config(tmp_path):
    return askrich.Config(log_dir=str(tmp_path / "logs"), open_browser=False, progress_ms=15000)


@pytest.fixture
def runtime(config):
    rt = askrich.Runtime(config, askrich.Log(config.log_dir, stream=DISCARD))
    yield rt
    rt.close()


@pytest.fixture
def server(runtime):
    peer = InProcessServer(runtime)
    yield peer
    peer.close()
    assert_every_modern_message_fits(peer)


@pytest.fixture
def subprocess_server(tmp_path):
    peers = []

    def start(**kwargs):
        peer = SubprocessServer(tmp_path / "logs", **kwargs)
        peers.append(peer)
        return peer

    yield start
    for peer in peers:
        peer.close()
    # Whatever a test looked at, every answer to a modern request it made is held to the schema.
    for peer in peers:
        assert_every_modern_message_fits(peer)
