"""The soak (scripts/soak.py, ``make soak``): its verdict on synthetic samples, and a short real soak — master + 2
workers against the scripted server with faults, every process sampled — that must pass: one minute sampled every 4 s
in make test (at least 8 samples judged per process after the warm-up), three minutes sampled every 30 s in
make test-long (SOAK_TEST_MINUTES changes it)."""

from __future__ import annotations

import json
import os

import pytest

from scripts.soak import judge, main


def _rows(pid: int, key: str, values: list[float], every: float = 30.0) -> list[dict]:
    base = {"rss_mb": 150.0, "fds": 20, "sockets": 9, "greenlets": 22}
    return [{"t_s": i * every, "role": "worker", "pid": pid, **base, key: v} for i, v in enumerate(values)]


def test_judge_fails_rss_growth_past_20_mb_after_the_warm_up_only():
    # 30 min: the first 5 minutes (t < 300 s) are warm-up, growth there does not count
    flat = _rows(1, "rss_mb", [100.0] * 5 + [150.0] * 55)
    figures, failures = judge(flat, 1800.0)
    assert failures == [] and figures["worker#1"]["rss_growth_mb"] == 0.0
    leak = _rows(2, "rss_mb", [150.0 + 0.5 * i for i in range(60)])  # +0.5 MB per 30 s: t 300 s..1770 s, +24.5 MB
    _, failures = judge(leak, 1800.0)
    assert failures == ["worker#2: RSS grew 24.5 MB after the warm-up (limit 20)"], failures


@pytest.mark.parametrize("key", ["fds", "greenlets", "sockets"])
def test_judge_fails_a_count_that_keeps_growing_not_one_that_wobbles(key):
    grow = _rows(3, key, [20 + i for i in range(60)])
    _, failures = judge(grow, 1800.0)
    assert failures == [f"worker#3: {key} grew from 30 to 79 after the warm-up"], failures
    wobble = _rows(4, key, [20 + (i % 3) for i in range(60)])
    assert judge(wobble, 1800.0)[1] == []


def _soak(tmp_path, minutes: float, sample_s: float) -> dict:
    out = tmp_path / "soak.json"
    rc = main(["--minutes", str(minutes), "--sample-s", str(sample_s), "--out", str(out)])
    report = json.loads(out.read_text())
    assert rc == 0, report["failures"]
    assert report["requests"]["ok"] + report["requests"]["failed"] == report["server"]["requests"] > 100
    assert {name.split("#")[0] for name in report["processes"]} == {"master", "worker"}
    assert len(report["processes"]) == 3
    return report


@pytest.mark.slow
def test_one_minute_soak_passes_judging_8_samples_per_process(tmp_path):
    report = _soak(tmp_path, 1.0, 4.0)
    judged = {name: f["judged"] for name, f in report["processes"].items()}
    assert all(n >= 8 for n in judged.values()), judged


@pytest.mark.slow
@pytest.mark.long
def test_three_minute_soak_passes(tmp_path):
    report = _soak(tmp_path, float(os.environ.get("SOAK_TEST_MINUTES", "3")), 30.0)
    assert all(f["samples"] >= 5 for f in report["processes"].values())
