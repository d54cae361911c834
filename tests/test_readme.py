"""The README is what users read: its quick start and its options table must match the code."""

from __future__ import annotations

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
