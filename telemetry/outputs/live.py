"""The live figures of a running test (the web UI's LLM tab, ``/llm/live``): a function of a run view.

Per stage in run order ``{"stage", "requests", "output_tok_s", "server_kv_usage", "client_kv_block_fill"}`` (the
stage's mean scraped server KV usage and client KV block fill, 0..1) plus ``<key>_p50_ms`` / ``<key>_p99_ms`` of each
metric of :data:`LIVE` (``ttft_p50_ms``, ``ttst_p99_ms``...; merged across workers, quantiles from merged
sketches), and for the run ``elapsed_s``, ``reasoned`` (whether any request reasoned,
:func:`telemetry.metrics.reasoned`: the tab says "no reasoning" for the reasoning-only metrics otherwise),
``workers``, ``server_kv_usage`` (the latest scrape), ``client_kv_block_fill`` and
``detectors`` (the live detectors' state, telemetry/control/detectors.py; None before their first check); with
``--route-table`` ``versions`` (each version's backend at its latest scrape: KV usage, running, waiting, scrape
failures) and ``route_fallback`` (the rule and whether it switched, telemetry/control/routing.py; None without one).

    live(environment.llm.telemetry.view())
"""

from __future__ import annotations

import math

from telemetry.measure.recorder import Recorder
from telemetry.measure.view import RunView
from telemetry.metrics import reasoned

LIVE: tuple[str, ...] = ("ttft", "itl", "tpot", "ttst", "ttfa")
"""The per-stage client metrics (registry keys) shown live, in order: here, in the web UI's LLM tab."""


def live(view: RunView) -> dict:
    """Per-stage p50/p99 (ms) of the live metrics, output tok/s, and the latest server KV usage."""
    stages = []
    for st, start, end in view.stage_spans():
        cells = view.merged.select(stage=st.name)
        row: dict = {"stage": st.name, "requests": sum(c.requests for c in cells)}
        for m in LIVE:
            s = Recorder.merged_sketch(cells, m)
            for name, q in (("p50", 0.5), ("p99", 0.99)):
                v = s.quantile(q)
                row[f"{m}_{name}_ms"] = None if v is None else v * 1000.0
        span = end - start
        row["output_tok_s"] = view.delivered_tokens(start, end) / span if span > 0 else None  # as the summary's
        usages = view.server_kv_usages(start, end if end < view.duration_s else math.inf)  # the running one: all
        row["server_kv_usage"] = sum(usages) / len(usages) if usages else None
        row["client_kv_block_fill"] = view.client_kv_fill_of(st.name)
        stages.append(row)
    latest = view.server_latest
    every = view.merged.select()
    return {
        "elapsed_s": view.duration_s,
        "reasoned": reasoned(sum(c.reasoning_tokens for c in every), Recorder.merged_sketch(every, "thinking").count),
        "workers": view.worker_count,
        "stages": stages,
        "server_kv_usage": latest.get("kv_cache_usage") if latest else None,
        "client_kv_block_fill": view.client_kv_fill,
        "detectors": view.detectors,
        "engines": {k: {f: e.get(f) for f in ("target", "engine", "kv_cache_usage", "requests_running",
                                               "requests_waiting")}
                    for k, e in ((latest or {}).get("engines") or {}).items()},
        "versions": {v: _backend(x) for v, x in view.version_servers.items()},
        "route_fallback": {k: (view.route_fallback or {}).get(k) for k in ("rule", "from", "to", "fired",
                           "switched_at_s", "switch_after_breach_s", "error")} if view.route_fallback else None,
    }


def _backend(server: dict) -> dict:
    """One route version's backend as its latest scrape saw it."""
    latest = (server.get("series") or [None])[-1] or {}
    return {"kv_cache_usage": latest.get("kv_cache_usage"), "requests_running": latest.get("requests_running"),
            "requests_waiting": latest.get("requests_waiting"), "scrape_failures": server.get("failures", 0)}
