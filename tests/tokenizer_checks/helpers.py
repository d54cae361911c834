"""Run the tokenizer_checks CLI in-process (fast) and parse its --json output."""

from __future__ import annotations

import json

from tokenizer_checks.cli import main


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1, out  # exactly one JSON object
    return code, json.loads(out[0])
