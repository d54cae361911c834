"""Writes the HTML report at the end of a run (``--llm-report PATH``).

The file is written by a sink on telemetry's summary hooks (``on_summary``: the master, or a local run,
with the final merged summary). The web UI serves the same report at ``/llm/report`` (webui/report.py).

    from telemetry.outputs.report.plugin import install
    install(environment)   # in an init listener, after telemetry's own install
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from run.context import attach
from telemetry.compare import CompareError, load
from telemetry.outputs.report.render import render

log = logging.getLogger(__name__)


def write_report(summary: dict, path: str, baseline: dict | None = None) -> None:
    """Render and write atomically (a temp file then rename), creating the parent folder."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(render(summary, baseline=baseline), encoding="utf-8")
    os.replace(tmp, target)


class ReportSink:
    """The ``on_summary`` sink: writes ``--llm-report`` (read from the options when the summary arrives)."""

    def __init__(self, environment) -> None:
        self.environment = environment

    def __call__(self, summary: dict) -> None:
        path = getattr(self.environment.parsed_options, "llm_report", None)
        if not path:
            return
        base_path = getattr(self.environment.parsed_options, "llm_baseline", None)
        try:
            baseline = load(Path(base_path)) if base_path else None
        except CompareError as e:  # checked at start; gone or changed since: the report without it
            log.error(f"--llm-baseline: {e}; the report is drawn without it")
            baseline = None
        try:
            write_report(summary, path, baseline)
        except OSError as e:  # a bad path loses the report, not the run's exit code or other sinks
            log.error(f"--llm-report: could not write {path}: {e}")
            return
        log.info(f"LLM report written to {path}")


def install(environment) -> ReportSink | None:
    ctx = attach(environment)
    if ctx.telemetry is None:
        return None
    sink = ReportSink(environment)
    ctx.hooks.on_summary(sink)
    return sink
