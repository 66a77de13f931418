"""Fixtures shared by every test; the helpers they use live in the helpers package
(tests/helpers/__init__.py says how it is found)."""

from __future__ import annotations

import os

import pytest

# Every server a test starts, in this process or as a child inheriting this environment, keeps
# off the user's inbox on its well-known port (several test runs share this machine); a test
# that wants an inbox names a free port of its own.
os.environ["ASK_USER_RICH_INBOX_PORT"] = "0"
# Nor does one pop a notice up on the machine the tests run on: a test of notices turns them on
# with a stand-in notifier or a loopback push target of its own.
os.environ["ASK_USER_RICH_NOTIFY"] = "off"

from helpers import leftovers  # noqa: E402
from helpers.modern_support import assert_every_modern_message_fits  # noqa: E402
from helpers.support import DISCARD, InProcessServer, SubprocessServer, askrich  # noqa: E402

# This run's mark, inherited by every process a test starts: how the leftover check below finds
# our askrich.py processes, and only this run's.
os.environ[leftovers.RUN_MARK] = "%d-%s" % (os.getpid(), os.urandom(6).hex())
_left_behind: list = []  # (what started it, pid, command line)
_fixture_servers: dict = {}  # process key -> the wider-scoped fixture that started it


def _check_leftovers(new: dict, owner: str) -> None:
    """Kill and remember each of `new` that does not end within the grace."""
    for (pid, _), argv in leftovers.still_running(new, leftovers.LEFTOVER_GRACE).items():
        _left_behind.append((owner, pid, argv))
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    # A module's or session's fixture may keep its server across tests: it answers for it
    # when it is torn down, not the test that happened to start it.
    if fixturedef.scope == "function" or not leftovers.can_check():
        yield
        return
    before = set(leftovers.our_servers())
    yield
    for key in set(leftovers.our_servers()) - before:
        _fixture_servers[key] = fixturedef


def pytest_fixture_post_finalizer(fixturedef, request):
    mine = {key for key, owner in _fixture_servers.items() if owner is fixturedef}
    if not mine:
        return
    for key in mine:
        del _fixture_servers[key]
    _check_leftovers({key: argv for key, argv in leftovers.our_servers().items() if key in mine},
                     "the %s fixture %r" % (fixturedef.scope, fixturedef.argname))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not leftovers.can_check():
        yield
        return
    before = set(leftovers.our_servers())
    yield
    _check_leftovers({key: argv for key, argv in leftovers.our_servers().items()
                      if key not in before and key not in _fixture_servers}, item.nodeid)


def pytest_terminal_summary(terminalreporter):
    for owner, pid, argv in _left_behind:
        terminalreporter.write_line("LEFT RUNNING: %s outlived %s by %.0f s (pid %d, killed)"
                                    % (argv, owner, leftovers.LEFTOVER_GRACE, pid), red=True)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    if _left_behind:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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
