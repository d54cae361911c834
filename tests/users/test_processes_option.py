"""``--processes auto``: Locust's own option (it forks the workers) also takes ``auto``, one process per usable core;
Locust's ``-1`` and plain counts keep their meaning; anything else is a one-line refusal."""

from __future__ import annotations

import argparse

import pytest

import deepseek_locust  # noqa: F401  (registers the options on Locust's parser)
from workload.argtypes import processes, usable_cores


def test_auto_is_one_process_per_usable_core(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0, 1, 2})
    assert usable_cores() == 3 and processes("auto") == 3 and processes(" AUTO ") == 3
    assert processes("4") == 4 and processes("-1") == -1  # -1: Locust's own "one per CPU of the machine"
    for bad in ("0", "-2", "two", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="a process count >= 1, -1 or auto"):
            processes(bad)


def test_locusts_parser_takes_auto():
    from locust.argument_parser import get_parser

    parsed = get_parser().parse_args(["-f", "locustfile.py", "--processes", "auto"])
    assert parsed.processes == usable_cores()
    action = next(a for a in get_parser()._actions if a.dest == "processes")
    assert "auto" in action.help and action.type is processes
