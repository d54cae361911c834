"""The summary's ``versions`` section from a real Recorder (no network): counts, shares, latency per version."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from telemetry.control.routing import versions_section
from telemetry.measure.recorder import Recorder
from telemetry.measure.view import RunView
from telemetry.slo import SloSet
from users.result import GenerationResult, RequestMeta


def _result(version: str | None, ttft: float, ok: bool = True) -> GenerationResult:
    t0 = 100.0
    times = np.array([t0 + ttft, t0 + ttft + 0.01, t0 + ttft + 0.02])
    return GenerationResult(
        RequestMeta(version=version, user_class="StreamingChatUser", name="chat"), ok=ok,
        error_kind=None if ok else "http_5xx", error_message=None, t0=t0, t_sent=t0, t_end=t0 + ttft + 0.03,
        chunk_times=times if ok else times[:0],
        chunk_tokens=np.ones(3 if ok else 0, dtype=np.int64), output_tokens=3 if ok else 0, prompt_tokens=16,
    )


def _hub(rec: Recorder, route_table: str | None) -> RunView:
    """A run view built by hand: no Environment, no merger."""
    return RunView(merged=rec, slos=SloSet(), options=argparse.Namespace(route_table=route_table), host="",
                   model="", t0_wall=0.0, duration_s=10.0, attribution_window=10.0)


def test_versions_section_counts_shares_and_latency():
    rec = Recorder()
    for _ in range(8):
        rec.record(_result("v1", 0.050))
    rec.record(_result("beta", 0.200))
    rec.record(_result("beta", 0.200, ok=False))
    rec.record(_result(None, 0.010))  # a request without routing is not in any version
    out = versions_section(_hub(rec, "v1=http://a:1@0-79,beta=http://b:2@80-99"))
    assert list(out) == ["v1", "beta"]
    v1, beta = out["v1"], out["beta"]
    assert (v1["requests"], beta["requests"], beta["failed"]) == (8, 2, 1)
    assert v1["share"] == pytest.approx(0.8) and beta["share"] == pytest.approx(0.2)
    assert v1["expected_share"] == pytest.approx(0.8) and beta["base_url"] == "http://b:2"
    assert v1["ttft_ms"]["p50"] == pytest.approx(50, rel=0.03)
    assert beta["ttft_ms"]["p50"] == pytest.approx(200, rel=0.03)
    assert beta["ttft_ms"]["count"] == 1 and v1["output_per_s"] == pytest.approx(2.4)


def test_versions_section_empty_without_routing():
    rec = Recorder()
    rec.record(_result(None, 0.010))
    assert versions_section(_hub(rec, None)) == {}
