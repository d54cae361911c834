"""The client-metric registry (telemetry.metrics): its entries are coherent, and every output shows every metric
its flags name — one run, then each sink is checked against the registry, so a new metric cannot be left out of one.
"""

from __future__ import annotations

import csv
import re
import runpy
from dataclasses import fields

import numpy as np
import pytest

from shapes.stage import Stage
from telemetry.compare import rows as compare_rows
from telemetry.measure.recorder import Cell, Recorder, Slot
from telemetry.metrics import (
    BOUNDS,
    BY_KEY,
    CLIENT_METRICS,
    PER_REQUEST,
    REASONING_ONLY,
    having,
    keys,
    reasoned_in,
    shown,
)
from telemetry.outputs.exporter import Exporter
from telemetry.outputs.live import LIVE
from telemetry.outputs.report import render
from telemetry.outputs.report.sections import LOAD_CHARTS, REPORT_CARDS, REPORT_STAGES, REPORT_VERSIONS
from telemetry.outputs.requestlog import record_of
from telemetry.outputs.sinks import STAGE_TABLE, STAGES_CSV, console_table, write_csv
from tests.deploy.promql import CLIENT_METRICS as KNOWN_CLIENT_NAMES
from tests.support import ROOT
from tests.telemetry.helpers import fire, local_env
from tests.telemetry.synthetic import IN_BAND, make_result
from users.result import RequestMeta
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
    }


@pytest.mark.parametrize("m", CLIENT_METRICS, ids=lambda m: m.key)
def test_each_entry_is_coherent(m):
    assert re.fullmatch(r"[a-z][a-z0-9_]*", m.key) and m.label and m.unit in ("s", "tokens", "steps", "ratio")
    assert m.summary_key == (f"{m.key}_ms" if m.unit == "s" else m.key)
    if m.histogram:
        suffix = {"s": "_seconds", "ratio": "_ratio"}[m.unit]
        assert m.prom_name.startswith("llm_") and m.prom_name.endswith(suffix) and m.prom_help
        assert m.prom_name in KNOWN_CLIENT_NAMES, "add the name to tests/deploy/promql.py (and the README's list)"
        assert list(m.bounds) == sorted(set(m.bounds)) and m.bounds[0] > 0 and BOUNDS[m.key] == m.bounds
    else:
        assert m.key not in BOUNDS
    if m.windowed and m.samples:
        assert m.at is not None, "windowed samples need their arrival times"


def test_each_outputs_presentation_names_registry_metrics_it_can_show():
    """Presentation lives with each output, keyed by registry key: every key is a metric, and what reads a
    summary stage (the tables, the stages CSV, the live view, the load plots) names per-stage metrics only."""
    per_stage = set(keys("per_stage"))
    charts = {k: qs for plot in LOAD_CHARTS.values() for k, qs in plot.items()}
    for name, chosen in (("STAGE_TABLE", STAGE_TABLE), ("STAGES_CSV", STAGES_CSV), ("LIVE", LIVE),
                         ("REPORT_STAGES", REPORT_STAGES), ("LOAD_CHARTS", charts)):
        assert set(chosen) <= per_stage, f"{name}: per-stage views read <key>_ms of the summary's stages"
    assert set(REPORT_VERSIONS) <= set(keys("versions")) and set(REPORT_CARDS) <= set(keys("top"))
    for quantiles in (*STAGES_CSV.values(), *REPORT_STAGES.values(), *REPORT_VERSIONS.values(), *charts.values()):
        assert set(quantiles) <= {"p50", "p90", "p95", "p99"}
    for key, width in STAGE_TABLE.items():
        assert width >= len(f"{BY_KEY[key].label} p50/p99") + 2
    panels = runpy.run_path(str(ROOT / "deploy" / "grafana" / "dashboard.py"))["METRIC_PANELS"]
    for key, p in panels.items():
        m = BY_KEY[key]
        assert p.kind in ("latency", "p99") and m.histogram and p.title and p.help
        assert m.top or p.kind == "p99", "a latency panel reads llm_latency_quantile_seconds"


