"""TTST (time to second token) end to end: one registry entry puts it in every output, with the right numbers."""

from __future__ import annotations

import csv
import runpy

import numpy as np
import pytest

from shapes.stage import Stage
from telemetry.metrics import BY_KEY
from telemetry.outputs.exporter import Exporter
from telemetry.outputs.report import render
from telemetry.outputs.sinks import STAGES_CSV, console_table, write_csv
from tests.support import ROOT
from tests.telemetry.helpers import fire, local_env
from tests.telemetry.synthetic import make_result
from webui.table import STRUCTURE, llm_rows

NAME = "llm_time_to_second_token_seconds"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Stage a: second chunks 20.2..39.2 ms after the first (off the bucket bounds: no float lands on one);
    stage b: 100 ms; a one-chunk request has no TTST."""
    env, hub, role = local_env()
    role.on_test_start()
    env.llm.stage_board.set(Stage("a", index=0, users=1))
    for i in range(20):
        gaps = np.array([0.0202 + 0.001 * i, 0.005, 0.005])
        fire(env, make_result(ttft=0.3, itl=gaps, tokens=4, stage="a"))
    fire(env, make_result(ttft=0.3, tokens=1, stage="a"))  # one chunk: no second token
    env.llm.stage_board.set(Stage("b", index=1, users=2))
    for _ in range(10):  # the second chunk carries 2 tokens 50 ms apart each: TTST is the chunk gap, 100 ms
        fire(env, make_result(ttft=0.3, itl=0.05, chunk_tokens=[3, 2, 1], stage="b"))
    role.pump_local()
    summary = hub.summary()
    stats, stages = write_csv(summary, str(tmp_path_factory.mktemp("ttst") / "run"))
    yield {"hub": hub, "summary": summary, "stats": list(csv.DictReader(open(stats))),
           "stages": list(csv.DictReader(open(stages)))}
    role.close()


def test_summary_top_level_and_per_stage(run):
    s = run["summary"]
    assert s["ttst_ms"]["count"] == 30  # the one-chunk request gave no sample
    assert s["ttst_ms"]["max"] == pytest.approx(100.0, rel=0.01) and s["ttst_ms"]["p50"] == pytest.approx(34, rel=0.02)
    a, b = s["stages"]
    assert a["ttst_ms"]["count"] == 20 and a["ttst_ms"]["p50"] == pytest.approx(29.0, rel=0.01)  # 20.2..39.2 ms: rank 9
    assert b["ttst_ms"]["count"] == 10 and b["ttst_ms"]["p99"] == pytest.approx(100.0, rel=0.01)
    assert s["histograms"]["ttst"]["count"] == 30


def test_console_and_csv(run):
    s = run["summary"]
    row = next(ln for ln in console_table(s).splitlines() if ln.startswith("TTST "))
    assert row.split()[1:3] == ["30", f"{s['ttst_ms']['p50']:.1f}"]
    stats = {(r["scope"], r["metric"]): r for r in run["stats"]}
    assert float(stats[("all", "ttst")]["p99_ms"]) == pytest.approx(s["ttst_ms"]["p99"])
    assert int(stats[("b", "ttst")]["count"]) == 10
    b = run["stages"][1]
    assert float(b["ttst_p50_ms"]) == pytest.approx(100.0, rel=0.01) and float(b["ttst_p99_ms"]) > 0
    cols = list(run["stages"][0])  # appended: older columns keep their place, later metrics' columns follow
    i = cols.index("ttst_p50_ms")
    shown = list(STAGES_CSV)
    later = shown[shown.index("ttst") + 1 :]
    assert cols[i + 1] == "ttst_p99_ms"
    assert set(cols[i + 2 :]) <= {f"{k}_{q}_ms" for k in later for q in STAGES_CSV[k]}


def test_exporter_histogram_on_itl_buckets(run):
    reg = Exporter(run["hub"].view, port=0).registry
    a = {"user_class": "SynthUser", "stage": "a"}
    assert reg.get_sample_value(f"{NAME}_count", a) == 20
    assert reg.get_sample_value(f"{NAME}_bucket", {**a, "le": "0.025"}) == 5  # 20.2 .. 24.2 ms
    assert reg.get_sample_value(f"{NAME}_bucket", {**a, "le": "0.0075"}) == 0  # ITL's sub-10 ms buckets are there
    assert reg.get_sample_value(f"{NAME}_sum", a) == pytest.approx(sum(0.0202 + 0.001 * i for i in range(20)))
    p50 = reg.get_sample_value("llm_latency_quantile_seconds", {"metric": "ttst", "quantile": "0.5"})
    assert p50 == pytest.approx(run["summary"]["ttst_ms"]["p50"] / 1000)
    assert BY_KEY["ttst"].bounds == BY_KEY["itl"].bounds


def test_web_tab_columns(run):
    assert {"key": "ttst_p50", "title": "TTST p50 (ms)"} in STRUCTURE
    assert {"key": "ttst_p99", "title": "TTST p99 (ms)"} in STRUCTURE
    a, b, now = llm_rows(run["hub"].live(), users=2)
    assert float(b["ttst_p50"]) == pytest.approx(100.0, rel=0.01) and a["ttst_p99"] != "—"
    assert now["ttst_p50"] == "—"  # quantiles are not summed across stages


def test_report(run):
    html = render(run["summary"])
    assert "<title>TTST distribution</title>" in html and "<title>TTST against load</title>" in html
    assert "<tr><td>TTST</td><td>30</td>" in html
    assert "<th>TTST p50</th><th>TTST p99</th>" in html
    assert '<div class="k">TTST p99</div>' in html


def test_dashboard_panel():
    d = runpy.run_path(str(ROOT / "deploy" / "grafana" / "dashboard.py"))["build"]()
    (panel,) = [p for p in d["panels"] if p["title"] == "Time to second token"]
    exprs = [t["expr"] for t in panel["targets"]]
    assert ("histogram_quantile(0.99, sum by (le, stage) (rate(" + NAME + '_bucket{user_class=~"$user_class", '
            'stage=~"$stage", version=~"$version"}[$__rate_interval])))') in exprs
    assert 'llm_latency_quantile_seconds{metric="ttst", quantile="0.99"}' in exprs
