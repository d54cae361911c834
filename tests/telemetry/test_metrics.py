"""The client-metric registry (telemetry.metrics): its entries are coherent, and every output shows every metric
its flags name — one run, then each sink is checked against the registry, so a new metric cannot be left out of one.
"""

from __future__ import annotations

import csv
import re
import runpy

import numpy as np
import pytest

from shapes.stage import Stage
from telemetry.exporter import Exporter
from telemetry.metrics import BOUNDS, BY_KEY, CLIENT_METRICS, having, keys
from telemetry.recorder import Cell, Recorder, Slot
from telemetry.report import render
from telemetry.sinks import console_table, write_csv
from tests.deploy.promql import CLIENT_METRICS as KNOWN_CLIENT_NAMES
from tests.support import ROOT
from tests.telemetry.helpers import fire, local_env
from tests.telemetry.synthetic import make_result
from webui.table import COLUMNS, llm_rows

STAGES = ("users=2", "users=4")
VERSIONS = ("v1", "v2")


# ---- the registry itself --------------------------------------------------------------------------
def test_keys_and_names_are_unique():
    assert len({m.key for m in CLIENT_METRICS}) == len(CLIENT_METRICS) == len(BY_KEY)
    assert len({m.label for m in CLIENT_METRICS}) == len(CLIENT_METRICS)
    names = [m.prom_name for m in having("histogram")]
    assert len(set(names)) == len(names)


def test_existing_metrics_keep_their_place_and_names():
    assert keys("top")[:6] == ("ttft", "itl", "tpot", "e2e", "inter_chunk", "decode_span")  # new ones come after
    assert keys("per_stage")[:5] == ("ttft", "itl", "tpot", "e2e", "client_queue")
    assert keys("windowed") == ("ttft", "itl", "tpot", "e2e")
    assert {k: BY_KEY[k].prom_name for k in ("ttft", "itl", "tpot", "e2e", "decode_span")} == {
        "ttft": "llm_time_to_first_token_seconds", "itl": "llm_inter_token_latency_seconds",
        "tpot": "llm_time_per_output_token_seconds", "e2e": "llm_request_duration_seconds",
        "decode_span": "llm_decode_span_seconds",
    }  # fmt: skip


@pytest.mark.parametrize("m", CLIENT_METRICS, ids=lambda m: m.key)
def test_each_entry_is_coherent(m):
    assert re.fullmatch(r"[a-z][a-z0-9_]*", m.key) and m.label and m.unit == "s"
    if m.histogram:
        assert m.prom_name.startswith("llm_") and m.prom_name.endswith("_seconds") and m.prom_help
        assert m.prom_name in KNOWN_CLIENT_NAMES, "add the name to tests/deploy/promql.py (and the README's list)"
        assert list(m.bounds) == sorted(set(m.bounds)) and m.bounds[0] > 0 and BOUNDS[m.key] == m.bounds
    else:
        assert m.key not in BOUNDS and m.panel is None
    if m.windowed and m.samples:
        assert m.at is not None, "windowed samples need their arrival times"
    if m.panel:
        assert m.panel in ("latency", "p99") and m.histogram and m.panel_title and m.panel_help
        assert m.top or m.panel == "p99", "a latency panel reads llm_latency_quantile_seconds"
    if m.stages_csv or m.report_stage or m.live or m.stage_table or m.load_chart:
        assert m.per_stage, "per-stage views read <key>_ms of the summary's stages"
    assert set(m.stages_csv + m.report_stage + m.report_versions + m.load_quantiles) <= {"p50", "p90", "p95", "p99"}
    assert m.stage_table == 0 or m.stage_table >= len(f"{m.label} p50/p99") + 2


def test_itl_take_is_the_results_own_definition():
    for chunk_tokens in (None, [1, 3, 1, 2, 4]):
        r = make_result(ttft=0.1, itl=np.array([0.01, 0.02, 0.005, 0.03]), tokens=5, chunk_tokens=chunk_tokens)
        assert np.array_equal(BY_KEY["itl"].take(r), r.itl_samples())
        times = BY_KEY["itl"].at(r, r.itl_samples())
        assert np.array_equal(times, np.repeat(r.chunk_times[1:], r.chunk_tokens[1:]))
        assert np.array_equal(BY_KEY["inter_chunk"].take(r), r.inter_chunk_samples())
    assert BY_KEY["itl"].take(make_result(tokens=1)).size == 0


