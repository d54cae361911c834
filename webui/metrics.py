"""``/llm/metrics`` in Locust's web UI: the exporter's Prometheus text, from the same collector.

    from webui.metrics import install
    install(environment)   # needs environment.llm.telemetry, parsed options and a web UI; else does nothing
"""

from __future__ import annotations

from flask import Response
from prometheus_client import generate_latest

from run.context import attach
from telemetry.outputs.exporter import CONTENT_TYPE, llm_registry

ROUTE = "/llm/metrics"


def install(environment) -> bool:
    """Add the route; False when this process has no web UI, no telemetry or no options (a library use)."""
    web_ui = getattr(environment, "web_ui", None)
    hub = attach(environment).telemetry
    if web_ui is None or hub is None or environment.parsed_options is None:
        return False
    registry = llm_registry(lambda: hub.view())

    def llm_metrics() -> Response:
        return Response(generate_latest(registry), mimetype=CONTENT_TYPE)

    auth = getattr(web_ui, "auth_required_if_enabled", lambda f: f)
    web_ui.app.add_url_rule(ROUTE, "llm_metrics", auth(llm_metrics))
    return True