def test_reasoning_only_metrics_follow_one_rule():
    """A run reasoned when it counted reasoning tokens or measured a thinking span (``<think>`` tags give no token
    count); only then do people's outputs show TTFA, the thinking span and the answer span."""
    assert REASONING_ONLY <= set(BY_KEY)
    assert not reasoned_in({"tokens": {"reasoning": 0}, "thinking_ms": {"count": 0}}) and not reasoned_in({})
    assert reasoned_in({"tokens": {"reasoning": 3}}) and reasoned_in({"tokens": {}, "thinking_ms": {"count": 1}})
    order = ("ttft", "ttfa", "itl", "thinking", "answer_span")
    assert shown(order, False) == ("ttft", "itl") and shown(order, True) == order


def test_itl_take_is_the_results_own_definition():
    for chunk_tokens in (None, [1, 3, 1, 2, 4]):
        r = make_result(ttft=0.1, itl=np.array([0.01, 0.02, 0.005, 0.03]), tokens=5, chunk_tokens=chunk_tokens)
        assert np.array_equal(BY_KEY["itl"].take(r), r.itl_samples())
        times = BY_KEY["itl"].at(r, r.itl_samples())
        assert np.array_equal(times, np.repeat(r.chunk_times[1:], r.chunk_tokens[1:]))
        assert np.array_equal(BY_KEY["inter_chunk"].take(r), r.inter_chunk_samples())
    assert BY_KEY["itl"].take(make_result(tokens=1)).size == 0


