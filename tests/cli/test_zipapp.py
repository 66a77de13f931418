"""build_zipapp.py and the askrich.pyz it writes: reproducible bytes, --check, layout, running
alone from an empty folder, the exit code, and the per-user code cache of __main__.py."""

import hashlib
import importlib.util
import inspect
import io
import os
import re
import shutil
import stat
import subprocess
import sys
import time
import zipfile

import pytest

from helpers import zipapp_support as zs  # noqa: E402
from helpers.support import askrich  # noqa: E402

SHEBANG = b"#!/usr/bin/env python3\n"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """The frozen copy of the checkout that `pyz` was built from."""
    return zs.shared_tree(tmp_path_factory)


def _printed(stdout, field):
    match = re.search(r"^%s: (.+)$" % field, stdout, re.M)
    assert match, "builder did not print %s:\n%s" % (field, stdout)
    return match.group(1).strip()


def _entries(path):
    with open(path, "rb") as f:
        data = f.read()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return data, archive.infolist(), {i.filename: archive.read(i) for i in archive.infolist()}


def _expected_names(root):
    names = {"__main__.py", "askrich.py"}
    assets = os.path.join(root, "assets")
    for folder, dirs, files in os.walk(assets):
        rel = os.path.relpath(folder, assets)
        dirs[:] = [d for d in dirs if not (rel == "." and d == "screenshots")
                   and d != "__pycache__" and not d.startswith(".")]
        for name in files:
            if name.startswith(".") or name.endswith(".pyc"):
                continue
            names.add("assets/" + os.path.relpath(os.path.join(folder, name), assets).replace(os.sep, "/"))
    return names


# --- the build -------------------------------------------------------------------------------

def test_the_checkout_builds_an_archive_that_runs(tmp_path):
    proc = zs.build_ok(tmp_path / "checkout.pyz")  # the builder runs it once and says so
    assert _printed(proc.stdout, "ran").startswith("ask-user-rich ")


def test_two_builds_give_identical_bytes_and_the_printed_size_and_sha256(tmp_path, tree):
    env = dict(os.environ)
    env.pop("SOURCE_DATE_EPOCH", None)
    first = zs.build_ok(tmp_path / "one.pyz", root=tree, env=env)
    time.sleep(2.1)  # past the 2-second step of zip times: a build that stamped "now" would differ
    zs.build_ok(tmp_path / "two.pyz", root=tree, env=env)
    one = (tmp_path / "one.pyz").read_bytes()
    two = (tmp_path / "two.pyz").read_bytes()
    assert one == two
    assert _printed(first.stdout, "sha256") == hashlib.sha256(one).hexdigest()
    assert _printed(first.stdout, "size") == "%d bytes" % len(one)
    assert _printed(first.stdout, "path") == str(tmp_path / "one.pyz")
    assert _printed(first.stdout, "ran").startswith("ask-user-rich ")


def test_builds_by_the_oldest_and_newest_interpreter_are_identical(tmp_path, tree, pyz):
    found = [p for p in (zs.interpreter(v) for v in zs.SUPPORTED) if p]
    if len(found) < 2:
        pytest.skip("needs two of the pyenv interpreters %s" % zs.SUPPORTED)
    env = dict(os.environ)
    env.pop("SOURCE_DATE_EPOCH", None)
    for python in (found[0], found[-1]):
        out = tmp_path / (os.path.basename(python) + ".pyz")
        zs.build_ok(out, root=tree, env=env, python=python, args=["--no-run"])
        assert out.read_bytes() == open(pyz, "rb").read(), python


def test_archive_is_a_shebang_then_sorted_plain_files_with_fixed_metadata(pyz, tree):
    data, infos, contents = _entries(pyz)
    assert data.startswith(SHEBANG)
    names = [i.filename for i in infos]
    assert names == sorted(names)
    assert set(names) == _expected_names(tree)
    assert not any(n.endswith("/") for n in names), "directory entries"
    assert not any(n.startswith("assets/screenshots/") for n in names)
    for info in infos:
        assert info.date_time == (1980, 1, 1, 0, 0, 0), info
        assert info.external_attr >> 16 == 0o100644, (info.filename, oct(info.external_attr >> 16))
        assert info.create_system == 3
        assert info.compress_type == zipfile.ZIP_DEFLATED
        assert info.extra == b"" and info.comment == b""
    with open(os.path.join(tree, "askrich.py"), "rb") as f:
        assert contents["askrich.py"] == f.read()
    assert b"askrich" in contents["__main__.py"]
    assert os.stat(pyz).st_mode & 0o111, "the archive is not executable"


