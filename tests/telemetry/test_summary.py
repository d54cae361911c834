"""Summary schema 1 (keys and types of docs/summary.schema.json), stages, sections, sinks, windows, wire path."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path
from types import SimpleNamespace

import msgpack
import pytest

from run.context import attach
from shapes.plugin import NO_SATURATION
from shapes.stage import Stage
from telemetry.attribution.plugin import empty as empty_attribution
from telemetry.measure.recorder import Recorder
from telemetry.measure.view import RunView
from telemetry.plugin import MasterRole, WorkerRole
from tests.telemetry.helpers import fire, local_env
from tests.telemetry.synthetic import make_result

Q_KEYS = {"count", "mean", "p50", "p90", "p95", "p99", "max"}
TOP = {"schema", "duration_s", "workers", "model", "host", "requests", "tokens", "ttft_ms", "itl_ms", "inter_chunk_ms",
       "tpot_ms", "e2e_ms", "decode_span_ms", "goodput_rps", "slo", "stages", "server",
       "client_kv_block_fill", "versions", "timeseries", "histograms"}
"""Telemetry's own keys; ``saturation`` (shapes) and ``attribution`` come with their packages' sections (the whole
plugin's summary is checked against the schema in test_summary_schema.py)."""
STAGE = {"name": str, "users": (int, type(None)), "rate": (float, type(None)), "input_len": (str, type(None)),
         "start_s": float, "end_s": float, "requests": int, "output_per_s": (float, type(None)),
         "prompt_tokens_mean": (float, type(None)), "client_queue_ms": dict, "ttft_ms": dict, "itl_ms": dict,
         "tpot_ms": dict, "e2e_ms": dict, "client_kv_block_fill": (float, type(None)),
         "server_kv_usage_mean": (float, type(None)), "server_kv_usage_max": (float, type(None)),
         "preemptions": (int, type(None))}


def _is_q(q: dict) -> bool:
    return set(q) == Q_KEYS and isinstance(q["count"], int)


@pytest.fixture
def run():
    env, hub, role = local_env()
    board = env.llm.stage_board
    role.on_test_start()
    board.set(Stage("warm", index=0, users=2, warmup=True))
    for _ in range(5):
        fire(env, make_result(ttft=5.0, stage="warm"))
    board.set(Stage("users=2", index=1, users=2))
    for i in range(40):
        fire(env, make_result(ttft=0.1 + 0.001 * i, itl=0.01, tokens=20, stage="users=2", prompt_tokens=512,
                              prompt_tokens_client=500))
    fire(env, make_result(ok=False, error_kind="stream_cut", stage="users=2", prompt_tokens=512))
    board.set(Stage("users=4", index=2, users=4, rate=None, input_len="zipf:1.2:16:4096"))
    for i in range(60):
        fire(env, make_result(ttft=0.3 + 0.001 * i, itl=0.02, tokens=10, stage="users=4"))
    role.sample_kv_fill()  # no in-flight requests (users not installed): nothing recorded, no crash
    attach(env).inflight = type("I", (), {"snapshot": staticmethod(lambda: [(512, 8), (100, 0)])})()
    role.sample_kv_fill()
    yield env, hub, role
    role.close()


def test_schema_keys_and_types(run):
    env, hub, role = run
    role.pump_local()
    s = json.loads(json.dumps(hub.summary()))  # plain JSON data all the way down
    assert TOP <= set(s) and s["schema"] == 2 and s["workers"] == 1 and s["model"] == "tiny"
    assert s["requests"] == {"total": 101, "ok": 100, "failed": 1, "errors": {"stream_cut": 1}, "warmup": 5}
    assert s["tokens"]["output"] == 40 * 20 + 60 * 10 and s["tokens"]["source"] == "usage"
    assert s["tokens"]["prompt_mismatch_ratio"] == pytest.approx(12 / 512)
    for k in ("ttft_ms", "itl_ms", "inter_chunk_ms", "tpot_ms", "e2e_ms", "decode_span_ms"):
        assert _is_q(s[k]), k
    assert s["ttft_ms"]["count"] == 100 and s["ttft_ms"]["max"] == pytest.approx(359.0)  # warm-up's 5 s left out
    assert s["slo"] == {"passed": True, "checks": []}
    assert s["goodput_rps"] == pytest.approx(100 / s["duration_s"])  # no SLOs: every ok request is good
    assert set(s["server"]) >= {"kv_cache_usage", "requests_waiting_max", "preemptions", "metric_names"}
    assert s["server"]["metric_names"] == "none"
    assert s["versions"] == {} and "attribution" not in s and "saturation" not in s  # not installed here
    assert s["client_kv_block_fill"]["mean"] == pytest.approx(620 / 640)  # (512+8) + 100 in 33 + 7 blocks
    assert (
        set(s["histograms"]["ttft"]) == {"edges_ms", "counts", "count"}
        and sum(s["histograms"]["ttft"]["counts"]) == 100
    )
    assert s["timeseries"]["window_s"] == 10.0 and sum(w["requests"] for w in s["timeseries"]["client"]) == 106


def test_stage_rows_from_the_board(run):
    env, hub, role = run
    role.pump_local()
    stages = hub.summary()["stages"]
    assert [st["name"] for st in stages] == ["warm", "users=2", "users=4"]
    for st in stages:
        for key, types in STAGE.items():
            assert isinstance(st[key], types), (key, st[key])
        assert st["end_s"] >= st["start_s"]
    assert stages[0]["end_s"] == stages[1]["start_s"] and stages[1]["end_s"] == stages[2]["start_s"]
    two, four = stages[1], stages[2]
    assert two["requests"] == 41 and two["ttft_ms"]["count"] == 40 and two["prompt_tokens_mean"] == 512
    assert two["itl_ms"]["p50"] == pytest.approx(10, rel=0.01) and four["itl_ms"]["p50"] == pytest.approx(20, rel=0.01)
    assert four["input_len"] == "zipf:1.2:16:4096" and two["input_len"] == "fixed:512"
    assert four["client_kv_block_fill"] == pytest.approx(620 / 640) and two["client_kv_block_fill"] is None


def test_sections_override_defaults_and_a_broken_one_is_contained(run):
    env, hub, role = run
    hub.hooks.add_section("saturation", lambda view, summary: {"stage": "users=4", "reason": "flat"},
                          empty=lambda _view: {"stage": None, "reason": "not yet"})
    hub.hooks.add_section("versions", lambda view, summary: 1 / 0, empty=lambda _view: {})
    s = hub.summary()
    assert s["saturation"] == {"stage": "users=4", "reason": "flat"}
    assert "ZeroDivisionError" in s["versions"]["error"]


def test_the_owners_empty_sections_hold_what_the_schema_requires(run):
    env, hub, role = run
    schema = json.loads((Path(__file__).resolve().parents[2] / "docs" / "summary.schema.json").read_text())
    schema = schema["properties"]
    assert set(schema["attribution"]["required"]) <= set(empty_attribution(hub.view()))
    assert set(schema["saturation"]["required"]) <= set(NO_SATURATION) and NO_SATURATION["stage"] is None


def test_each_section_brings_its_empty_value_and_place(run):
    """The summary builder knows no section: each key comes from its owner's registration, holds the owner's empty
    value until its provider runs (a section sees a later one's empty value), and sits after ``workers_lost``."""
    env, hub, role = run
    seen = {}
    hub.hooks.add_section("first", lambda view, summary: seen.setdefault("second", summary["second"]),
                          empty=lambda _view: "first empty")
    hub.hooks.add_section("second", lambda view, summary: {"filled": True}, empty=lambda view: {"w": view.worker_count})
    s = hub.summary()
    assert seen["second"] == {"w": s["workers"]} and s["second"] == {"filled": True}
    keys = list(s)
    assert keys.index("workers_lost") < keys.index("first") < keys.index("second") < keys.index("timeseries")
    assert "saturation" not in s  # the shapes package (which owns it) is not installed here


def test_sinks_json_csv_and_on_summary(run, tmp_path, capsys):
    env, hub, role = run
    env.parsed_options.llm_summary_json = str(tmp_path / "out" / "summary.json")
    env.parsed_options.llm_csv = str(tmp_path / "csv" / "run")
    seen = []
    hub.hooks.on_summary(lambda s: 1 / 0)  # a broken sink does not stop the next
    hub.hooks.on_summary(seen.append)
    role.on_quitting()
    saved = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert saved["requests"]["total"] == 101 and seen and seen[0]["requests"] == saved["requests"]
    rows = list(csv.DictReader(open(tmp_path / "csv" / "run_llm_stats.csv")))
    ttft_all = next(r for r in rows if r["scope"] == "all" and r["metric"] == "ttft")
    assert float(ttft_all["p99_ms"]) == pytest.approx(saved["ttft_ms"]["p99"])
    stages = list(csv.DictReader(open(tmp_path / "csv" / "run_llm_stages.csv")))
    assert [r["name"] for r in stages] == ["warm", "users=2", "users=4"] and stages[2]["requests"] == "60"
    assert "server_kv_usage_max" in stages[2] and "server_kv_usage_mean" in stages[2]
    out = capsys.readouterr().out
    assert "TTFT" in out and "users=4" in out and "stream_cut 1" in out


def test_windows_split_by_time(run):
    env, hub, role = run
    now = time.perf_counter()
    hub.merger.t0_wall = time.time() - 30.0
    fire(env, make_result(ttft=0.5, end=now - 25.0))
    role.pump_local()
    ws = hub.view().windows(10.0)
    assert [w.start_s for w in ws][:3] == [0.0, 10.0, 20.0]
    assert ws[0].sketches["ttft"].count == 1 and ws[0].requests == 1
    assert sum(w.requests for w in ws) == 107 and sum(w.requests for w in ws[2:]) == 106  # 1 s slots


def test_a_short_last_window_is_folded_into_the_one_before(run):
    env, hub, role = run
    role.pump_local()
    hub.merger.t0_wall = time.time() - 30.05  # every result of the run ended in its last 0.05 s
    client = hub.summary()["timeseries"]["client"]
    assert [(w["start_s"], round(w["end_s"])) for w in client] == [(0.0, 10), (10.0, 20), (20.0, 30)]
    last = client[-1]
    tokens = last["output_tokens"]
    assert tokens >= 40 * 20 + 60 * 10  # the run's (and its warm-up's) tokens
    # its tokens over the 10.05 s window (~155 tok/s), not over a 0.05 s one (31,000 tok/s)
    assert last["output_per_s"] == pytest.approx(tokens / (last["end_s"] - 20.0)) and last["output_per_s"] < 200
    # a tail of half a window or more stays a window of its own
    hub.merger.t0_wall = time.time() - 35.5
    assert [w["start_s"] for w in hub.summary()["timeseries"]["client"]] == [0.0, 10.0, 20.0, 30.0]


def test_live_rows_per_stage(run):
    env, hub, role = run
    role.pump_local()

    def users4_span() -> float:  # the open last stage's span so far, as a view taken now reads it
        return next(end - start for st, start, end in hub.view().stage_spans() if st.name == "users=4")

    before = users4_span()
    live = hub.live()
    after = users4_span()
    row = {r["stage"]: r for r in live["stages"]}["users=4"]
    assert row["requests"] == 60
    assert row["ttft_p50_ms"] == pytest.approx(330, rel=0.01) and row["itl_p99_ms"] == pytest.approx(20, rel=0.01)
    # what was delivered while the stage ran, as the summary's stage throughput (every result ended in this second,
    # so over a span inside it the rate is that second's tokens)
    assert before <= after and row["output_tok_s"] == pytest.approx(hub.summary()["stages"][-1]["output_per_s"],
                                                                     rel=0.05)
    assert live["client_kv_block_fill"] == pytest.approx(620 / 640)
    # each stage's own KV figures: the client fill sampled in it, the mean of the server scrapes in its span
    assert row["client_kv_block_fill"] == pytest.approx(620 / 640)
    two = {r["stage"]: r for r in live["stages"]}["users=2"]
    assert two["client_kv_block_fill"] is None and two["server_kv_usage"] is None  # no sample, no scrape: None
    spans = {st.name: (start, end) for st, start, end in hub.view().stage_spans()}
    a, b = spans["users=2"]
    hub.merger.scraper = SimpleNamespace(series=[{"t": a + 0.1 * (b - a), "kv_cache_usage": 0.2},
                                                 {"t": a + 0.6 * (b - a), "kv_cache_usage": 0.4},
                                                 {"t": spans["users=4"][0] + 0.01, "kv_cache_usage": 0.9}],
                                         latest=None, metric_names="vllm", successes=3, failures=0,
                                         stop=lambda **_kw: None, target_states=list)
    rows = {r["stage"]: r for r in hub.live()["stages"]}
    assert rows["users=2"]["server_kv_usage"] == pytest.approx(0.3) and rows["users=4"]["server_kv_usage"] == 0.9


def test_worker_reports_over_msgpack_merge_like_one_process():
    env, hub, role = local_env()
    role.on_test_start()
    workers = [Recorder(), Recorder()]
    single = Recorder()
    for i in range(200):
        r = make_result(ttft=0.05 + 0.0005 * i, itl=0.01, tokens=8)
        workers[i % 2].record(r)
        single.record(r)
    master = MasterRole(env, hub)  # the master's handler, over the same hub (not registered on events)
    for n, w in enumerate(workers):
        data = {"llm": w.take(), "stats": []}
        master.on_worker_report(client_id=f"w{n}", data=msgpack.unpackb(msgpack.packb(data)))
    master.on_worker_report(client_id="w9", data={"llm": {"v": 1, "junk": True}})  # dropped with a line
    s = hub.summary()
    assert s["workers"] == 2 and s["requests"]["total"] == 200
    one = single.merged_sketch(list(single.cells.values()), "ttft")
    assert s["ttft_ms"]["p50"] == pytest.approx(one.quantile(0.5) * 1000, rel=1e-12)
    role.close()


def test_server_series_feed_the_server_section_and_stage_rows(run):
    env, hub, role = run
    role.pump_local()
    spans = [(st["start_s"], st["end_s"]) for st in hub.summary()["stages"]]
    four_start, four_end = spans[2]
    mid = (four_start + four_end) / 2

    class FakeScraper:
        target_states = staticmethod(list)
        metric_names = "vllm-v1"
        successes, failures = 3, 1
        series = [
            {"t": four_start - 1e-3, "kv_cache_usage": 0.2, "requests_waiting": 0, "preemptions_total": 5.0,
             "request_success_total": 10.0, "generation_tokens_total": 100.0, "prompt_tokens_total": 1000.0},
            {"t": mid, "kv_cache_usage": 0.9, "requests_waiting": 7, "preemptions_total": 8.0,
             "request_success_total": 30.0, "generation_tokens_total": 700.0, "prompt_tokens_total": 3000.0},
        ]
        latest = series[-1]

    hub.merger.scraper = FakeScraper()
    hub.merger.t_end_wall = hub.merger.t0_wall + four_end
    s = hub.summary()
    srv = s["server"]
    assert srv["kv_cache_usage"] == {"mean": pytest.approx(0.55), "max": 0.9}
    assert srv["requests_waiting_max"] == 7 and srv["preemptions"] == 3 and srv["metric_names"] == "vllm-v1"
    assert srv["requests_succeeded"] == 20 and srv["generation_tokens"] == 600 and srv["scrape_failures"] == 1
    four = s["stages"][2]
    assert four["server_kv_usage_mean"] == pytest.approx(0.9) and four["preemptions"] == 3
    assert s["timeseries"]["server"] == FakeScraper.series
    hub.merger.scraper = None


def test_stage_server_kv_usage_mean_and_max(run):
    env, hub, role = run
    role.pump_local()
    four_start = hub.summary()["stages"][2]["start_s"]

    class FakeScraper:
        target_states = staticmethod(list)
        metric_names = "vllm-v1"
        successes, failures = 3, 0
        series = [{"t": four_start - 1e-3, "kv_cache_usage": 0.99},  # before the stage: in neither figure
                  {"t": four_start + 1e-3, "kv_cache_usage": 0.3},
                  {"t": four_start + 2e-3, "kv_cache_usage": 0.7}]
        latest = series[-1]

    hub.merger.scraper = FakeScraper()
    hub.merger.t_end_wall = hub.merger.t0_wall + four_start + 1.0
    four = hub.summary()["stages"][2]
    hub.merger.scraper = None
    assert four["server_kv_usage_mean"] == pytest.approx(0.5) and four["server_kv_usage_max"] == pytest.approx(0.7)


def test_a_stages_throughput_is_what_was_delivered_while_it_ran():
    from types import SimpleNamespace

    slots = {100: SimpleNamespace(output_tokens=100), 101: SimpleNamespace(output_tokens=300),
             102: SimpleNamespace(output_tokens=50)}
    view = SimpleNamespace(merged=SimpleNamespace(slots=slots), slot_s=1.0, t0_wall=100.0)
    delivered = RunView.delivered_tokens
    assert delivered(view, 0.0, 3.0) == pytest.approx(450.0)
    # [0.5, 1.5): half of the first second's 100 and half of the second's 300
    assert delivered(view, 0.5, 1.5) == pytest.approx(200.0)
    assert delivered(view, 3.0, 9.0) == 0.0


def test_last_stage_ends_when_the_shape_closed_the_board(run):
    env, hub, role = run
    role.pump_local()
    board = env.llm.stage_board
    board.close()
    closed_s = board.closed_at[0] - hub.merger.t0_wall
    hub.merger.t_end_wall = board.closed_at[0] + 2.0  # the process took 2 s more to stop
    s = hub.summary()
    last = s["stages"][-1]
    assert last["end_s"] == pytest.approx(closed_s) and s["duration_s"] == pytest.approx(closed_s + 2.0)
    span = last["end_s"] - last["start_s"]
    # what was delivered while it ran (every result ended in this last second, slots pro-rated) over its own span
    assert last["output_per_s"] == pytest.approx(hub.view().delivered_tokens(last["start_s"], last["end_s"]) / span)
    board.closed_at = None  # not closed: the last stage runs to the end of the run
    assert hub.summary()["stages"][-1]["end_s"] == pytest.approx(closed_s + 2.0)


def test_model_is_the_one_the_users_sent():
    env, hub, role = local_env(model=None)  # no --model: the users resolve it from /v1/models
    role.on_test_start()
    attach(env).settings = type("Settings", (), {"model": "deepseek-v2-lite"})()
    fire(env, make_result())
    role.pump_local()
    assert hub.summary()["model"] == "deepseek-v2-lite"
    # a worker ships its users' model with its report; the master names every model sent
    data: dict = {}
    WorkerRole(env, hub).on_report_to_master(client_id="w1", data=data)
    assert data["llm"]["model"] == "deepseek-v2-lite"
    data["llm"]["model"] = "deepseek-v3"
    MasterRole(env, hub).on_worker_report(client_id="w1", data=msgpack.unpackb(msgpack.packb(data)))
    assert hub.summary()["model"] == "deepseek-v2-lite, deepseek-v3"
    role.close()


def test_model_falls_back_to_the_option_when_the_users_resolved_none():
    env, hub, role = local_env(model="from-option")
    role.on_test_start()
    attach(env).settings = type("Settings", (), {"model": None})()
    role.pump_local()
    assert hub.summary()["model"] == "from-option"
    role.close()
