"""The summary's ``attribution`` section, built from the run's view at the end of a run.

    hooks.add_section("attribution", lambda view, _s: build(view, AttributionConfig.from_options(view.options)))

Keys (docs/summary.schema.json, plus extras): ``window_s``; ``spikes`` (see :mod:`~telemetry.attribution.spikes`);
``batching_failure`` (``verdict``, ``flagged_windows``, and ``baseline`` / ``failed_at_s`` / ``rule``);
``decomposition`` (whole run: Q objects, ``remainder_ms``, ``statement``, and ``stages`` — the same per
stage); ``imbalance`` (the first streak of an engine off the fleet, :mod:`~telemetry.attribution.imbalance`, or
null); extras ``spike_factor`` and ``windows`` (one row per window, client and server side by side,
for the report).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from telemetry.attribution.batching import BatchingRule, detect
from telemetry.attribution.decompose import decompose
from telemetry.attribution.histogram import CumulativeHistogram
from telemetry.attribution.imbalance import ImbalanceRule, first_streak
from telemetry.attribution.options import (
    BATCHING_P99_RISE_DEFAULT,
    BATCHING_SIZE_RATIO_DEFAULT,
    BATCHING_WINDOWS_DEFAULT,
    IMBALANCE_FACTOR_DEFAULT,
    IMBALANCE_WINDOWS_DEFAULT,
    SPIKE_FACTOR_DEFAULT,
)
from telemetry.attribution.source import client_windows, server_deltas, server_samples
from telemetry.attribution.spikes import SpikeRule, find_spikes
from telemetry.attribution.window import Window, align
from telemetry.measure.scraper import role_series
from telemetry.measure.view import RunView
from telemetry.options import ATTRIBUTION_WINDOW_DEFAULT


@dataclass(frozen=True, slots=True)
class AttributionConfig:
    window_s: float = ATTRIBUTION_WINDOW_DEFAULT
    batching: BatchingRule = BatchingRule()
    spikes: SpikeRule = SpikeRule()
    imbalance: ImbalanceRule = ImbalanceRule()

    @classmethod
    def from_options(cls, options) -> AttributionConfig:
        """From Locust's parsed options (absent ones keep the defaults)."""

        def opt(name: str, default):
            v = getattr(options, name, None) if options is not None else None
            return default if v is None else v

        rule = BatchingRule(
            p99_rise=float(opt("batching_p99_rise", BATCHING_P99_RISE_DEFAULT)),
            size_ratio=float(opt("batching_size_ratio", BATCHING_SIZE_RATIO_DEFAULT)),
            consecutive=int(opt("batching_windows", BATCHING_WINDOWS_DEFAULT)),
            baseline_windows=int(opt("batching_windows", BATCHING_WINDOWS_DEFAULT)),
        )
        spikes = SpikeRule(factor=float(opt("spike_factor", SPIKE_FACTOR_DEFAULT)), size_ratio=rule.size_ratio)
        imbalance = ImbalanceRule(factor=float(opt("imbalance_factor", IMBALANCE_FACTOR_DEFAULT)),
                                  consecutive=int(opt("imbalance_windows", IMBALANCE_WINDOWS_DEFAULT)))
        return cls(window_s=float(opt("attribution_window", ATTRIBUTION_WINDOW_DEFAULT)), batching=rule, spikes=spikes,
                   imbalance=imbalance)


def window_rows(windows: list[Window], flagged: set[int]) -> list[dict]:
    """The per-window table of the section (what the report plots). ``server_ms``: the window's share of each
    server histogram (queue, prefill, decode, ttft, itl, e2e) as a Q object with its ``bucket`` edges."""
    rows = []
    for w in windows:
        c = w.client
        rows.append({
            "index": w.index, "start_s": w.start_s, "end_s": w.end_s, "requests": w.requests,
            "request_rate": w.request_rate, "ttft_p50_ms": c.ttft_p50_ms, "ttft_p99_ms": c.ttft_p99_ms,
            "itl_p50_ms": c.itl_p50_ms, "itl_p99_ms": c.itl_p99_ms, "running_median": w.running_median,
            "waiting_max": w.waiting_max, "kv_usage_max": w.kv_usage_max, "preemptions": w.preemptions,
            "server_ms": {name: h.to_q() for name, h in w.server.items() if h.count > 0},
            "batching_flagged": w.index in flagged,
        })
    return rows


def _client_q(cells, metric: str) -> dict:
    from telemetry.measure.recorder import Recorder
    from telemetry.outputs.summary import q_ms

    return q_ms(Recorder.merged_sketch(cells, metric))


def decomposition(view: RunView, samples) -> dict:
    """Whole run and per stage. The whole run keeps warm-up stages on the client side too (unlike the
    summary's headline figures): the server's histograms cover the same span, warm-up included."""
    spans = view.stage_spans()
    cells = list(view.merged.cells.values())
    prefill = server_samples(role_series(view.server_series, "prefill"))
    decode = server_samples(role_series(view.server_series, "decode"))
    pair = bool(prefill and decode)

    def server(start: float, end: float) -> tuple[dict, CumulativeHistogram | None]:
        """The histograms the split reads over [start, end]; with a prefill/decode pair, the first token's path
        (queue, prefill, TTFT) from the prefill side, the KV transfer and decode from the decode side, and the
        decode side's TTFT (its own part of the first token) apart."""
        if not pair:
            return server_deltas(samples, start, end), None
        p, d = server_deltas(prefill, start, end), server_deltas(decode, start, end)
        merged = {k: p[k] for k in ("queue", "prefill", "ttft") if k in p}
        merged.update({k: d[k] for k in ("kv_transfer", "decode", "itl", "e2e") if k in d})
        return merged, d.get("ttft")

    srv, dttft = server(-math.inf, math.inf)
    whole = decompose(_client_q(cells, "ttft"), _client_q(cells, "itl"), srv, _client_q(cells, "prompt_build"),
                      dttft)
    stages = []
    for i, (st, start, end) in enumerate(spans):
        last = i == len(spans) - 1
        st_cells = view.merged.select(stage=st.name)
        srv, dttft = server(start, math.inf if last else end)
        d = decompose(_client_q(st_cells, "ttft"), _client_q(st_cells, "itl"), srv,
                      _client_q(st_cells, "prompt_build"), dttft)
        stages.append({"name": st.name, "warmup": bool(getattr(st, "warmup", False)), "start_s": start, "end_s": end,
                       **d})
    whole["stages"] = stages
    return whole


def build(view: RunView, config: AttributionConfig) -> dict:
    samples = server_samples(view.server_series)
    windows = align(client_windows(view, config.window_s), samples)
    batching = detect(windows, config.batching)
    batching["rule"] = asdict(config.batching)
    spikes = find_spikes(windows, config.spikes, wall_start=view.t0_wall)
    return {
        "window_s": config.window_s,
        "spike_factor": config.spikes.factor,
        "spikes": spikes,
        "batching_failure": batching,
        "decomposition": decomposition(view, samples),
        "imbalance": first_streak(view.server_series, config.window_s, config.imbalance),
        "windows": window_rows(windows, set(batching["flagged_windows"])),
    }
