"""The built askrich.pyz under every CPython 3.8-3.13 on the machine (the real binaries of the
pyenv installs, not the shims): handshake, tools/list, a link interview answered over HTTP and
collected with await_user_answers, the form page and every asset it references. Each runs twice:
with an empty code cache (the archive compiles askrich) and with the cache it just wrote. A
checkout server (`python askrich.py`) runs under each too, idle for a while before it serves.

Absent interpreters are skipped by name; tests/.artifacts/zipapp-matrix.json records which ran.
"""

import json
import os
import subprocess
import sys
import warnings

import pytest

from helpers import zipapp_support as zs  # noqa: E402

_RAN = {}
_ATTEMPTED = []


def _params():
    params = [(v, zs.interpreter(v)) for v in zs.SUPPORTED]
    current = "%d.%d" % sys.version_info[:2]
    if not any(v == current and p for v, p in params):
        # No pyenv copy of the running interpreter: still test the archive under it.
        params.append(("current-" + current, sys.executable))
    return params


@pytest.fixture(scope="module")
def matrix_report():
    yield
    if not _ATTEMPTED:
        return
    absent = [v for v, python in _params() if python is None]
    failed = [v for v in _ATTEMPTED if v not in _RAN]
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
def test_archive_serves_a_link_interview_under(version, python, pyz, tmp_path, matrix_report):
    if python is None:
        pytest.skip("python%s not installed under %s" % (version, zs.PYENV_VERSIONS))
    _ATTEMPTED.append(version)
    target = zs.lone_copy(pyz, str(tmp_path / "empty"))
    folder = os.path.dirname(target)
    env = zs.child_env(tmp_path)
    probe = subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0]); print(sys.implementation.cache_tag)"],
        stdout=subprocess.PIPE, universal_newlines=True, timeout=zs.RUN_TIMEOUT, check=True)
    full_version, tag = probe.stdout.split()

    # Cold: nothing cached, a relative archive path (Python 3.8 keeps it relative).
    server = zs.StdioChild([python, "askrich.pyz"], cwd=folder, env=env)
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
    server = zs.StdioChild([python, target], cwd=str(tmp_path), env=env)
    try:
        again, _ = zs.handshake(server)
        assert again == info
        zs.link_interview_round_trip(server, target)
        assert server.close() == 0, "".join(server.stderr)
    finally:
        server.kill()
    _RAN[version] = full_version


# Longer than a checkout server once waited, unspoken to, before it replaced itself with a
# cached .pyc of askrich.py.
IDLE_SECONDS = 2.0


@pytest.mark.parametrize("version,python", _params(), ids=[v for v, _ in _params()])
def test_an_idle_checkout_server_still_runs_askrich_py_and_serves_under(version, python, tmp_path):
    if python is None:
        pytest.skip("python%s not installed under %s" % (version, zs.PYENV_VERSIONS))
    env = zs.child_env(tmp_path)
    module = os.path.join(zs.ROOT, "askrich.py")
    server = zs.StdioChild([python, module], cwd=str(tmp_path), env=env)
    try:
        zs.handshake(server)
        assert server.silent_for(IDLE_SECONDS), server.notifications
        if sys.platform.startswith("linux"):
            with open("/proc/%d/cmdline" % server.proc.pid, "rb") as handle:
                assert handle.read().split(b"\0")[:-1] == [python.encode(), module.encode()]
        assert len(server.result("tools/list")["tools"]) == 3
        zs.link_interview_round_trip(server)  # the form's files, found beside askrich.py
        assert server.close() == 0, "".join(server.stderr)
    finally:
        server.kill()
    assert not os.path.exists(env["XDG_CACHE_HOME"]), "a checkout keeps no compiled code there"


# Standard-library names that appeared after 3.8, which only fail on 3.8 when the line runs.
# The matrix above runs the main paths under 3.8; this catches the rest of the module.
_NEWER_ATTRIBUTES = {
    "removeprefix": "3.9", "removesuffix": "3.9", "is_relative_to": "3.9", "with_stem": "3.9",
    "randbytes": "3.9", "to_thread": "3.9", "bit_count": "3.10", "pairwise": "3.10",
    "aiter": "3.10", "anext": "3.10", "TaskGroup": "3.11", "batched": "3.12",
    "UTC": "3.11 (datetime.UTC; use datetime.timezone.utc)", "StrEnum": "3.11",
    "TypeAlias": "3.10", "ParamSpec": "3.10", "Self": "3.11", "override": "3.12",
    "waitstatus_to_exitcode": "3.9", "process_cpu_count": "3.13",
}
_NEWER_MODULES = {"zoneinfo": "3.9", "graphlib": "3.9", "tomllib": "3.11"}
_NEWER_KEYWORDS = {("zip", "strict"): "3.10", ("dataclass", "slots"): "3.10",
                   ("dataclass", "kw_only"): "3.10"}


def _newer_than_3_8(source, path="<source>"):
    """Problems found in `source`: syntax newer than 3.8 raises SyntaxError, names are listed."""
    import ast
    tree = ast.parse(source, path, feature_version=(3, 8))  # rejects newer syntax
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _NEWER_ATTRIBUTES.get(node.attr):
            problems.append("line %d: .%s is Python %s" % (node.lineno, node.attr, _NEWER_ATTRIBUTES[node.attr]))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                if name.split(".")[0] in _NEWER_MODULES:
                    problems.append("line %d: module %s is Python %s"
                                    % (node.lineno, name, _NEWER_MODULES[name.split(".")[0]]))
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if _NEWER_ATTRIBUTES.get(alias.name):
                        problems.append("line %d: %s.%s is Python %s" % (
                            node.lineno, node.module, alias.name, _NEWER_ATTRIBUTES[alias.name]))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            for keyword in node.keywords:
                version = _NEWER_KEYWORDS.get((name, keyword.arg))
                if version:
                    problems.append("line %d: %s(%s=...) is Python %s" % (node.lineno, name, keyword.arg, version))
            if isinstance(func, ast.Attribute) and func.attr == "cache" and \
                    getattr(func.value, "id", None) == "functools":
                problems.append("line %d: functools.cache is Python 3.9" % node.lineno)
    return problems


def test_module_source_uses_nothing_newer_than_python_3_8():
    path = os.path.join(zs.ROOT, "askrich.py")
    with open(path, "rb") as f:
        problems = _newer_than_3_8(f.read(), path)
    assert not problems, "askrich.py must run on Python 3.8:\n" + "\n".join(problems)


def test_the_3_8_source_check_finds_newer_names_and_syntax():
    sample = ("import zoneinfo\nfrom datetime import UTC\n"
              "x = 'ab'.removeprefix('a')\ny = list(zip([1], [2], strict=True))\n")
    assert len(_newer_than_3_8(sample)) == 4
    with pytest.raises(SyntaxError):
        _newer_than_3_8("match x:\n    case 1:\n        pass\n")
