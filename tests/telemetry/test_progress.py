"""Live progress lines of a headless run (``--llm-progress-interval``), as ``make run`` (scripts/demo.py) shows
them: one line per interval, each figure checked against the run's own summary."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.support import PY, ROOT

pytestmark = pytest.mark.slow

# (a line before any request has finished has no error percentage: "errors 0 |")
LINE = re.compile(
    r"^\[llm\] (\d+)s stage (\S+) \| users (\d+) \| ([\d.]+) req/s \| (\d+) out tok/s \| TTFT p50 (\d+) ms p99 (\d+) ms"
    r" \| ITL p99 (\d+) ms \| errors (\d+)(?: \(([\d.]+)%\))? \| server KV ([\d.]+)% waiting (\d+)$"
)


def test_make_run_prints_a_progress_line_per_interval(tmp_path):
    run = subprocess.run([PY, "-m", "scripts.demo", "--users", "4", "--run-time", "9", "--progress-interval", "2",
                          "--profile", "cpu-tiny", "--out", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    lines = [m for m in map(LINE.match, run.stdout.splitlines()) if m]
    summary = json.loads((tmp_path / "summary.json").read_text())
    # one line per 2 s of the run the users streamed (Locust's -t also counts their start-up: a busy box's 9 s run
    # streamed for 4.7 s), and at least one steady line after the first
    per_interval = int(summary["duration_s"] // 2)
    assert len(lines) >= 2 and per_interval - 1 <= len(lines) <= per_interval + 1, (
        summary["duration_s"], run.stdout[-3000:])
    elapsed = [int(m.group(1)) for m in lines]
    assert elapsed == sorted(elapsed) and all(b - a in (1, 2, 3) for a, b in zip(elapsed, elapsed[1:], strict=False))
    for m in lines:
        assert m.group(2) == "main" and int(m.group(3)) == 4
        assert int(m.group(9)) == 0 and m.group(10) in (None, "0.0")
        assert int(m.group(6)) <= int(m.group(7))
    # the steady lines' rates are those of the whole run (same load throughout): their median within 20 % (a rate
    # over the wrong span, e.g. one interval too many, is off by a third or more), each line within a busy box's noise
    steady = lines[1:]
    rps = summary["requests"]["total"] / summary["duration_s"]
    tok_s = summary["tokens"]["output_per_s"]
    for group, whole in ((4, rps), (5, tok_s)):
        rates = sorted(float(m.group(group)) for m in steady)
        assert 0.8 * whole < rates[len(rates) // 2] < 1.2 * whole, (whole, [m.group(0) for m in steady])
        assert all(0.6 * whole < r < 1.5 * whole for r in rates), (whole, [m.group(0) for m in steady])


def test_no_progress_lines_when_off(tmp_path):
    run = subprocess.run([PY, "-m", "scripts.demo", "--users", "2", "--run-time", "3", "--progress-interval", "0",
                          "--profile", "cpu-tiny", "--out", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "[llm]" not in run.stdout, run.stdout[-2000:]
    assert (tmp_path / "summary.json").exists()
