"""Wires the attribution into telemetry's summary hooks: the ``attribution`` section and console lines.

    from telemetry.attribution.plugin import install
    install(environment)   # in an init listener, after telemetry's own install
"""

from __future__ import annotations

import sys

from run.context import attach
from run.hooks import SummaryHooks
from telemetry.attribution.bottleneck import verdict
from telemetry.attribution.console import console_lines
from telemetry.attribution.section import AttributionConfig, build
from telemetry.measure.sketch import LogSketch
from telemetry.measure.view import RunView
from telemetry.outputs.summary import q_ms


def section(view: RunView, summary: dict | None = None) -> dict:
    """The ``attribution`` section of the run in ``view``, with the options' rules; ``tail`` and ``bottleneck``
    read the summary's ``server`` and ``traces`` (the joined spans, when ``--otlp-receiver`` got any)."""
    att = build(view, AttributionConfig.from_options(view.options))
    summary = summary or {}
    traces = summary.get("traces") if isinstance(summary.get("traces"), dict) else None
    spans = traces is not None and traces.get("joined", 0) > 0 and traces.get("tail")
    if spans:
        att["tail"] = {"source": "spans", **traces["tail"], "slowest": traces.get("slowest")}
    else:  # the histograms' mean split stays the fallback
        att["tail"] = {"source": "histograms", "statement": att["decomposition"].get("statement")}
    att["bottleneck"] = verdict(summary.get("server"), att.get("batching_failure"), att.get("decomposition"),
                                (traces or {}).get("tail", {}).get("ttft") if spans else None, att.get("imbalance"))
    return att


def print_lines(summary: dict) -> None:
    att = summary.get("attribution")
    if att is not None:
        sys.stdout.write("\n".join(console_lines(att)) + "\n")
        sys.stdout.flush()


def empty(view: RunView) -> dict:
    """The ``attribution`` section until it has run: no spike, no batching failure, empty decomposition."""
    empty_q = q_ms(LogSketch())
    return {
        "window_s": view.attribution_window,
        "spikes": [],
        "batching_failure": {"verdict": False, "flagged_windows": []},
        "decomposition": {
            k: dict(empty_q)
            for k in ("ttft_client_ms", "ttft_server_ms", "queue_ms", "prefill_ms", "decode_itl_server_ms")
        },
    }


def register(hooks: SummaryHooks) -> None:
    hooks.add_section("attribution", section, empty=empty)
    hooks.on_summary(print_lines)


def install(environment) -> SummaryHooks | None:
    """Add the section and the console lines to the run's summary hooks (None without telemetry)."""
    ctx = attach(environment)
    if ctx.telemetry is None:
        return None
    register(ctx.hooks)
    return ctx.hooks
