"""The live detectors' SLO side and their outputs, on a merged store with known timing (the batching side runs
end to end against the simulator in tests/deploy/test_live_detectors.py): the trailing span judges only its own
requests, a flip is logged once, --llm-stop-on names the detector and why, and the exporter's gauges, the summary
section and the LLM tab's cell carry the same state."""

from __future__ import annotations

import logging
import time

from run.hooks import SummaryHooks
from telemetry.control.detectors import LiveDetectors
from telemetry.measure.runstate import RunState
from telemetry.outputs.exporter import llm_registry
from telemetry.outputs.summary import build_summary
from tests.telemetry.helpers import options
from tests.telemetry.synthetic import make_result
from webui.table import detector_text


def _run(**opts):
    """A run that started 20 s ago: TTFT 50 ms in its first 10 s, 500 ms in the last 10 s (one request a second)."""
    o = options(slo_ttft_p99_ms=200.0, slo_error_rate=0.5, attribution_window=2.0, **opts)
    m = RunState()
    m.configure(o)
    m.start_run()
    now = time.perf_counter()
    m.t0_wall -= 20.0
    for k in range(20):
        m.recorder.record(make_result(ttft=0.05 if k < 10 else 0.5, tokens=4, end=now - 19.5 + k))
    m.absorb("local", m.recorder.take())
    return m, o


def test_slo_breach_on_the_trailing_span_flips_once_and_stops(caplog):
    m, o = _run(llm_stop_on="slo")
    det = LiveDetectors()
    with caplog.at_level(logging.WARNING, logger="telemetry.control.detectors"):
        early = det.check(m.view(options=o), until_s=10.0)  # span [4, 10): the fast requests only
        assert early["slo_window_s"] == 6.0  # 3 windows of 2 s
        ttft = {c["name"]: c for c in early["slo"]}["ttft_p99_ms"]
        assert not ttft["breached"] and 49.0 < ttft["value"] < 51.0, ttft
        assert det.stopped_by is None
        late = det.check(m.view(options=o), until_s=20.0)  # span [14, 20): the slow ones
        det.check(m.view(options=o), until_s=20.0)
    checks = {c["name"]: c for c in late["slo"]}
    assert checks["ttft_p99_ms"]["breached"] and 495.0 < checks["ttft_p99_ms"]["value"] < 505.0, checks
    assert checks["error_rate"] == {"name": "error_rate", "threshold": 0.5, "value": 0.0, "breached": False}
    assert late["batching"] == {"judged": False, "degraded": False, "baseline": None, "windows": []}  # no scrapes
    fired = [r.getMessage() for r in caplog.records if "FIRED" in r.getMessage()]
    assert len(fired) == 1 and "slo:ttft_p99_ms" in fired[0] and "vs threshold 200" in fired[0], fired
    assert det.stopped_by["detector"] == "slo:ttft_p99_ms" and det.stopped_by["at_s"] == 20.0
    assert late["stop_on"] == ["slo"]

    m.detectors = late
    view = m.view(options=o)
    reg = llm_registry(lambda: view)
    assert reg.get_sample_value("llm_slo_breached", {"slo": "ttft_p99_ms"}) == 1.0
    assert reg.get_sample_value("llm_slo_breached", {"slo": "error_rate"}) == 0.0
    assert reg.get_sample_value("llm_slo_threshold", {"slo": "ttft_p99_ms"}) == 200.0
    assert reg.get_sample_value("llm_slo_value", {"slo": "ttft_p99_ms"}) == checks["ttft_p99_ms"]["value"]
    assert reg.get_sample_value("llm_batching_degraded") == 0.0
    hooks = SummaryHooks()
    hooks.add_section("detectors", lambda v, _s: v.detectors, empty=lambda _v: None)
    assert build_summary(view, hooks)["detectors"]["stopped_by"]["detector"] == "slo:ttft_p99_ms"
    cell = detector_text(late)
    assert cell.startswith("batching pending · ttft_p99_ms BREACHED 5") and "stopped by slo:ttft_p99_ms" in cell


def test_no_gauges_before_the_first_check_and_no_stop_unless_asked():
    m, o = _run()
    reg = llm_registry(lambda: m.view(options=o))
    assert reg.get_sample_value("llm_batching_degraded") is None  # nothing judged yet: no series, not a 0
    det = LiveDetectors()
    det.check(m.view(options=o), until_s=20.0)
    assert det.stopped_by is None and det.state["stop_on"] == []
    assert det.check(m.view(options=o), until_s=4.0)["slo"] == []  # the span would start before the run
