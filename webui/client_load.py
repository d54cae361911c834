"""``/llm/client-load``: the client saturation guard's figures per process (telemetry/control/client_load.py), JSON —
the same object as the summary's ``client_load`` section, live."""

from __future__ import annotations

from flask import Blueprint, jsonify

from run.context import attach


def install(environment) -> None:
    load = attach(environment).client_load
    web_ui = getattr(environment, "web_ui", None)
    if load is None or web_ui is None:
        return
    bp = Blueprint("llm_client_load", __name__)
    bp.add_url_rule("/llm/client-load", "client_load", lambda: jsonify(load.section()))
    web_ui.app.register_blueprint(bp)
