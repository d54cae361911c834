"""Every ``bench/`` module runs end to end in a quick mode (tiny windows and sizes): it exits 0 and prints its
figures. The figures are printed for the log, never judged against a stopwatch: on a shared box they say nothing;
``make bench`` on an idle machine is where they mean something (docs/sizing)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support import PY, ROOT

pytestmark = pytest.mark.slow

QUICK = {
    "client_cost": ["--streams", "8", "--window", "2", "--repeat", "1", "--users-only", "--json"],
    "scaling": ["--rounds", "1", "--users", "4", "--warmup", "1", "--window", "2", "--json"],
    "sim_speed": ["--streams", "4", "--duration", "1", "--warmup", "0.2", "--max-tokens", "50"],
    "recorder_memory": ["--tokens", "20000", "--per-request", "64"],
    "long_prompt": ["--lengths", "2048", "--rounds", "1"],
    "many_streams": ["--streams", "300", "--seconds", "6", "--spawn-rate", "300", "--tokens", "5", "--itl-ms", "200",
                     "--json"],
    "master_fanin": ["--workers", "10", "--seconds", "5", "--json"],
}
"""What each module is run with; bench/bare_reader.py and bench/users_only_locustfile.py (--users-only) run inside
client_cost (the full locustfile's client cost is what the e2e timing tests exercise), bench/master_locustfile.py
inside master_fanin."""


def test_every_bench_module_has_a_quick_mode():
    modules = {p.stem for p in (ROOT / "bench").glob("*.py")} - {"__init__", "bare_reader", "users_only_locustfile",
                                                                   "master_locustfile"}
    assert modules == set(QUICK)


@pytest.mark.parametrize("module", sorted(QUICK))
def test_bench_module_runs_in_quick_mode(module):
    run = subprocess.run([PY, "-m", f"bench.{module}", *QUICK[module]], cwd=ROOT, capture_output=True, text=True,
                         timeout=400)
    print(f"\nbench.{module} {' '.join(QUICK[module])}:\n{run.stdout[-3000:]}")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    if "--json" in QUICK[module]:
        figures = json.loads(run.stdout[run.stdout.index("{"):])
        assert figures, run.stdout
        if module == "master_fanin":  # the merged summary is the sum of what the workers shipped
            (row,) = figures["rows"]
            assert row["requests_merged"] == row["requests_shipped"] > 0, row
            assert row["tokens_merged"] == row["tokens_shipped"], row
        elif module == "many_streams":  # correctness only: every request the server took, the client counted
            assert figures["lost"] == 0 and figures["failed"] == 0, figures
            assert figures["requests_client"] == figures["requests_server"] > 0, figures
        elif module == "client_cost":
            assert figures["locustfile"] == "bench/users_only_locustfile.py", figures
            row = figures["8x20"]
            assert row["users"]["tokens_per_s"] > 0 and row["bare reader"]["tokens_per_s"] > 0
        else:
            assert figures["processes_1"]["tokens_per_s"] > 0 and figures["processes_2"]["tokens_per_s"] > 0, figures
    else:
        assert run.stdout.strip(), run.stderr[-2000:]
