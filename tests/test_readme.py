"""The README is what users read: its quick start and its options table must match the code."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.support import PY, ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_quick_start_has_exactly_the_two_commands():
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = quick.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make run", "make test"]


@pytest.mark.slow
def test_options_table_lists_every_registered_option():
    # A separate process: importing locustfile.py registers a global parser listener.
    table = subprocess.run(
        [PY, "-m", "scripts.options_table"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    ).stdout
    rows = [line for line in table.splitlines() if line.startswith("| `--")]
    assert len(rows) >= 35, table  # the founding options and more
    missing = [row.split("`")[1] for row in rows if row not in README]
    assert not missing, f"README options table is stale for {missing}; regenerate with python -m scripts.options_table"


SAMPLE_MARK = "`make run` ends with the token-level summary"


def readme_sample() -> list[str]:
    """The console summary the README shows (the code block after SAMPLE_MARK)."""
    after = README.split(SAMPLE_MARK, 1)[1]
    return after.split("```\n", 1)[1].split("```", 1)[0].splitlines()


def row_kinds(lines: list[str]) -> list[str]:
    """What each line of the console summary is, numbers left out: the metric rows by name, the header's columns,
    the other lines by what precedes their first colon (digits as #). Locust's log lines, the spike details and
    the spike count line (they depend on the run's data) are left out."""
    kinds, in_table = [], False
    for line in lines:
        if not line.strip() or line.startswith("[") or "latency spike" in line or line.startswith("    "):
            continue
        if line.startswith("metric (ms)"):
            kinds.append("header: " + " ".join(line.split()))
            in_table = True
        elif in_table and re.match(r"^.{14}\s*\d+(\s+(-|[\d.]+)){5}$", line):
            kinds.append("row: " + line[:14].strip())
        else:
            in_table = False
            kinds.append(re.sub(r"\d+(\.\d+)?", "#", line.split(":", 1)[0]).rstrip())
    return kinds


def test_row_kinds_ignore_numbers_and_log_lines():
    lines = ["LLM summary: 1.0 s, ...", "metric (ms)   count   p50",
             "TTFT                400     102.8     202.9     687.3     142.8     767.2",
             "thinking span         0         -         -         -         -         -",
             "[2026-12-03 16:44:16] vm/WARNING/x: y", "tokens: output 1", "attribution (10 s windows): ok",
             "  2 latency spike(s) over 2× the median window p99:", "    TTFT p99 3.6× at ...", "  bottleneck: none"]
    assert row_kinds(lines) == ["LLM summary", "header: metric (ms) count p50", "row: TTFT", "row: thinking span",
                                "tokens", "attribution (# s windows)", "  bottleneck"]


@pytest.mark.slow
def test_readme_sample_has_the_rows_make_run_prints(tmp_path):
    """The README's sample output against a short `make run` (the demo: simulator + headless streaming test): the
    same lines and table rows in the same order (the numbers differ from run to run)."""
    run = subprocess.run([PY, "-m", "scripts.demo", "--users", "4", "--run-time", "8", "--out", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    printed = run.stdout.split("LLM summary:", 1)[1]
    printed = ("LLM summary:" + printed).split("\nType     Name", 1)[0].splitlines()  # Locust's own table follows
    assert row_kinds(readme_sample()) == row_kinds(printed), "regenerate the README's sample from a `make run`"