def test_the_server_flag_marks_exactly_the_metrics_only_the_servers_record_gives():
    """The recorder skips the ``server`` metrics for a result without the in-band record: each of them must be None
    there and a value with it, and no other per-request metric may need the record."""
    bare, full = make_result(tokens=12, end=100.0), make_result(tokens=12, end=100.0, server=IN_BAND)
    for m in CLIENT_METRICS:
        if m.samples:
            continue
        if m.server:
            assert m.take(bare) is None and m.take(full) is not None, m.key
        else:
            assert m.take(bare) == m.take(full), m.key


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
                                  version=VERSIONS[i % 2], reasoning_chunks=4 if i % 3 == 0 else 0,
                                  server=IN_BAND))
    role.pump_local()
    dashboard = runpy.run_path(str(ROOT / "deploy" / "grafana" / "dashboard.py"))
    lines = [record_of(make_result(tokens=12, reasoning_chunks=4, queue=0.002, server=IN_BAND)),
             record_of(make_result(tokens=1))]
    summary = hub.summary()
    stats, stages = write_csv(summary, str(tmp / "run"))
    out = {
        "hub": hub,
        "summary": summary,
        "console": console_table(summary),
        "stats": list(csv.DictReader(open(stats))),
        "stages_csv": list(csv.DictReader(open(stages))),
        "report": render(summary),
        "jsonl": lines,
        "compare": compare_rows(summary, summary),
        "exporter": Exporter(hub.view, port=0).registry,
        "live": hub.live(),
        "web": llm_rows(hub.live(), users=6),
        "dashboard": dashboard["build"](),
        "metric_panels": dashboard["METRIC_PANELS"],
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
    assert (f"{m.label} p50/p99" in heading) == (m.key in STAGE_TABLE)
    stats = {(r["scope"], r["metric"]): r for r in run["stats"]}
    assert (("all", m.key) in stats) == m.top
    if m.top:
        assert float(stats[("all", m.key)]["p50_ms"]) == pytest.approx(q["p50"])
    for name in STAGES:
        assert ((name, m.key) in stats) == m.per_stage
    columns = set(run["stages_csv"][0])
    for quantile in ("p50", "p90", "p95", "p99"):
        assert (f"{m.key}_{quantile}_ms" in columns) == (quantile in STAGES_CSV.get(m.key, ()))
    for st, row in zip(run["summary"]["stages"], run["stages_csv"], strict=True):
        for quantile in STAGES_CSV.get(m.key, ()):
            assert float(row[f"{m.key}_{quantile}_ms"]) == pytest.approx(st[m.summary_key][quantile])


@pytest.mark.parametrize("m", CLIENT_METRICS, ids=lambda m: m.key)
def test_live_view_and_web_tab_have_every_metric(m, run):
    for st in run["live"]["stages"]:
        for quantile in ("p50", "p99"):
            assert (f"{m.key}_{quantile}_ms" in st) == (m.key in LIVE)
            if m.key in LIVE:
                assert st[f"{m.key}_{quantile}_ms"] > 0
    titles = dict(COLUMNS)
    for quantile in ("p50", "p99"):
        assert (f"{m.key}_{quantile}" in titles) == (m.key in LIVE)
        if m.key in LIVE:
            assert titles[f"{m.key}_{quantile}"] == f"{m.label} {quantile} (ms)"
            stage_rows = [r for r in run["web"] if r["stage"] in STAGES]
            assert len(stage_rows) == 2 and all(r[f"{m.key}_{quantile}"] not in ("—", "") for r in stage_rows)


@pytest.mark.parametrize("m", CLIENT_METRICS, ids=lambda m: m.key)
def test_request_log_has_every_per_request_metric(m, run):
    """One value per request: ``<key>_ms`` in every line (null when that request has none, as a one-token answer
    has no TTST); sample metrics (ITL, inter-chunk) are the line's chunk offsets and tokens."""
    full, one_token = run["jsonl"]
    if m.samples:
        assert m.summary_key not in full and len(full["chunk_offsets_ms"]) == sum(full["chunk_tokens"]) == 12
        return
    assert m in PER_REQUEST and m.summary_key in full and m.summary_key in one_token
    assert full[m.summary_key] is not None, "take() gave no value for a 12-token reasoning stream"


def test_request_log_has_every_label_of_the_request():
    """Each RequestMeta field is a column, under its own name, with the request's value."""
    r = make_result(tokens=3, stage="users=2", version="v2")
    line = record_of(r)
    for f in fields(RequestMeta):
        assert f.name in line and line[f.name] == getattr(r.meta, f.name), f.name
    assert (line["stage"], line["version"]) == ("users=2", "v2")


@pytest.mark.parametrize("m", CLIENT_METRICS, ids=lambda m: m.key)
def test_compare_has_every_metric_the_summary_has(m, run):
    """``telemetry.compare`` rows (and so its --fail-on names): p50 and p99 of each metric in each scope where the
    summary has it."""
    rows = {(r.scope, r.figure): r for r in run["compare"]}
    scopes = {"run": m.top, **{f"stage {st}": m.per_stage for st in STAGES},
              **{f"version {v}": m.versions for v in VERSIONS}}
    for scope, has in scopes.items():
        for q in ("p50", "p99"):
            assert ((scope, f"{m.key}_{q}") in rows) == has, (scope, q)
            if has:
                row = rows[(scope, f"{m.key}_{q}")]
                assert row.base == row.new is not None and row.delta == 0


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
        assert (f"<th>{m.label} {quantile}</th>" in stages) == (quantile in REPORT_STAGES.get(m.key, ()))
        assert (f"<th>{m.label} {quantile}</th>" in versions) == (quantile in REPORT_VERSIONS.get(m.key, ()))
    assert (f'<div class="k">{m.label} p99</div>' in overview) == (m.key in REPORT_CARDS)
    plots = [title for title, metrics in LOAD_CHARTS.items() if m.key in metrics]
    for title in plots:
        chart = html[html.index(f"<title>{title} against load</title>"):]
        chart = chart[: chart.index("</svg>")]
        for quantile in LOAD_CHARTS[title][m.key]:
            assert f'class="lg">{m.label} {quantile}</text>' in chart
    if not plots:
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
    shown = run["metric_panels"].get(m.key)
    assert bool(panels) == (shown is not None)
    if shown:
        (panel,) = panels
        assert panel["title"] == shown.title and panel["fieldConfig"]["defaults"]["unit"] == "s"
        exprs = [t["expr"] for t in panel["targets"]]
        assert any(f"{m.prom_name}_bucket" in e and "0.99" in e for e in exprs)
        assert (f'metric="{m.key}"' in " ".join(exprs)) == (shown.kind == "latency")
        assert all(any(name in e for e in exprs) for name in shown.server)
