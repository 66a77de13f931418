"""The built askrich.pyz under every CPython 3.8-3.13 on the machine (the real binaries of the
pyenv installs, not the shims): handshake, tools/list, a link interview answered over HTTP and
collected with await_user_answers, the form page and every asset it references. Each runs twice:
with an empty code cache (the archive compiles askrich) and with the cache it just wrote.

Absent interpreters are skipped by name; tests/.artifacts/zipapp-matrix.json records which ran.
"""

import json
import os
import subprocess
import sys
import warnings

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:  # the helper beside this file, whatever pytest's import mode
    sys.path.insert(0, _HERE)
import zipapp_support as zs  # noqa: E402

_RAN = {}


def _params():
    params = [(v, zs.interpreter(v)) for v in zs.SUPPORTED]
    current = "%d.%d" % sys.version_info[:2]
    if not any(v == current and p for v, p in params):
        # No pyenv copy of the running interpreter: still test the archive under it.
        params.append(("current-" + current, sys.executable))
    return params


@pytest.fixture(scope="module")
def pyz(tmp_path_factory):
    return zs.shared_pyz(tmp_path_factory)


@pytest.fixture(scope="module", autouse=True)
def matrix_report():
    yield
    absent = [v for v, python in _params() if python is None]
    failed = [v for v, python in _params() if python and v not in _RAN]
    folder = os.path.join(zs.ROOT, "tests", ".artifacts")
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "zipapp-matrix.json"), "w") as f:
            json.dump({"ran": _RAN, "absent": absent, "failed": failed}, f, indent=2)
    except OSError:
        pass
    warnings.warn("askrich.pyz version matrix passed under %s; absent: %s; failed: %s"
                  % (", ".join("%s (%s)" % (v, _RAN[v]) for v, _ in _params() if v in _RAN) or "none",
                     ", ".join(absent) or "none", ", ".join(failed) or "none"))


@pytest.mark.parametrize("version,python", _params(), ids=[v for v, _ in _params()])
def test_archive_serves_a_link_interview_under(version, python, pyz, tmp_path):
    if python is None:
        pytest.skip("python%s not installed under %s" % (version, zs.PYENV_VERSIONS))
    target = zs.lone_copy(pyz, str(tmp_path / "empty"))
    folder = os.path.dirname(target)
    env = zs.child_env(tmp_path)
    probe = subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0]); print(sys.implementation.cache_tag)"],
        stdout=subprocess.PIPE, universal_newlines=True, timeout=zs.RUN_TIMEOUT, check=True)
    full_version, tag = probe.stdout.split()

    # Cold: nothing cached, a relative archive path (Python 3.8 keeps it relative).
    server = zs.McpServer([python, "askrich.pyz"], cwd=folder, env=env)
    try:
        info, _ = zs.handshake(server)
        served = zs.link_interview_round_trip(server, target)
        assert server.close() == 0, "".join(server.stderr)
    finally:
        server.kill()
    assert any(p.endswith(".js") for p in served), served
    cached = os.listdir(os.path.join(env["XDG_CACHE_HOME"], "ask-user-rich"))
    assert [n for n in cached if n.startswith("askrich-%s-" % tag)], cached

    # Warm: the code cache written above, an absolute path.
    server = zs.McpServer([python, target], cwd=str(tmp_path), env=env)
    try:
        again, _ = zs.handshake(server)
        assert again == info
        zs.link_interview_round_trip(server, target)
        assert server.close() == 0, "".join(server.stderr)
    finally:
        server.kill()
    _RAN[version] = full_version
