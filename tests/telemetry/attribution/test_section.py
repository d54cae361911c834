"""The attribution section built from a real run view (merged sketches + scraped server samples)."""

from __future__ import annotations

import argparse

import pytest

from telemetry.attribution.console import console_lines
from telemetry.attribution.section import AttributionConfig, build
from tests.telemetry.attribution.hubdata import Spec, merger_from, view_from


def test_batching_collapse_gives_the_verdict_from_hub_data():
    specs = [Spec()] * 4 + [Spec(ttft=1.2, running=1, waiting=15, requests=3)] * 3
    att = build(view_from(specs), AttributionConfig())
    bf = att["batching_failure"]
    assert bf["verdict"] is True
    assert bf["flagged_windows"] == [4, 5, 6]
    assert bf["baseline"]["batch_size_median"] == 16
    assert bf["baseline"]["p99_ms"] == pytest.approx(200, rel=0.02)
    assert [w["batching_flagged"] for w in att["windows"]] == [False] * 4 + [True] * 3
    w5 = att["windows"][5]
    assert w5["running_median"] == 1 and w5["waiting_max"] == 15 and w5["request_rate"] == pytest.approx(0.3)
    assert w5["server_ms"]["ttft"]["count"] == 3 and w5["server_ms"]["ttft"]["bucket"]["p99"] == [1000.0, 2500.0]
    assert w5["server_ms"]["queue"]["mean"] == pytest.approx(20.0)


def test_steady_hub_run_is_negative_and_has_no_spikes():
    att = build(view_from([Spec()] * 8), AttributionConfig())
    assert att["batching_failure"]["verdict"] is False and att["batching_failure"]["flagged_windows"] == []
    assert att["spikes"] == []
    assert len(att["windows"]) == 8


def test_kv_spike_named_from_server_samples():
    specs = [Spec()] * 6
    specs[3] = Spec(ttft=0.8, running=12, waiting=41, kv=0.99, preemptions=12)
    att = build(view_from(specs), AttributionConfig())
    (sp,) = att["spikes"]
    assert (sp["start_s"], sp["end_s"], sp["metric"], sp["category"]) == (30.0, 40.0, "ttft_p99_ms", "preemption")
    assert sp["ratio"] == pytest.approx(4.0, rel=0.02)
    assert "41 waiting, KV 0.99, 12 preemptions" in sp["cause"]
    assert sp["server"]["preemptions"] == 12


def test_decomposition_whole_run_and_per_stage():
    att = build(view_from([Spec(ttft=0.4, queue=0.2, prefill=0.15)] * 3), AttributionConfig())
    d = att["decomposition"]
    assert d["ttft_client_ms"]["count"] == 24
    assert d["ttft_client_ms"]["p50"] == pytest.approx(400, rel=0.01)
    # the server's count is the delta between the first and the last scrape: the first scrape (t=1 s) already
    # holds window 0's 8 requests (hubdata observes a window's requests before its scrapes), so 24 - 8
    assert d["ttft_server_ms"]["count"] == 16
    assert d["ttft_server_ms"]["mean"] == pytest.approx(360)  # 0.9 x the client's 400 ms, from the sums
    assert d["queue_ms"]["mean"] == pytest.approx(200) and d["prefill_ms"]["mean"] == pytest.approx(150)
    assert d["remainder_ms"]["network_client"] == pytest.approx(400 - 360, abs=3)
    assert [st["name"] for st in d["stages"]] == ["main"]
    assert "client TTFT mean 400 ms = server queue 200 + prefill 150" in d["statement"]


def test_options_reach_the_rules_and_console_lines_say_the_verdict():
    specs = [Spec()] * 3 + [Spec(ttft=0.3, running=8, waiting=4)] * 2
    opts = argparse.Namespace(attribution_window=10.0, batching_p99_rise=0.2, batching_size_ratio=0.6,
                              batching_windows=2, spike_factor=1.4)
    att = build(view_from(specs), AttributionConfig.from_options(opts))
    assert att["batching_failure"]["verdict"] is True
    assert att["batching_failure"]["baseline"]["windows"] == [0, 1]
    assert att["spike_factor"] == 1.4
    text = "\n".join(console_lines(att))
    assert "dynamic batching FAILED from t=30s" in text
    assert "first token: client TTFT mean" in text


def test_without_server_metrics():
    merger = merger_from([Spec()] * 4)
    merger.scraper = None
    att = build(merger.view(), AttributionConfig())
    assert att["batching_failure"]["baseline"] is None and att["batching_failure"]["verdict"] is False
    assert att["decomposition"]["ttft_server_ms"] is None
    assert "not judged" in console_lines(att)[0]


def test_console_lists_stages_when_there_are_several():
    att = build(view_from([Spec()] * 3), AttributionConfig())
    d = att["decomposition"]
    d["stages"] = [dict(d["stages"][0], name=f"users={u}") for u in (1, 2)]
    d["stages"].insert(1, dict(d["stages"][0], name="warmup users=2", warmup=True))
    lines = console_lines(att)
    assert [ln.split(":")[0].strip() for ln in lines if ln.startswith("    users=")] == ["users=1", "users=2"]
    single = build(view_from([Spec()] * 3), AttributionConfig())
    assert not any(ln.startswith("    main:") for ln in console_lines(single))
