"""Wires the attribution into telemetry's summary hooks: the ``attribution`` section and console lines.

    from telemetry.attribution.plugin import install
    install(environment)   # in an init listener, after telemetry's own install
"""

from __future__ import annotations

import sys

from telemetry.attribution.bottleneck import verdict
from telemetry.attribution.console import console_lines
from telemetry.attribution.section import AttributionConfig, build
from telemetry.hooks import SummaryHooks
from telemetry.view import RunView


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
                                (traces or {}).get("tail", {}).get("ttft") if spans else None)  # fmt: skip
    return att


def print_lines(summary: dict) -> None:
    att = summary.get("attribution")
    if att is not None:
        sys.stdout.write("\n".join(console_lines(att)) + "\n")
        sys.stdout.flush()


def register(hooks: SummaryHooks) -> None:
    hooks.add_section("attribution", section)
    hooks.on_summary(print_lines)


def install(environment) -> SummaryHooks | None:
    """Add the section and the console lines to ``environment.llm_telemetry``'s hooks (None without telemetry)."""
    hub = getattr(environment, "llm_telemetry", None)
    if hub is None:
        return None
    register(hub.hooks)
    return hub.hooks
