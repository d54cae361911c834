"""Wires the attribution into telemetry's summary hooks: the ``attribution`` section and console lines.

    from telemetry.attribution.plugin import install
    install(environment)   # in an init listener, after telemetry's own install
"""

from __future__ import annotations

import sys

from telemetry.attribution.console import console_lines
from telemetry.attribution.section import AttributionConfig, build
from telemetry.hooks import SummaryHooks
from telemetry.view import RunView


def section(view: RunView, _summary: dict | None = None) -> dict:
    """The ``attribution`` section of the run in ``view``, with the options' rules."""
    return build(view, AttributionConfig.from_options(view.options))


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
