"""Speculative decoding measured end to end on the simulator: the summary's ``speculative`` section from the
counters and the in-band records, the tail composition from in-band records alone (no ``--otlp-receiver``), and the
compare gate ``--fail-on spec_acceptance_rate=-10%`` catching an acceptance drop (0.8,0.6,0.4 -> 0.3,0.2,0.1)."""

from __future__ import annotations

import json
import subprocess

import pytest

from telemetry.compare import EXIT_BREACH
from tests.support import LOCUST, PY, ROOT, Proc, free_port, wait_http

pytestmark = pytest.mark.slow

SPEC = '{"method":"mtp","num_speculative_tokens":3}'


def _run(tmp_path, name: str, acceptance: str) -> tuple[str, list[dict]]:
    port = free_port()
    summary, log = tmp_path / f"{name}.json", tmp_path / f"{name}.jsonl"
    with Proc([PY, "-m", "server.sim", "--port", str(port), "--profile", "cpu-tiny", "--time-scale", "5",
               "--speculative-config", SPEC, "--spec-acceptance", acceptance, "--enable-per-request-metrics",
               "--per-request-spec-decode-metrics", "summary", "--enable-prompt-tokens-details"], name="sim") as sim:
        wait_http(f"http://127.0.0.1:{port}/health", proc=sim)
        run = Proc([LOCUST, "-f", "locustfile.py", "--headless", "-u", "4", "-r", "4", "-t", "60s", "--host",
                    f"http://127.0.0.1:{port}", "--num-requests", "40", "--input-len", "fixed:64",
                    "--output-len", "fixed:64", "--only-summary", "--prometheus-port", "0",
                    "--server-metrics-interval", "0.5", "--temperature", "0", "--llm-summary-json", str(summary),
                    "--llm-requests-jsonl", str(log), "StreamingChatUser"], name=name)
        assert run.wait(90) == 0, run.output()[-2000:]
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    return str(summary), lines


def test_speculation_is_measured_gated_and_composed_in_band(tmp_path):
    good, lines = _run(tmp_path, "good", "0.8,0.6,0.4")
    s = json.loads(open(good).read())
    spec = s["speculative"]
    accepted = sum(ln["spec_accepted"] for ln in lines)
    drafted = sum(ln["spec_drafted"] for ln in lines)
    # the counters' increase over the run and the in-band sums of our own requests agree (no other traffic)
    assert spec["source"] == "server_counters" and spec["in_band"]["accepted_tokens"] == accepted
    assert spec["counters"]["accepted_tokens"] == accepted and spec["counters"]["draft_tokens"] == drafted
    assert spec["acceptance_rate"] == pytest.approx(accepted / drafted)
    # model: 0.8 + 0.6 + 0.4 accepted of 3 drafted per step = 0.6 (a few hundred steps: loose bound)
    assert 0.5 < spec["acceptance_rate"] < 0.7 and 2.5 < spec["mean_acceptance_length"] < 3.1
    assert spec["acceptance_per_position"][0] > spec["acceptance_per_position"][2]
    assert spec["temperature"] == 0.0 and spec["prompt_source"] == "synthetic-natural" and spec["warning"]
    assert [st["source"] for st in spec["stages"]] == ["server_counters"]
    assert all(ln["server_ttft_ms"] <= ln["ttft_ms"] and ln["cached_tokens"] is not None for ln in lines)
    assert all(sum(ln["chunk_tokens"]) == ln["output_tokens"] for ln in lines)
    t = s["traces"]  # no --otlp-receiver: the join is the in-band records'
    assert t["source"] == "in_band" and t["joined"] == s["requests"]["ok"] == 40 and not t["receiving"]
    assert t["tail"]["ttft"]["requests"] >= 1 and t["server_ttft_over_client"] == 0
    assert {r["source"] for r in t["slowest"]["e2e"]} == {"in_band"}

    bad, _ = _run(tmp_path, "bad", "0.3,0.2,0.1")
    gate = ["--fail-on", "spec_acceptance_rate=-10%"]
    same = subprocess.run([PY, "-m", "telemetry.compare", good, good, *gate], capture_output=True, text=True,
                          cwd=ROOT)
    assert same.returncode == 0, same.stdout + same.stderr
    worse = subprocess.run([PY, "-m", "telemetry.compare", good, bad, *gate], capture_output=True, text=True,
                           cwd=ROOT)
    assert worse.returncode == EXIT_BREACH, worse.stdout + worse.stderr
    assert "FAIL spec_acceptance_rate in run:" in worse.stdout
    print(f"\nsim 0.8,0.6,0.4: acceptance {spec['acceptance_rate']:.3f}, per position "
          f"{[round(x, 3) for x in spec['acceptance_per_position']]}, accepted/drafted {accepted}/{drafted}; "
          f"compare --fail-on against 0.3,0.2,0.1 exit {worse.returncode}, against itself {same.returncode}")
