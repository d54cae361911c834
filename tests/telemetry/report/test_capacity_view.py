"""The report's capacity section: the probes against each SLO with its threshold, the Pareto view, the probe table."""

from __future__ import annotations

import re

from telemetry.outputs.report import render
from telemetry.outputs.report.capacity_view import capacity_charts
from tests.telemetry.report.synthetic import single_stage_no_server


def _probe(n: int, users: int, ttft: float, out: float, passed: bool, early: dict | None = None) -> dict:
    return {"probe": n, "load": float(users), "stage": f"probe {n} users={users}", "users": users, "rate": None,
            "passed": passed, "early_stop": early, "complete": True, "requests": 10, "errors": 0,
            "goodput_rps": 2.0, "output_per_s": out, "span_s": 2.0,
            "checks": [{"name": "ttft_p99_ms", "threshold": 300.0, "value": ttft, "passed": ttft <= 300},
                       {"name": "error_rate", "threshold": 0.01, "value": 0.0, "passed": True}]}


def _search_summary() -> dict:
    early = {"at_s": 0.8, "why": "over_saturated", "slo": None, "value": None, "threshold": None,
             "reason": "over-saturated: output 500 -> 505 tok/s"}
    probes = [_probe(1, 2, 45.7, 320.0, True), _probe(2, 4, 540.6, 400.0, False, early),
              _probe(3, 3, 46.7, 450.0, True), _probe(4, 3, 50.5, 420.0, True)]
    return single_stage_no_server() | {"capacity": {
        "axis": "users", "range": [2, 5], "precision": 1, "max_probes": 5, "probes_used": 4, "status": "found",
        "confirmed": True, "statement": "capacity users=3: the highest load meeting every SLO (passed twice)",
        "users": 3, "rate": None, "binding_slo": None, "goodput_rps": 2.0, "output_per_s": 420.0, "gpus": 2,
        "gpu_hour_price_usd": 2.5, "output_per_s_per_gpu": 210.0, "usd_per_million_output_tokens": 3.3,
        "energy_j_per_output_token": None, "probes": probes}}


def test_the_report_draws_each_slo_against_load_and_the_pareto_view_from_the_probes():
    html = render(_search_summary())
    sec = html[html.index('<section id="capacity">'):]
    sec = sec[:sec.index("</section>")]
    titles = re.findall(r'<svg class="chart"[^>]*><title>([^<]*)</title>', sec)
    assert titles == ["ttft_p99_ms against load", "error_rate against load",
                      "Tokens/s per user vs tokens/s per GPU (Pareto)"]
    assert "capacity users=3: the highest load meeting every SLO" in sec
    ttft = sec[:sec.index("error_rate against load")]
    tips = re.findall(r'<circle [^>]*class="point"><title>([^<]*)</title>', ttft)
    assert sorted(tips) == sorted(["probe 1 users=2: ttft_p99_ms 45.7 (met)", "probe 2 users=4: ttft_p99_ms 540.6 "
                                   "(breached)", "probe 3 users=3: ttft_p99_ms 46.7 (met)",
                                   "probe 4 users=3: ttft_p99_ms 50.5 (met)"])
    # the threshold: a horizontal dashed line, between the passing points and the breaching one
    ys = {t.split(":")[0]: float(y) for y, t in re.findall(r'cy="([\d.]+)"[^>]*class="point"><title>([^<]*)</title>',
                                                           ttft)}
    line = re.findall(r'<path d="M([\d.]+),([\d.]+) L([\d.]+),([\d.]+)" fill="none" stroke="#555" '
                      r'stroke-width="2" stroke-dasharray="6 4"', ttft)
    assert len(line) == 1 and line[0][1] == line[0][3]
    assert ys["probe 2 users=4"] < float(line[0][1]) < ys["probe 1 users=2"]  # SVG y grows downwards
    assert "threshold 300" in ttft and "capacity users=3" in ttft  # the legend, the found load's marker
    pareto = sec[sec.index("(Pareto)"):]
    tips = re.findall(r'class="point"><title>([^<]*)</title>', pareto)
    # tokens/s per user = out / users, per GPU = out / --gpus (2)
    assert "probe 1 users=2: 160 tok/s per user, 160 tok/s per GPU" in tips
    assert "probe 3 users=3: 150 tok/s per user, 225 tok/s per GPU" in tips
    assert "probe 2 users=4: 100 tok/s per user, 200 tok/s per GPU" in tips
    assert "frontier of the passing probes" in pareto
    assert "over-saturated: output 500 -&gt; 505 tok/s" in sec  # the probe table names why probe 2 stopped


def test_no_search_no_capacity_pictures():
    assert capacity_charts(single_stage_no_server() | {"capacity": None}) == []
    assert '<section id="capacity">' not in render(single_stage_no_server() | {"capacity": None})