def test_the_entry_point_is_the_builders_functions_and_askrichs_names_spelled_once(pyz, tree):
    builder = _load_builder(tree)
    main_text = _entries(pyz)[2]["__main__.py"].decode("utf-8")
    for function in builder.ENTRY_POINT:
        assert inspect.getsource(function).rstrip("\n") in main_text, function.__name__
    askrich_text = open(os.path.join(tree, "askrich.py"), encoding="utf-8").read()
    # The code cache is the entry point's alone: askrich.py, which never uses it, does not carry it.
    for name in ("code_cache_dir", "own_folder", "store_code"):
        assert "\ndef %s(" % name in main_text and "\ndef %s(" % name not in askrich_text, name
    # Every variable name comes from askrich.py's constants: one assignment each, no other spelling.
    spelled = re.findall(r"ASK_USER_RICH_[A-Z_]+", main_text)
    assert sorted(spelled) == ["ASK_USER_RICH_CODE_CACHE", "ASK_USER_RICH_RESTARTED"], spelled
    for constant in builder.SHARED_CONSTANTS:
        assert re.search(r"^%s = \"ASK_USER_RICH_\w+\"" % constant, askrich_text, re.M), constant
        assert re.search(r"^%s = " % constant, main_text, re.M), constant
    assert "ASK_USER_RICH_" not in open(os.path.join(tree, "build_zipapp.py"), encoding="utf-8").read()
    assert main_text.rstrip().endswith("sys.exit(run_archive(__loader__))")


def test_a_build_from_an_askrich_py_without_a_shared_name_says_which(tmp_path):
    tree = zs.copy_tree(str(tmp_path / "tree"))
    path = os.path.join(tree, "askrich.py")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text.replace("\nENV_RESTARTED = ", "\nENV_STARTED_OVER = "))
    proc = zs.build(tmp_path / "x.pyz", root=tree, args=["--no-run"])
    assert proc.returncode != 0 and not (tmp_path / "x.pyz").exists()
    assert "ENV_RESTARTED" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def _load_builder(tree):
    """The build_zipapp module of `tree`, loaded under a name of its own (and sys.path as it was)."""
    spec = importlib.util.spec_from_file_location("tree_build_zipapp", os.path.join(tree, "build_zipapp.py"))
    module = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path
    return module


def test_archive_is_small(pyz):
    # 376 KiB for the whole product: the server, the form and the inbox page, eleven languages,
    # the vendored marked, DOMPurify and QR code library. It was 200 KiB before the inbox and the
    # durability work, under 256 KiB before the front door, the notices, the MCP App's transport
    # and the AskUserQuestion hook (306 KB together), under 320 KiB before the permission hook
    # (15 KB, its words in eleven languages included), under 344 KiB before the away policy
    # and the history (17 KB, their words in eleven languages included), and under 368 KiB
    # before rankings and option texts in a host's elicitation dialog (1.7 KB; the translations
    # shipped without indentation gave 0.8 KB back), under 372 KiB before the door passed pages'
    # connections to their owners (3.5 KB); the budget moved with them, and still catches
    # anything that lands in the archive by mistake (a screenshot is 40-200 KB).
    size = os.path.getsize(pyz)
    assert size < 376 * 1024, "askrich.pyz is %d bytes" % size


def test_source_date_epoch_sets_every_timestamp_and_nothing_else(tmp_path, tree, pyz):
    env = dict(os.environ, SOURCE_DATE_EPOCH="1764460800")  # 2025-11-30 00:00:00 UTC
    zs.build_ok(tmp_path / "dated.pyz", root=tree, env=env, args=["--no-run"])
    _, infos, contents = _entries(str(tmp_path / "dated.pyz"))
    assert {i.date_time for i in infos} == {(2025, 11, 30, 0, 0, 0)}
    assert contents == _entries(pyz)[2]
    again = zs.build(None, root=tree, env=env, args=["--check", str(tmp_path / "dated.pyz")])
    assert again.returncode == 0, again.stdout + again.stderr
    undated = dict(os.environ)
    undated.pop("SOURCE_DATE_EPOCH", None)
    other = zs.build(None, root=tree, env=undated, args=["--check", str(tmp_path / "dated.pyz")])
    assert other.returncode == 1
    assert "every entry: date_time is (2025, 11, 30, 0, 0, 0)" in other.stdout, other.stdout