# ---- every output, from one run -------------------------------------------------------------------
@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("metrics")
    env, hub, role = local_env(route_table="v1=http://a:1@0-49,v2=http://b:1@50-99")
    role.on_test_start()
    rng = np.random.default_rng(7)
    for si, name in enumerate(STAGES):
        env.llm.stage_board.set(Stage(name, index=si, users=2 * (si + 1)))
        for i in range(30):
            fire(env, make_result(ttft=0.1 + 0.01 * i, itl=rng.uniform(0.01, 0.03, 11), tokens=12, stage=name,
                                  chunk_tokens=rng.integers(1, 3, 12) if i % 2 else None, queue=0.002,
                                  version=VERSIONS[i % 2], reasoning_chunks=4 if i % 3 == 0 else 0))  # fmt: skip
    role.pump_local()
    summary = hub.summary()
    stats, stages = write_csv(summary, str(tmp / "run"))
    out = {
        "hub": hub,
        "summary": summary,
        "console": console_table(summary),
        "stats": list(csv.DictReader(open(stats))),
        "stages_csv": list(csv.DictReader(open(stages))),
        "report": render(summary),
        "exporter": Exporter(hub.view, port=0).registry,
        "live": hub.live(),
        "web": llm_rows(hub.live(), users=6),
        "dashboard": runpy.run_path(str(ROOT / "deploy" / "grafana" / "dashboard.py"))["build"](),
    }
    yield out
    role.close()


@pytest.mark.parametrize("m", CLIENT_METRICS, ids=lambda m: m.key)
def test_recorder_keeps_every_metric(m, run):
    assert m.key in Cell().sketches and (m.key in Cell().hists) == m.histogram
    assert (m.key in Slot().sketches) == m.windowed
    cells = list(run["hub"].merger.merged.cells.values())
    assert Recorder.merged_sketch(cells, m.key).count > 0, "take() gave no value for a 12-token stream"
    if m.histogram:
        assert Recorder.merged_hist(cells, m.key).count == Recorder.merged_sketch(cells, m.key).count
    if m.windowed:
        assert sum(s.sketches[m.key].count for s in run["hub"].merger.merged.slots.values()) > 0


@pytest.mark.parametrize("m", CLIENT_METRICS, ids=lambda m: m.key)
def test_summary_has_every_metric(m, run):
    s = run["summary"]
    assert (m.summary_key in s) == m.top
    if m.top:
        assert s[m.summary_key]["count"] > 0
    for st in s["stages"]:
        assert (m.summary_key in st) == m.per_stage, st["name"]
        if m.per_stage:
            assert st[m.summary_key]["count"] > 0
    assert (m.key in s["histograms"]) == m.distribution
    if m.distribution:
        assert s["histograms"][m.key]["count"] > 0
    assert set(s["versions"]) == set(VERSIONS)
    for v in VERSIONS:
        assert (m.summary_key in s["versions"][v]) == m.versions


@pytest.mark.parametrize("m", CLIENT_METRICS, ids=lambda m: m.key)
def test_console_and_csv_have_every_metric(m, run):
    lines = run["console"].splitlines()
    q = run["summary"].get(m.summary_key)
    rows = [ln for ln in lines if ln.startswith(f"{m.label} ") and ln.split()[-6:-5] == [str((q or {}).get("count"))]]
    assert bool(rows) == m.top, lines
    heading = next(ln for ln in lines if "TTFT p50/p99" in ln)  # the stage table's second heading line
    assert (f"{m.label} p50/p99" in heading) == bool(m.stage_table)
    stats = {(r["scope"], r["metric"]): r for r in run["stats"]}
    assert (("all", m.key) in stats) == m.top
    if m.top:
        assert float(stats[("all", m.key)]["p50_ms"]) == pytest.approx(q["p50"])
    for name in STAGES:
        assert ((name, m.key) in stats) == m.per_stage
    columns = set(run["stages_csv"][0])
    for quantile in ("p50", "p90", "p95", "p99"):
        assert (f"{m.key}_{quantile}_ms" in columns) == (quantile in m.stages_csv)
    for st, row in zip(run["summary"]["stages"], run["stages_csv"], strict=True):
        for quantile in m.stages_csv:
            assert float(row[f"{m.key}_{quantile}_ms"]) == pytest.approx(st[m.summary_key][quantile])


