"""An "LLM" tab in Locust's own web UI, through its extension points (no custom front-end build).

Locust's UI shows extra tabs listed in ``template_args["extendedTabs"]``; a tab whose key has an entry in
``extendedTables`` renders a table whose rows come from the ``extended_stats`` list of the
``/stats/requests`` payload, which the UI polls every 2 s. This module declares the tab and table, adds the
rows to that payload (an ``after_request`` hook), adds links to the "Download Data" tab
(``extendedCsvFiles``: the HTML report at ``/llm/report`` and the live table as JSON/CSV), and serves
``/llm/live`` (the hub's ``live()`` dict) and ``/llm/live.csv``.

It also makes the start form say what a person means: Locust's form sends every extra option, an empty
field as ``""``, and Locust then stores ``""`` for an option whose default is ``None`` (no SLO threshold,
no report path...). An empty field of such an option is dropped from the form before Locust reads it, so
the option stays "not given" exactly as on the command line.

Only a process with a web UI (a local run or the master, not headless, not a worker) gets the tab.
:func:`install` also adds the project's other web routes (``/llm/metrics``: webui/metrics.py, ``/llm/report``:
webui/report.py, the start form's ``--shape`` check: webui/shape_form.py): every Flask route lives in webui/.

    from webui.plugin import install    # in the init listener (deepseek_locust.py)
    install(environment)
"""

from __future__ import annotations

import csv
import io
import json
import logging
from typing import Any

from flask import Blueprint, Response, jsonify, request
from locust.runners import STATE_INIT, STATE_RUNNING, STATE_SPAWNING
from werkzeug.datastructures import ImmutableMultiDict

from run.context import attach
from webui.charts import install as install_charts
from webui.client_load import install as install_client_load
from webui.downloads import install as install_downloads
from webui.form_layout import install as install_form_layout
from webui.metrics import install as install_metrics
from webui.report import install as install_report
from webui.secrets import install as install_secrets
from webui.shape_form import install as install_shape_form
from webui.table import COLUMNS, STRUCTURE, TAB_KEY, llm_rows

log = logging.getLogger(__name__)

STATS_ENDPOINT = "locust.request_stats"
SWARM_ENDPOINT = "locust.swarm"
ACTIVE = (STATE_SPAWNING, STATE_RUNNING)
REPORT_HREF = "./llm/report"


