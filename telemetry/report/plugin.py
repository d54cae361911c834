"""Writes the HTML report at the end of a run (``--llm-report PATH``) and serves it at ``/llm/report``.

The file is written by a sink on the telemetry hub (``on_summary``: the master, or a local run, with
the final merged summary). The web UI route renders the hub's final summary when the run has ended,
else a live one, so the report can be read while a test runs.

    from telemetry.report.plugin import install
    install(environment)   # in an init listener, after telemetry's own install
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from flask import Blueprint, Response

from telemetry.report.render import render

log = logging.getLogger(__name__)

ROUTE = "/llm/report"


def write_report(summary: dict, path: str) -> None:
    """Render and write atomically (a temp file then rename), creating the parent folder."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(render(summary), encoding="utf-8")
    os.replace(tmp, target)


class ReportPlugin:
    def __init__(self, environment) -> None:
        self.environment = environment

    @property
    def hub(self):
        return getattr(self.environment, "llm_telemetry", None)

    def on_summary(self, summary: dict) -> None:
        path = getattr(self.environment.parsed_options, "llm_report", None)
        if not path:
            return
        try:
            write_report(summary, path)
        except OSError as e:  # a bad path loses the report, not the run's exit code or other sinks
            log.error(f"--llm-report: could not write {path}: {e}")
            return
        log.info(f"LLM report written to {path}")

    def page(self) -> Response:
        hub = self.hub
        if hub is None:
            return Response("no LLM telemetry in this process", status=404, mimetype="text/plain")
        try:
            summary = hub.final_summary if getattr(hub, "final_summary", None) else hub.summary()
            return Response(render(summary), mimetype="text/html")
        except Exception as e:  # say what broke instead of Flask's bare 500 page
            log.exception("/llm/report failed")
            return Response(f"the LLM report could not be built: {type(e).__name__}: {e}", status=500,
                            mimetype="text/plain")

    def register_web(self, web_ui) -> None:
        bp = Blueprint("llm_report", __name__)
        view = self.page
        if hasattr(web_ui, "auth_required_if_enabled"):
            view = web_ui.auth_required_if_enabled(view)
        bp.add_url_rule(ROUTE, "report", view)
        web_ui.app.register_blueprint(bp)


def install(environment) -> ReportPlugin | None:
    hub = getattr(environment, "llm_telemetry", None)
    if hub is None:
        return None
    plugin = ReportPlugin(environment)
    hub.on_summary(plugin.on_summary)
    web_ui = getattr(environment, "web_ui", None)
    if web_ui is not None:
        plugin.register_web(web_ui)
    return plugin
