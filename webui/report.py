"""``/llm/report`` in Locust's web UI: the HTML report of the run's final summary, or a live one while it runs.

    from webui.report import install
    install(environment)   # needs environment.llm.telemetry and a web UI; else does nothing
"""

from __future__ import annotations

import logging

from flask import Blueprint, Response

from run.context import attach
from telemetry.outputs.report.render import render

log = logging.getLogger(__name__)

ROUTE = "/llm/report"


class ReportPage:
    def __init__(self, environment) -> None:
        self.environment = environment

    def page(self) -> Response:
        hub = self.environment.llm.telemetry
        if hub is None:
            return Response("no LLM telemetry in this process", status=404, mimetype="text/plain")
        try:
            summary = hub.final_summary if getattr(hub, "final_summary", None) else hub.summary()
            return Response(render(summary), mimetype="text/html")
        except Exception as e:  # say what broke instead of Flask's bare 500 page
            log.exception("/llm/report failed")
            return Response(f"the LLM report could not be built: {type(e).__name__}: {e}", status=500,
                            mimetype="text/plain")

    def register(self, web_ui) -> ReportPage:
        bp = Blueprint("llm_report", __name__)
        view = self.page
        if hasattr(web_ui, "auth_required_if_enabled"):
            view = web_ui.auth_required_if_enabled(view)
        bp.add_url_rule(ROUTE, "report", view)
        web_ui.app.register_blueprint(bp)
        return self


def install(environment) -> ReportPage | None:
    web_ui = getattr(environment, "web_ui", None)
    if web_ui is None or attach(environment).telemetry is None:
        return None
    return ReportPage(environment).register(web_ui)