class LLMTab:
    """Registers the LLM tab on one web UI; reads ``environment.llm.telemetry.live()`` on each poll."""

    def __init__(self, environment) -> None:
        self.environment = environment
        attach(environment)
        self._warned = False
        self._starting = False
        """A start was accepted and the runner is still "ready": the test_start listeners (model and tokenizer
        discovery, ~2 s) run before Locust's runner says "spawning", and Locust's page, polling the stats in that
        gap, took "ready" for "not started" and showed the start form again for the whole run."""

    def live(self) -> dict[str, Any]:
        hub = self.environment.llm.telemetry
        if hub is None or not hasattr(hub, "live"):
            return {}
        try:
            return hub.live() or {}
        except Exception:  # a telemetry bug must not break Locust's own stats page
            if not self._warned:
                log.exception("LLM tab: the telemetry hub's live() failed; the tab shows no rows")
                self._warned = True
            return {}

    def rows(self) -> list[dict[str, str]]:
        live = self.live()
        runner = self.environment.runner
        running = None if runner is None else runner.user_count
        if live.get("stages"):
            planned = self._planned_users()
            stages = [{**st, "users": st.get("users", planned.get(st.get("stage")))} for st in live["stages"]]
            last = stages[-1]
            if last["users"] is None and running and getattr(runner, "state", None) in ACTIVE:
                last["users"] = running  # the running stage has no planned count (no shape): Locust's users now
            live = {**live, "stages": stages}
        return llm_rows(live, users=running)

    def _planned_users(self) -> dict[str, int]:
        """Stage name -> the user count its shape planned (from the stage board's history)."""
        board = self.environment.llm.stage_board
        history = getattr(board, "history", None) or []
        return {st.name: st.users for st, *_ in history if getattr(st, "users", None) is not None}

    def register(self, web_ui) -> None:
        web_ui.template_args["extendedTabs"] = [
            *[t for t in web_ui.template_args.get("extendedTabs") or [] if t.get("key") != TAB_KEY],
            {"title": "LLM", "key": TAB_KEY},
        ]
        web_ui.template_args["extendedTables"] = [
            *[t for t in web_ui.template_args.get("extendedTables") or [] if t.get("key") != TAB_KEY],
            {"key": TAB_KEY, "structure": STRUCTURE},
        ]
        web_ui.template_args["extendedCsvFiles"] = [
            *(web_ui.template_args.get("extendedCsvFiles") or []),
            {"href": REPORT_HREF, "title": "LLM report (HTML, --llm-report)"},
            {"href": "./llm/live.csv", "title": "LLM live table (CSV)"},
            {"href": "./llm/live", "title": "LLM live figures (JSON)"},
        ]
        web_ui.app.after_request(self._add_rows)
        web_ui.app.before_request(self._drop_empty_unset_options)
        web_ui.app.register_blueprint(self._blueprint())

    def _drop_empty_unset_options(self) -> None:
        if request.endpoint != SWARM_ENDPOINT or request.method != "POST":
            return
        options = self.environment.parsed_options
        if options is None:
            return
        unset = {k for k, v in vars(options).items() if v is None}
        kept = [(k, v) for k, v in request.form.items(multi=True) if not (v == "" and k in unset)]
        if len(kept) != len(list(request.form.items(multi=True))):
            request.form = ImmutableMultiDict(kept)

    def _add_rows(self, response: Response) -> Response:
        if request.endpoint == SWARM_ENDPOINT and response.status_code == 200 and response.is_json:
            self._starting = bool((response.get_json() or {}).get("success"))
        if request.endpoint != STATS_ENDPOINT or response.status_code != 200 or not response.is_json:
            return response
        payload = response.get_json()
        if payload.get("state") == STATE_INIT and self._starting:
            payload["state"] = STATE_SPAWNING  # see _starting
        else:
            self._starting = False
        extended = [e for e in payload.get("extended_stats") or [] if e.get("key") != TAB_KEY]
        payload["extended_stats"] = [*extended, {"key": TAB_KEY, "data": self.rows()}]
        response.set_data(json.dumps(payload))
        return response

    def _blueprint(self) -> Blueprint:
        bp = Blueprint("llm_tab", __name__)

        @bp.route("/llm/live")
        def live_json() -> Response:
            return jsonify({"rows": self.rows(), "live": self.live()})

        @bp.route("/llm/live.csv")
        def live_csv() -> Response:
            buf = io.StringIO()
            writer = csv.writer(buf)
            writer.writerow([title for _, title in COLUMNS])
            for r in self.rows():
                writer.writerow([r[key] for key, _ in COLUMNS])
            return Response(
                buf.getvalue(),
                mimetype="text/csv",
                headers={"Content-Disposition": "attachment;filename=llm_live.csv"},
            )

        return bp


def install(environment) -> None:
    """Every web route of the project, when this process serves the web UI; otherwise do nothing.

    In this order: the start form's option names, groups and labels (webui/form_layout.py), the secrets' masking
    (webui/secrets.py), the start form's ``--shape`` check (it must read the form before empty fields are dropped),
    ``/llm/metrics``, ``/llm/report``, the LLM tab (``/llm/live``,
    ``/llm/live.csv``, the stats rows), the live charts and stage view (``/llm/charts``: webui/charts.py), the
    downloads (webui/downloads.py).
    """
    web_ui = getattr(environment, "web_ui", None)
    if web_ui is None:
        return
    install_form_layout(environment)  # first: it puts the form's mangled option names right for the others
    install_secrets(web_ui)
    install_client_load(environment)
    install_shape_form(environment)
    install_metrics(environment)
    install_report(environment)
    LLMTab(environment).register(web_ui)
    install_charts(environment)
    install_downloads(environment)
