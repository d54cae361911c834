"""Downloads of everything a run writes, from the web UI's "Download Data" tab — during the run (the run so far)
and after it (the final summary).

| route | content | type |
|---|---|---|
| ``/llm/summary.json`` | the summary (``--llm-summary-json``'s bytes) | application/json |
| ``/llm/stats.csv``, ``/llm/stages.csv`` | the two LLM CSV files (``--llm-csv``) | text/csv |
| ``/llm/report`` | the HTML report (webui/report.py) | text/html |
| ``/llm/requests.jsonl`` | per-request records (``--llm-requests-jsonl``), so far | application/x-ndjson |
| ``/llm/vllm-bench.json`` | the vLLM-bench results file (``--vllm-bench-json``) | application/json |

The last two are offered when their option is set (they serve the file that option names; 404 until it exists).
The summary and CSV files are built from the summary as of now while the run goes, the final one after it.

    from webui.downloads import install
    install(environment)   # needs environment.llm.telemetry and a web UI; else does nothing
"""

from __future__ import annotations

import logging
from pathlib import Path

from flask import Blueprint, Response

from run.context import attach
from telemetry.outputs.sinks import csv_text, json_bytes, stages_rows, stats_rows

log = logging.getLogger(__name__)

FILES = (
    # (option dest, route, download name, content type, title)
    ("llm_requests_jsonl", "/llm/requests.jsonl", "llm_requests.jsonl", "application/x-ndjson",
     "LLM per-request records (JSONL, --llm-requests-jsonl)"),
    ("vllm_bench_json", "/llm/vllm-bench.json", "vllm_bench.json", "application/json",
     "vLLM bench results (JSON, --vllm-bench-json)"),
)
"""Files a run writes to a path an option names, served from that path."""


def _attachment(body: bytes | str, name: str, mimetype: str) -> Response:
    return Response(body, mimetype=mimetype,
                    headers={"Content-Disposition": f"attachment;filename={name}", "Cache-Control": "no-store"})


class Downloads:
    def __init__(self, environment) -> None:
        self.environment = environment

    def summary(self) -> dict:
        hub = self.environment.llm.telemetry
        return hub.final_summary or hub.summary()

    def links(self) -> list[dict]:
        """The Download Data tab's entries (``extendedCsvFiles``) for this process's options."""
        out = [{"href": "./llm/summary.json", "title": "LLM summary (JSON, --llm-summary-json)"},
               {"href": "./llm/stats.csv", "title": "LLM stats (CSV, --llm-csv)"},
               {"href": "./llm/stages.csv", "title": "LLM stages (CSV, --llm-csv)"},
               {"href": "./llm/charts", "title": "LLM live charts (page)"}]
        options = self.environment.parsed_options
        for dest, route, _name, _type, title in FILES:
            if getattr(options, dest, None):
                out.append({"href": f".{route}", "title": title})
        return out

    def _guarded(self, fn):
        def view() -> Response:
            try:
                return fn()
            except Exception as e:  # say what broke instead of Flask's bare 500 page
                log.exception("LLM download failed")
                return Response(f"could not build the file: {type(e).__name__}: {e}", status=500,
                                mimetype="text/plain")
        view.__name__ = fn.__name__
        return view

    def register(self, web_ui) -> Downloads:
        bp = Blueprint("llm_downloads", __name__)
        auth = getattr(web_ui, "auth_required_if_enabled", lambda f: f)

        def summary_json() -> Response:
            return _attachment(json_bytes(self.summary()), "llm_summary.json", "application/json")

        def stats_csv() -> Response:
            return _attachment(csv_text(stats_rows(self.summary())), "llm_stats.csv", "text/csv")

        def stages_csv() -> Response:
            return _attachment(csv_text(stages_rows(self.summary())), "llm_stages.csv", "text/csv")

        bp.add_url_rule("/llm/summary.json", "summary", auth(self._guarded(summary_json)))
        bp.add_url_rule("/llm/stats.csv", "stats", auth(self._guarded(stats_csv)))
        bp.add_url_rule("/llm/stages.csv", "stages", auth(self._guarded(stages_csv)))
        for dest, route, name, mimetype, _title in FILES:
            bp.add_url_rule(route, dest, auth(self._guarded(self._file_view(dest, name, mimetype))))
        web_ui.app.register_blueprint(bp)
        web_ui.template_args["extendedCsvFiles"] = [*(web_ui.template_args.get("extendedCsvFiles") or []),
                                                    *self.links()]
        return self

    def _file_view(self, dest: str, name: str, mimetype: str):
        def view() -> Response:
            path = getattr(self.environment.parsed_options, dest, None)
            if not path:
                return Response(f"--{dest.replace('_', '-')} is not set in this run", status=404, mimetype="text/plain")
            p = Path(path)
            if not p.is_file():
                return Response(f"{path} is not written yet", status=404, mimetype="text/plain")
            return _attachment(p.read_bytes(), name, mimetype)

        view.__name__ = f"file_{dest}"
        return view


def install(environment) -> Downloads | None:
    web_ui = getattr(environment, "web_ui", None)
    if web_ui is None or attach(environment).telemetry is None or environment.parsed_options is None:
        return None
    return Downloads(environment).register(web_ui)
