"""Wires the attribution into the telemetry hub: the ``attribution`` summary section and console lines.

    from telemetry.attribution.plugin import install
    install(environment)   # in an init listener, after telemetry's own install
"""

from __future__ import annotations

import sys

from telemetry.attribution.console import console_lines
from telemetry.attribution.section import AttributionConfig, build


class AttributionPlugin:
    def __init__(self, environment) -> None:
        self.environment = environment

    def register(self, hub) -> None:
        hub.add_section("attribution", self.section)
        hub.on_summary(self.print_lines)

    def section(self, hub) -> dict:
        return build(hub, AttributionConfig.from_options(hub.options))

    @staticmethod
    def print_lines(summary: dict) -> None:
        att = summary.get("attribution")
        if att is not None:
            sys.stdout.write("\n".join(console_lines(att)) + "\n")
            sys.stdout.flush()


def install(environment) -> AttributionPlugin | None:
    hub = getattr(environment, "llm_telemetry", None)
    if hub is None:
        return None
    plugin = AttributionPlugin(environment)
    plugin.register(hub)
    return plugin
