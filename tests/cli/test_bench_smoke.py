"""The benchmark (tests/bench/run.py) runs in its tiny mode and produces every figure.

No timing is asserted here: this machine is shared and noisy, and the budgets are judged on the
full run's medians (tests/bench/README.md). This test only keeps the benchmark from rotting.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "tests", "bench", "run.py")


def load_bench():
    spec = importlib.util.spec_from_file_location("askrich_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# It loads a 30-question form in Chromium (when installed), as the browser tests do: `-m "not
# browser"` leaves it out with them.
@pytest.mark.browser
def test_tiny_benchmark_produces_every_figure(tmp_path):
    bench = load_bench()
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, BENCH, "--tiny", "--json", str(out)],
        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    report = json.loads(out.read_text())
    expected = {key for key, _, _, _ in bench.FIGURES}
    if not os.path.exists(bench.CHROMIUM) and os.environ.get("ASK_USER_RICH_TESTS_REQUIRE_CHROMIUM") != "1":
        expected -= bench.BROWSER_FIGURES
        assert any("browser figures skipped" in note for note in report["notes"])
    missing = sorted(expected - set(report["figures"]))
    assert not missing, "figures missing from the JSON: %s" % missing
    for key in expected:
        figure = report["figures"][key]
        assert isinstance(figure["median"], float) and figure["runs"] >= 1, (key, figure)
        assert figure["min"] <= figure["median"] <= figure["max"], (key, figure)
    assert report["figures"]["many_lost"]["median"] == 0
    assert report["machine"]["nproc"] and report["machine"]["python"]
    # The table tests/bench/README.md quotes: one row per figure.
    table = proc.stdout.decode()
    for key, label, _, _ in bench.FIGURES:
        if key in expected:
            assert bench.label_of(label, bench.MODES["tiny"]) in table, label


def test_the_permission_hook_benchmark_produces_its_figures(tmp_path):
    """tests/bench/permission.py, once: hook start -> form URL, submit -> output, the idle watch."""
    out = tmp_path / "permission.json"
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tests", "bench", "permission.py"), "--runs", "1", "--idle", "1",
         "--json", str(out)],
        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
    )
    figures = json.loads(out.read_text())
    assert set(figures) == {"floor", "start_to_url", "submit_to_output", "submit_to_exit",
                            "idle_core_percent"}, proc.stderr[-2000:]
    assert all(figure["runs"] >= 1 and figure["min"] <= figure["median"] <= figure["max"] for figure in figures.values())