def test_tree_junk_and_screenshots_stay_out_of_the_archive(tmp_path):
    tree = zs.copy_tree(str(tmp_path / "tree"))
    junk = {
        "assets/screenshots/form.png": b"png",
        "assets/__pycache__/x.cpython-311.pyc": b"pyc",
        "assets/.DS_Store": b"mac",
        "assets/extra/readme.txt": b"a nested asset ships",
    }
    for name, data in junk.items():
        path = os.path.join(tree, *name.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    zs.build_ok(tmp_path / "t.pyz", root=tree, args=["--no-run"])
    names = {i.filename for i in _entries(str(tmp_path / "t.pyz"))[1]}
    assert "assets/extra/readme.txt" in names
    assert not names & {"assets/screenshots/form.png", "assets/__pycache__/x.cpython-311.pyc",
                        "assets/.DS_Store"}
    assert names == _expected_names(tree)


# --- --check ----------------------------------------------------------------------------------

def test_check_accepts_the_archive_this_tree_builds(pyz, tree):
    proc = zs.build(None, root=tree, args=["--check", pyz])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("OK ")


def test_check_rejects_an_archive_with_a_changed_file_and_names_it(tmp_path, pyz, tree):
    tampered = tmp_path / "tampered.pyz"
    with zipfile.ZipFile(pyz) as src:
        items = [(i, src.read(i)) for i in src.infolist()]
    with open(tampered, "wb") as f:
        f.write(SHEBANG)
        with zipfile.ZipFile(f, "w") as out:
            for info, data in items:
                if info.filename == "askrich.py":
                    data += b"\n# an extra line\n"
                out.writestr(info, data)
    proc = zs.build(None, root=tree, args=["--check", str(tampered)])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "MISMATCH" in proc.stdout and "askrich.py: content differs" in proc.stdout


def test_check_rejects_an_archive_built_from_another_tree(tmp_path, pyz):
    tree = zs.copy_tree(str(tmp_path / "tree"))
    with open(os.path.join(tree, "assets", "added.txt"), "w") as f:
        f.write("new\n")
    proc = zs.build(None, root=tree, args=["--check", pyz])
    assert proc.returncode == 1
    assert "missing entry assets/added.txt" in proc.stdout


def test_check_of_a_missing_file_is_a_usage_error(tmp_path):
    proc = zs.build(None, args=["--check", str(tmp_path / "nope.pyz")])
    assert proc.returncode == 2


# --- running the archive alone ------------------------------------------------------------

_VERSION = []


def _version():
    """What `askrich.py --version` prints in the tree the shared archive was built from."""
    if not _VERSION:
        source = os.path.join(zs.shared_tree(None), "askrich.py")  # made by the `pyz` fixture
        proc = subprocess.run([sys.executable, source, "--version"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=zs.RUN_TIMEOUT, env=zs.child_env("/nonexistent"))
        assert proc.returncode == 0, proc.stderr
        _VERSION.append(proc.stdout.strip())
    return _VERSION[0]


@pytest.mark.parametrize("how", ["python3 askrich.pyz", "./askrich.pyz"])
def test_archive_copied_alone_into_an_empty_folder_runs(tmp_path, pyz, how):
    if how.startswith("python3") and not shutil.which("python3"):
        pytest.skip("no python3 on PATH")
    target = zs.lone_copy(pyz, str(tmp_path / "empty"))
    cmd = how.split()
    env = zs.child_env(tmp_path)
    version = zs.run(cmd + ["--version"], cwd=os.path.dirname(target), env=env)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == _version()
    server = zs.StdioChild(cmd, cwd=os.path.dirname(target), env=env)
    try:
        info, _ = zs.handshake(server)
        assert "ask-user-rich %s" % info["version"] == _version()
        assert server.close() == 0
    finally:
        server.kill()


def test_exit_code_of_main_is_the_exit_code_of_the_archive(tmp_path, pyz):
    target = zs.lone_copy(pyz, str(tmp_path / "empty"))
    env = zs.child_env(tmp_path)
    for attempt in ("cold cache", "warm cache"):
        proc = zs.run([sys.executable, target, "--no-such-option"], cwd=tmp_path, env=env)
        assert proc.returncode == 2, (attempt, proc.stdout, proc.stderr)


# --- the code cache --------------------------------------------------------------------------

def _cache_files(tmp_path):
    folder = tmp_path / "cache" / "ask-user-rich"
    return sorted(folder.glob("askrich-*.pyc")) if folder.is_dir() else []


def test_code_cache_is_written_once_per_interpreter_then_reused(tmp_path, pyz):
    target = zs.lone_copy(pyz, str(tmp_path / "empty"))
    env = zs.child_env(tmp_path)
    assert zs.run([sys.executable, target, "--version"], cwd=tmp_path, env=env).returncode == 0
    files = _cache_files(tmp_path)
    tag = sys.implementation.cache_tag
    assert len(files) == 1 and files[0].name.startswith("askrich-%s-o0-" % tag), files
    before = files[0].stat()
    assert stat.S_IMODE(before.st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "cache" / "ask-user-rich").stat().st_mode) == 0o700
    proc = zs.run([sys.executable, target, "--version"], cwd=tmp_path, env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == _version()
    after = _cache_files(tmp_path)[0].stat()
    # A miss would have compiled and replaced the file (a new inode).
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_the_cached_code_holds_no_docstrings_every_server_would_keep_all_day(tmp_path, pyz):
    """The cache is compiled without docstrings (nothing reads them at run time, and askrich.py
    has no assert to lose): some 100 KB less in every idle server (tests/bench, ".pyz: idle
    VmRSS after initialize", 16 MB)."""
    import marshal

    target = zs.lone_copy(pyz, str(tmp_path / "empty"))
    assert zs.run([sys.executable, target, "--version"], cwd=tmp_path, env=zs.child_env(tmp_path)).returncode == 0
    [cached] = _cache_files(tmp_path)
    blob = cached.read_bytes()
    code = marshal.loads(blob[blob.index(b"\n", 4) + 1:])  # after the magic number and the key

    def strings(code):
        for const in code.co_consts:
            if isinstance(const, str):
                yield const
            elif hasattr(const, "co_consts"):
                yield from strings(const)

    held = set(strings(code))
    assert askrich.InboxRegistry.write.__doc__ not in held and askrich.stop_serving.__doc__ not in held
    assert askrich.NOT_FOUND_TEXT in held  # the strings the program uses are all there


def test_a_rebuilt_archive_at_the_same_path_never_runs_the_old_cached_code(tmp_path):
    tree = zs.copy_tree(str(tmp_path / "tree"))
    main_py = os.path.join(tree, "askrich.py")
    with open(main_py, "rb") as f:
        original = f.read()
    target = str(tmp_path / "run" / "askrich.pyz")
    env = zs.child_env(tmp_path)
    seen = []
    for marker in ("BUILD-A", "BUILD-B", "BUILD-A"):
        with open(main_py, "wb") as f:
            f.write(original + b"\nimport sys as _zt_sys\n_zt_sys.stderr.write('%s\\n')\n"
                    % marker.encode())
        zs.build_ok(target, root=tree, args=["--no-run"])
        proc = zs.run([sys.executable, target, "--version"], cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr
        seen.append([m for m in ("BUILD-A", "BUILD-B") if m in proc.stderr])
    assert seen == [["BUILD-A"], ["BUILD-B"], ["BUILD-A"]]
    assert len(_cache_files(tmp_path)) == 2


def test_a_corrupt_cache_file_is_ignored_and_replaced(tmp_path, pyz):
    target = zs.lone_copy(pyz, str(tmp_path / "empty"))
    env = zs.child_env(tmp_path)
    zs.run([sys.executable, target, "--version"], cwd=tmp_path, env=env)
    [cached] = _cache_files(tmp_path)
    good = cached.read_bytes()
    cached.write_bytes(good[:len(good) // 2])
    proc = zs.run([sys.executable, target, "--version"], cwd=tmp_path, env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == _version(), proc.stderr
    assert "Traceback" not in proc.stderr
    assert cached.read_bytes() == good


def test_an_unusable_cache_folder_falls_back_silently(tmp_path, pyz):
    target = zs.lone_copy(pyz, str(tmp_path / "empty"))
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    env = zs.child_env(tmp_path, XDG_CACHE_HOME=str(blocker))
    proc = zs.run([sys.executable, target, "--version"], cwd=tmp_path, env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == _version()
    assert proc.stderr == ""


def test_a_cache_folder_others_can_write_is_not_trusted(tmp_path, pyz):
    if os.name != "posix":
        pytest.skip("POSIX permissions")
    target = zs.lone_copy(pyz, str(tmp_path / "empty"))
    folder = tmp_path / "cache" / "ask-user-rich"
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    env = zs.child_env(tmp_path)
    proc = zs.run([sys.executable, target, "--version"], cwd=tmp_path, env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == _version()
    assert _cache_files(tmp_path) == []


def test_without_a_home_folder_nothing_is_cached_in_the_working_folder(tmp_path, pyz):
    target = zs.lone_copy(pyz, str(tmp_path / "empty"))
    env = zs.child_env(tmp_path)
    del env["XDG_CACHE_HOME"]
    env["HOME"] = "relative-home"  # the cache path would be relative to the working folder
    work = tmp_path / "work"
    work.mkdir()
    proc = zs.run([sys.executable, target, "--version"], cwd=work, env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == _version(), proc.stderr
    assert os.listdir(str(work)) == []


# --- the same code cache, wherever the archive is ------------------------------------------

def _serve_an_interview_from(python, target, env):
    """Run the archive at `target` as a stdio server started from its own folder by a relative
    path, answer a link interview through its form, and check that the page and every asset it
    references are served, each byte for byte the copy inside `target`."""
    server = zs.StdioChild([python, os.path.basename(target)], cwd=os.path.dirname(target), env=env)
    try:
        zs.handshake(server)
        served = zs.link_interview_round_trip(server, target)
        assert server.close() == 0, "".join(server.stderr)
    finally:
        server.kill()
    assert any(path.endswith(".js") for path in served) and any(path.endswith(".css") for path in served), served
    return served


def _cache_stamps(tmp_path):
    """Which compiled-code files the private cache holds, and which write of each."""
    return {path.name: (path.stat().st_ino, path.stat().st_mtime_ns) for path in _cache_files(tmp_path)}


_EDGE_PYTHONS = zs.oldest_and_newest()


@pytest.mark.parametrize("version,python", _EDGE_PYTHONS, ids=[v for v, _ in _EDGE_PYTHONS])
def test_an_archive_moved_after_its_first_run_serves_its_form_from_the_new_folder(tmp_path, pyz, version, python):
    env = zs.child_env(tmp_path)
    first = zs.lone_copy(pyz, str(tmp_path / "a"))
    _serve_an_interview_from(python, first, env)
    cached = _cache_stamps(tmp_path)
    assert len(cached) == 1, cached
    shutil.rmtree(str(tmp_path / "a"))
    moved = zs.lone_copy(pyz, str(tmp_path / "b"))
    _serve_an_interview_from(python, moved, env)
    assert _cache_stamps(tmp_path) == cached  # the same bytes ran from the cache, not recompiled


@pytest.mark.parametrize("version,python", _EDGE_PYTHONS, ids=[v for v, _ in _EDGE_PYTHONS])
def test_two_copies_in_two_folders_used_in_turn_each_serve_their_own_form(tmp_path, pyz, version, python):
    env = zs.child_env(tmp_path)
    copies = [zs.lone_copy(pyz, str(tmp_path / name)) for name in ("plugin", "downloads")]
    cached = None
    for target in copies + copies:
        _serve_an_interview_from(python, target, env)
        cached = cached or _cache_stamps(tmp_path)
        assert _cache_stamps(tmp_path) == cached and len(cached) == 1, cached


@pytest.mark.parametrize("version,python", _EDGE_PYTHONS, ids=[v for v, _ in _EDGE_PYTHONS])
def test_an_updated_archive_in_the_same_folder_serves_its_own_form(tmp_path, pyz, version, python):
    tree = zs.copy_tree(str(tmp_path / "tree"))
    with open(os.path.join(tree, "assets", "form.css"), "ab") as handle:
        handle.write(b"\n/* the next release */\n")
    updated = str(tmp_path / "updated.pyz")
    zs.build_ok(updated, root=tree, args=["--no-run"])
    with zipfile.ZipFile(pyz) as old, zipfile.ZipFile(updated) as new:
        assert old.read("assets/form.css") != new.read("assets/form.css")
    env = zs.child_env(tmp_path)
    target = zs.lone_copy(pyz, str(tmp_path / "install"))
    for release in (updated, pyz, updated):  # an update, a downgrade, the update again
        shutil.copyfile(release, target + ".new")
        os.replace(target + ".new", target)
        _serve_an_interview_from(python, target, env)
    assert len(_cache_files(tmp_path)) == 2


@pytest.mark.skipif(os.name != "posix", reason="a file held open cannot be replaced on Windows")
@pytest.mark.parametrize("version,python", _EDGE_PYTHONS, ids=[v for v, _ in _EDGE_PYTHONS])
def test_a_running_server_keeps_serving_its_own_form_when_its_archive_is_replaced_or_moved(
        tmp_path, pyz, version, python):
    tree = zs.copy_tree(str(tmp_path / "tree"))
    for name in ("form.css", "js/main.js"):
        with open(os.path.join(tree, "assets", *name.split("/")), "ab") as handle:
            handle.write(b"\n/* the next release, a little longer */\n" * 40)
    updated = str(tmp_path / "updated.pyz")
    zs.build_ok(updated, root=tree, args=["--no-run"])
    env = zs.child_env(tmp_path)

    def install_over(target):  # a new release renamed over the running one
        shutil.copyfile(updated, target + ".new")
        os.replace(target + ".new", target)
        return pyz

    def move_away(target):
        os.rename(target, target + ".moved")
        return pyz

    def rewrite_in_place(target):  # the running release's bytes are gone for good
        with open(updated, "rb") as new, open(target, "r+b") as old:
            old.write(new.read())
            old.truncate()
        return updated

    for change in (install_over, move_away, rewrite_in_place):
        target = zs.lone_copy(pyz, str(tmp_path / change.__name__))
        server = zs.StdioChild([python, target], cwd=str(tmp_path), env=env)
        try:
            zs.handshake(server)
            url = zs.tool_call(server, "ask_user_rich", zs.INTERVIEW)["url"]
            zs.check_page_and_assets(url, change(target))  # every file whole, and from that archive
            assert server.close() == 0, "".join(server.stderr)
        finally:
            server.kill()


@pytest.mark.skipif(os.name != "posix", reason="a file held open cannot be replaced on Windows")
def test_an_archive_cut_short_under_a_running_server_gets_404s_and_the_server_serves_on(tmp_path, pyz):
    target = zs.lone_copy(pyz, str(tmp_path / "install"))
    server = zs.StdioChild([sys.executable, target], cwd=str(tmp_path), env=zs.child_env(tmp_path))
    try:
        zs.handshake(server)
        url = zs.tool_call(server, "ask_user_rich", zs.INTERVIEW)["url"]
        with open(target, "r+b") as handle:  # a download over it, stopped half-way
            handle.truncate(os.path.getsize(target) // 2)
        base = url.split("/s/")[0]
        for address in (url, base + "/assets/form.css", base + "/assets/js/main.js"):
            response = zs.http_request(address, timeout=zs.HTTP_TIMEOUT)
            status, body = response.status, response.body
            assert (status, body) == (404, b'{"error": "not found", "code": "not-found"}'), (address, status, body[:200])
        assert zs.tool_call(server, "ask_user_rich", zs.INTERVIEW)["status"] == "awaiting"
        assert server.close() == 0, "".join(server.stderr)
    finally:
        server.kill()


def test_code_from_the_cache_names_the_copy_that_runs_it_in_tracebacks(tmp_path, pyz):
    env = zs.child_env(tmp_path)
    first = zs.lone_copy(pyz, str(tmp_path / "a"))
    assert zs.run([sys.executable, first, "--version"], cwd=tmp_path, env=env).returncode == 0
    cached = _cache_stamps(tmp_path)
    other = zs.lone_copy(pyz, str(tmp_path / "b"))
    probe = (
        "import runpy, sys\n"
        "sys.argv = [%r, '--version']\n"
        "try:\n"
        "    runpy.run_path(%r, run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "m = sys.modules['askrich']\n"
        "print(m.read_asset.__code__.co_filename)\n"
        "print(m.Config.__init__.__code__.co_filename)\n" % (other, other))
    proc = zs.run([sys.executable, "-c", probe], cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-2:] == [os.path.join(other, "askrich.py")] * 2, proc.stdout
    assert _cache_stamps(tmp_path) == cached


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_cold_stdio_server_starts_over_from_the_cache_it_wrote_once(tmp_path, pyz):
    """A first start compiles, which leaves memory the allocator keeps while the server idles;
    so the server starts over in place from the fresh cache (seen in the environment the kernel
    keeps for the process), and a warm start does not."""
    target = zs.lone_copy(pyz, str(tmp_path / "empty"))
    env = zs.child_env(tmp_path)
    for attempt, restarted in (("cold", True), ("warm", False)):
        server = zs.StdioChild([sys.executable, target], cwd=str(tmp_path), env=env)
        try:
            zs.handshake(server)
            with open("/proc/%d/environ" % server.proc.pid, "rb") as handle:
                environ = handle.read().split(b"\0")
            assert (b"ASK_USER_RICH_RESTARTED=1" in environ) is restarted, attempt
            zs.link_interview_round_trip(server, target)
            assert server.close() == 0, "".join(server.stderr)
        finally:
            server.kill()
    assert len(_cache_files(tmp_path)) == 1


def test_isolated_mode_without_site_runs_the_archive_cold_and_warm(tmp_path, pyz):
    target = zs.lone_copy(pyz, str(tmp_path / "empty"))
    env = zs.child_env(tmp_path)
    for attempt in ("cold", "warm"):
        proc = zs.run([sys.executable, "-I", "-S", target, "--version"], cwd=tmp_path, env=env)
        assert proc.returncode == 0 and proc.stdout.strip() == _version(), (attempt, proc.stderr)
    assert len(_cache_files(tmp_path)) == 1


def test_simultaneous_cold_starts_all_run_and_leave_one_cache_file(tmp_path, pyz):
    target = zs.lone_copy(pyz, str(tmp_path / "empty"))
    env = zs.child_env(tmp_path)
    procs = [subprocess.Popen([sys.executable, target, "--version"], cwd=str(tmp_path), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
             for _ in range(6)]
    try:
        outputs = [p.communicate(timeout=zs.RUN_TIMEOUT) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0] * 6, outputs
    assert {out.strip() for out, _ in outputs} == {_version()}
    folder = tmp_path / "cache" / "ask-user-rich"
    assert [f.name for f in folder.iterdir()] == [_cache_files(tmp_path)[0].name]  # no temp files


def test_code_cache_can_be_turned_off(tmp_path, pyz):
    target = zs.lone_copy(pyz, str(tmp_path / "empty"))
    env = zs.child_env(tmp_path, ASK_USER_RICH_CODE_CACHE="0")
    proc = zs.run([sys.executable, target, "--version"], cwd=tmp_path, env=env)
    assert proc.returncode == 0
    assert not (tmp_path / "cache").exists()


def test_cached_module_reads_its_assets_like_the_imported_one(tmp_path, pyz):
    """Cached or not, askrich gets an absolute __file__ and a loader that reads the archive by it,
    even when the archive was started by a relative path (Python 3.8 keeps those relative)."""
    target = zs.lone_copy(pyz, str(tmp_path / "empty"))
    env = zs.child_env(tmp_path)
    probe = (
        "import runpy, sys, os\n"
        "sys.argv = ['askrich.pyz', '--version']\n"
        "try:\n"
        "    runpy.run_path('askrich.pyz', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "m = sys.modules['askrich']\n"
        "print(m.__file__)\n"
        "print(len(m.__loader__.get_data(os.path.join(os.path.dirname(m.__file__), 'askrich.py'))))\n"
    )
    for attempt in ("cold", "warm"):
        proc = zs.run([sys.executable, "-c", probe], cwd=os.path.dirname(target), env=env)
        assert proc.returncode == 0, (attempt, proc.stderr)
        lines = proc.stdout.strip().splitlines()
        assert lines[-2] == os.path.join(target, "askrich.py"), (attempt, lines)
        assert int(lines[-1]) == len(_entries(pyz)[2]["askrich.py"])
