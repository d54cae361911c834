"""The report from a real hub summary: written by the on_summary sink, served at /llm/report (webui/report.py)."""

from __future__ import annotations

import argparse
import re

from run.context import attach
from telemetry.attribution.plugin import install as install_attribution
from telemetry.outputs.report.plugin import install
from tests.telemetry.attribution.hubdata import Spec, hub_from
from webui.report import ROUTE
from webui.report import install as install_route


def _hub(tmp_path, report: str | None):
    specs = [Spec()] * 3 + [Spec(ttft=0.9, kv=0.99, waiting=30, preemptions=5)] + [Spec()] * 2
    hub = hub_from(specs)
    env = hub.environment
    attach(env).telemetry = hub
    env.parsed_options = argparse.Namespace(llm_report=report, attribution_window=10.0)
    return hub, env


def test_sink_writes_the_report_of_the_final_summary(tmp_path, capsys):
    path = tmp_path / "out" / "report.html"
    hub, env = _hub(tmp_path, str(path))
    install_attribution(env)
    install(env)
    summary = hub.summary()
    for sink in hub.hooks.sinks:  # what telemetry's finalize does at quit
        sink(summary)
    html = path.read_text(encoding="utf-8")
    titles = re.findall(r'<svg class="chart"[^>]*><title>([^<]*)</title>', html)
    # real summary shapes: telemetry's histograms and timeseries, our attribution section
    assert {"TTFT distribution", "ITL distribution", "Throughput per 10 s window", "Server KV-cache usage and queue",
            "Client latency per 10 s window", "Where the mean TTFT went"} <= set(titles)
    assert "TTFT p99 4.5× at" in html and "30 waiting, KV 0.99, 5 preemptions" in html
    out = capsys.readouterr().out
    assert "attribution (10 s windows): dynamic batching ok" in out
    assert "TTFT p99 4.5× at" in out and "→ preemption" in out
    assert not list(path.parent.glob(".*.tmp"))


def test_no_option_no_file_and_a_bad_path_is_logged(tmp_path, caplog):
    hub, env = _hub(tmp_path, None)
    install(env)
    summary = hub.summary()
    for sink in hub.hooks.sinks:
        sink(summary)
    assert list(tmp_path.iterdir()) == []
    blocker = tmp_path / "file"
    blocker.write_text("x")
    env.parsed_options.llm_report = str(blocker / "report.html")  # parent is a file
    for sink in hub.hooks.sinks:
        sink(summary)
    assert "--llm-report: could not write" in caplog.text


def test_web_ui_serves_the_report(tmp_path):
    hub, env = _hub(tmp_path, None)
    web_ui = env.create_web_ui("127.0.0.1", 0, delayed_start=True)  # Flask's test client, no server
    install_attribution(env)
    install(env)
    install_route(env)
    client = web_ui.app.test_client()
    live = client.get(ROUTE)
    assert live.status_code == 200 and live.mimetype == "text/html"
    assert b"Client latency per 10 s window" in live.data
    hub.merger.final_summary = {**hub.summary(), "model": "final-model-name"}
    final = client.get(ROUTE)
    assert b"final-model-name" in final.data


def test_web_route_reports_a_broken_summary_as_text(tmp_path, caplog):
    hub, env = _hub(tmp_path, None)
    web_ui = env.create_web_ui("127.0.0.1", 0, delayed_start=True)
    install(env)
    install_route(env)

    def broken(_hub):
        raise RuntimeError("no summary today")

    hub.summary = lambda: broken(hub)
    r = web_ui.app.test_client().get(ROUTE)
    assert r.status_code == 500 and r.mimetype == "text/plain"
    assert b"RuntimeError: no summary today" in r.data