@pytest.mark.parametrize("m", CLIENT_METRICS, ids=lambda m: m.key)
def test_live_view_and_web_tab_have_every_metric(m, run):
    for st in run["live"]["stages"]:
        for quantile in ("p50", "p99"):
            assert (f"{m.key}_{quantile}_ms" in st) == m.live
            if m.live:
                assert st[f"{m.key}_{quantile}_ms"] > 0
    titles = dict(COLUMNS)
    for quantile in ("p50", "p99"):
        assert (f"{m.key}_{quantile}" in titles) == m.live
        if m.live:
            assert titles[f"{m.key}_{quantile}"] == f"{m.label} {quantile} (ms)"
            stage_rows = [r for r in run["web"] if r["stage"] in STAGES]
            assert len(stage_rows) == 2 and all(r[f"{m.key}_{quantile}"] not in ("—", "") for r in stage_rows)


def _table(html: str, section: str) -> str:
    body = html[html.index(f'<section id="{section}">'):]
    return body[: body.index("</section>")]


@pytest.mark.parametrize("m", CLIENT_METRICS, ids=lambda m: m.key)
def test_report_has_every_metric(m, run):
    html = run["report"]
    assert (f"<tr><td>{m.label}</td>" in _table(html, "latency")) == m.top
    assert (f"<title>{m.label} distribution</title>" in html) == m.distribution
    stages, versions, overview = _table(html, "stages"), _table(html, "versions"), _table(html, "overview")
    for quantile in ("p50", "p99"):
        assert (f"<th>{m.label} {quantile}</th>" in stages) == (quantile in m.report_stage)
        assert (f"<th>{m.label} {quantile}</th>" in versions) == (quantile in m.report_versions)
    assert (f'<div class="k">{m.label} p99</div>' in overview) == m.report_card
    if m.load_chart:
        chart = html[html.index(f"<title>{m.load_chart} against load</title>"):]
        chart = chart[: chart.index("</svg>")]
        for quantile in m.load_quantiles:
            assert f'class="lg">{m.label} {quantile}</text>' in chart
    else:
        assert f'class="lg">{m.label} p99</text>' not in _table(html, "stages")


@pytest.mark.parametrize("m", CLIENT_METRICS, ids=lambda m: m.key)
def test_exporter_and_dashboard_have_every_metric(m, run):
    reg = run["exporter"]
    labels = {"user_class": "SynthUser", "stage": STAGES[0], "version": VERSIONS[0]}
    count = reg.get_sample_value(f"{m.prom_name}_count", labels) if m.histogram else None
    cells = run["hub"].merger.merged.select(stage=STAGES[0], version=VERSIONS[0])
    if m.histogram:
        assert count == Recorder.merged_hist(cells, m.key).count > 0
        assert reg.get_sample_value(f"{m.prom_name}_bucket", {**labels, "le": "+Inf"}) == count
    p99 = reg.get_sample_value("llm_latency_quantile_seconds", {"metric": m.key, "quantile": "0.99"})
    assert (p99 is not None) == m.top
    panels = [p for p in run["dashboard"]["panels"] if m.prom_name and m.prom_name in str(p["targets"])]
    assert bool(panels) == (m.panel is not None)
    if m.panel:
        (panel,) = panels
        assert panel["title"] == m.panel_title and panel["fieldConfig"]["defaults"]["unit"] == "s"
        exprs = [t["expr"] for t in panel["targets"]]
        assert any(f"{m.prom_name}_bucket" in e and "0.99" in e for e in exprs)
        assert (f'metric="{m.key}"' in " ".join(exprs)) == (m.panel == "latency")
        assert all(any(name in e for e in exprs) for name in m.server)
