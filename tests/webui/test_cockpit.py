"""The web UI's live charts page, its data, the tab script and the downloads (issue #19), on a real Environment
with telemetry installed (Flask's test client); the sweep's ``progress()`` against a fake clock."""

from __future__ import annotations

import csv
import io
import json
import re
import sys

import pytest

from shapes.plugin import install as install_shapes
from shapes.sweep import ConcurrencySweepShape
from telemetry.outputs.sinks import stages_rows, stats_rows
from telemetry.plugin import install as install_telemetry
from tests.shapes.fakes import sweep_shape
from tests.telemetry.helpers import _Nobody, fire, options
from tests.telemetry.synthetic import make_result
from webui.charts import ChartsPage
from webui.plugin import install


def _env(monkeypatch, **opts):
    from locust.env import Environment

    monkeypatch.setattr(sys, "argv", ["locust"])
    environment = Environment(user_classes=[_Nobody], host="http://127.0.0.1:9")
    environment.create_local_runner()
    environment.create_web_ui("127.0.0.1", 0, delayed_start=True)
    environment.parsed_options = options(headless=False, **opts)
    install_shapes(environment)
    role = install_telemetry(environment)
    install(environment)
    return environment, role


@pytest.fixture
def env(monkeypatch):
    environment, role = _env(monkeypatch)
    role.on_test_start()
    for i in range(5):
        fire(environment, make_result(ttft=0.1 + 0.01 * i))
    role.pump_local()
    yield environment
    role.close()
    environment.runner.quit()


def test_charts_page_is_offline_and_its_data_has_the_stage_view(env):
    client = env.web_ui.app.test_client()
    page = client.get("/llm/charts")
    assert page.status_code == 200 and page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # nothing from anywhere else
    assert "./charts/data" in html and "<svg" not in html  # the charts come from the data route
    data = client.get("/llm/charts/data")
    assert data.status_code == 200 and data.mimetype == "application/json"
    d = data.get_json()
    assert d["status"]["requests"] == 5 and d["status"]["stage"] == "main" and d["status"]["progress"] is None
    assert 'data-key="stage"' in d["status_html"] and "no knee yet" in d["status_html"]
    assert all(f["svg"].startswith("<svg") for f in d["figures"])


def test_locust_page_loads_the_tab_script(env):
    from flask import Response

    app = env.web_ui.app
    client = app.test_client()
    with app.test_request_context("/"):  # Locust's index (its real page: the Chromium test)
        page = ChartsPage.add_script(Response("<html><body><div id=root></div></body></html>", mimetype="text/html"))
        index = page.get_data(as_text=True)
        assert ChartsPage.add_script(page).get_data(as_text=True) == index  # once
    assert index.endswith('<script src="./llm/cockpit.js"></script></body></html>')
    with app.test_request_context("/llm/charts"):
        other = ChartsPage.add_script(Response("<html><body></body></html>", mimetype="text/html"))
        assert "cockpit.js" not in other.get_data(as_text=True)
    js = client.get("/llm/cockpit.js")
    assert js.status_code == 200 and js.mimetype == "text/javascript"
    assert "./llm/charts?embed=1" in js.get_data(as_text=True)


def test_downloads_answer_with_their_content_type_and_the_files_content(env):
    client = env.web_ui.app.test_client()
    s = client.get("/llm/summary.json")
    assert s.status_code == 200 and s.mimetype == "application/json"
    assert "attachment" in s.headers["Content-Disposition"]
    summary = json.loads(s.get_data())
    assert summary["requests"]["total"] == 5
    for route, rows in (("/llm/stats.csv", stats_rows), ("/llm/stages.csv", stages_rows)):
        r = client.get(route)
        assert r.status_code == 200 and r.mimetype == "text/csv"
        got = list(csv.reader(io.StringIO(r.get_data(as_text=True))))
        assert got[0] == [str(c) for c in rows(summary)[0]] and len(got) == len(rows(summary))
    titles = [f["title"] for f in env.web_ui.template_args["extendedCsvFiles"]]
    assert "LLM summary (JSON, --llm-summary-json)" in titles and "LLM stats (CSV, --llm-csv)" in titles
    assert not any("JSONL" in t for t in titles)  # --llm-requests-jsonl not set: not offered
    missing = client.get("/llm/requests.jsonl")
    assert missing.status_code == 404 and "--llm-requests-jsonl is not set" in missing.get_data(as_text=True)


def test_option_files_are_offered_and_served_when_set(monkeypatch, tmp_path):
    jsonl, bench = tmp_path / "req.jsonl", tmp_path / "bench.json"
    environment, role = _env(monkeypatch, llm_requests_jsonl=str(jsonl), vllm_bench_json=str(bench))
    try:
        client = environment.web_ui.app.test_client()
        hrefs = {f["href"] for f in environment.web_ui.template_args["extendedCsvFiles"]}
        assert {"./llm/requests.jsonl", "./llm/vllm-bench.json"} <= hrefs
        assert client.get("/llm/requests.jsonl").status_code == 404  # not written yet
        jsonl.write_text('{"a": 1}\n{"a": 2}\n')
        bench.write_text('{"completed": 2}')
        r = client.get("/llm/requests.jsonl")
        assert r.status_code == 200 and r.mimetype == "application/x-ndjson" and r.get_data() == jsonl.read_bytes()
        b = client.get("/llm/vllm-bench.json")
        assert b.status_code == 200 and b.mimetype == "application/json" and b.get_json() == {"completed": 2}
    finally:
        role.close()
        environment.runner.quit()


def test_sweep_progress_says_the_phase_and_the_time_left():
    shape, clock, runner = sweep_shape(ConcurrencySweepShape, sweep_users="1,4", stage_duration="10", stage_warmup="2")
    assert shape.progress() is None
    shape.tick()
    p = shape.progress()
    assert (p["step"], p["steps"], p["stage"], p["users"], p["phase"], p["left_s"]) == (1, 2, "users=1", 1, "settle",
                                                                                        None)
    runner.user_count = 1
    shape.tick()
    clock.t += 2
    shape.tick()  # warm-up over: measuring
    clock.t += 3
    p = shape.progress()
    assert p["phase"] == "hold" and p["phase_s"] == 3 and p["left_s"] == 7 and p["phase_len_s"] == 10


def test_windows_still_filling_are_not_drawn_while_the_run_goes():
    from webui.charts import SETTLE_S, settled

    windows = [{"start_s": float(i), "end_s": float(i + 1)} for i in range(10)]
    s = {"duration_s": 10.0, "timeseries": {"window_s": 1.0, "client": windows, "server": [{"t": 9.5}]}}
    live = settled(s, final=False)["timeseries"]
    assert [w["end_s"] for w in live["client"]] == [float(e) for e in range(1, int(10 - SETTLE_S) + 1)]
    assert live["server"] == [{"t": 9.5}] and s["timeseries"]["client"] == windows  # a copy; the scrapes stay
    after = settled(s, final=True)["timeseries"]["client"]  # the last window is the one the stop cut
    assert after == windows[:-1] and after[-1]["end_s"] == 9.0


def test_a_stopped_web_run_does_not_draw_the_window_its_stop_cut():
    """Stopping users mid-request loses their tokens: the stop's window reads far below the run's rate (the line
    dropped towards 0 after a web run stopped). The live throughput line ends at the last window under load."""
    from telemetry.outputs.report.timeline import throughput_timeline
    from webui.charts import settled

    rates = [600.0, 610.0, 590.0, 605.0, 80.0]  # the last: cut by the stop
    windows = [{"start_s": float(i), "end_s": float(i + 1), "requests": 20, "output_per_s": r}
               for i, r in enumerate(rates)]
    s = {"duration_s": 5.0, "timeseries": {"window_s": 1.0, "client": windows, "server": []}}
    drawn = settled(s, final=True)
    assert [w["output_per_s"] for w in drawn["timeseries"]["client"]] == rates[:-1]
    svg = throughput_timeline(drawn)
    assert svg and ">80<" not in svg
    two = {**s, "timeseries": {**s["timeseries"], "client": windows[:2]}}
    assert settled(two, final=True)["timeseries"]["client"] == windows[:2]  # a line needs two points: kept


def test_a_web_run_shows_its_slo_verdict_in_the_stage_view_and_the_log(monkeypatch, caplog):
    environment, role = _env(monkeypatch, slo_ttft_p99_ms=50.0, slo_itl_p95_ms=500.0)
    try:
        role.on_test_start()
        for i in range(5):
            fire(environment, make_result(ttft=0.1 + 0.01 * i))  # TTFT p99 ~140 ms > 50
        with caplog.at_level("INFO"):
            role.on_test_stop()
        assert any(r.levelname == "ERROR" and r.getMessage().startswith("SLO FAILED: ttft_p99_ms 1")
                   and "itl_p95_ms" in r.getMessage() for r in caplog.records)
        html = environment.web_ui.app.test_client().get("/llm/charts/data").get_json()["status_html"]
        card = re.search(r'data-key="SLO">.*?class="v">([^<]*)</div><div class="s">([^<]*)<', html)
        assert card is not None and card.group(1) == "FAILED" and "ttft_p99_ms" in card.group(2)
    finally:
        role.close()
        environment.runner.quit()


def test_no_slo_says_so_and_logs_nothing(monkeypatch, caplog):
    environment, role = _env(monkeypatch, slo_preset="none")
    try:
        role.on_test_start()
        fire(environment, make_result(ttft=0.1))
        with caplog.at_level("INFO"):
            role.on_test_stop()
        html = environment.web_ui.app.test_client().get("/llm/charts/data").get_json()["status_html"]
        assert re.search(r'data-key="SLO">.*?class="v">none<', html)
        assert not any(r.getMessage().startswith("SLO ") for r in caplog.records)
    finally:
        role.close()
        environment.runner.quit()


def test_over_time_charts_show_12_s_into_a_run_with_the_default_windows(monkeypatch):
    import time

    from webui.charts import live_window

    assert live_window(10.0, 10.0) == 2.0 and live_window(60.0, 10.0) == 10.0 and live_window(3.0, 1.0) == 1.0
    environment, role = _env(monkeypatch)  # --attribution-window 10 (the default)
    try:
        role.on_test_start()
        hub = environment.llm.telemetry
        hub.merger.t0_wall = time.time() - 12.0  # 12 s into the run
        now = time.perf_counter()
        for i in range(22):  # ends at 0.2 .. 10.7 s: 1.3 s from the next window, so a paused box moves none across
            fire(environment, make_result(ttft=0.1, end=now - 11.8 + 0.5 * i))
        role.pump_local()
        assert hub.summary()["timeseries"]["window_s"] == 10.0  # the summary keeps the run's windows
        environment.runner.state = "running"  # while it runs, the last 2 s (SETTLE_S) are not drawn
        figures = {f["id"]: f["svg"] for f in ChartsPage(environment).data()["figures"]}
        assert {"latency", "throughput"} <= set(figures), sorted(figures)
        assert "Throughput per 2 s window" in figures["throughput"]
        # a web run that stopped has no final summary: every window but the one the stop cut (here the 10-12 s one,
        # which the running view left out as still filling)
        environment.runner.state = "stopped"
        after = {f["id"]: f["svg"] for f in ChartsPage(environment).data()["figures"]}
        assert after["throughput"].count("<circle") == figures["throughput"].count("<circle") == 2 * 5
    finally:
        environment.runner.state = "ready"
        role.close()
        environment.runner.quit()


def test_a_finished_sweep_shows_its_stages_and_the_batching_verdict():
    from webui.charts import stage_html, stage_view

    summary = {"stages": [{"name": "warmup users=1", "warmup": True}, {"name": "users=1"}, {"name": "users=2"}],
               "attribution": {"batching_failure": {"verdict": False, "baseline": {"batch_size_median": 1.0}}}}
    live = {"stages": [{"stage": "users=2", "requests": 40}],
            "detectors": {"batching": {"judged": False}, "slo": []}}
    html = stage_html(stage_view(None, live, summary, 0, "stopped", sweep=True))
    assert "sweep stopped" in html and "2 stage(s) measured: users=1, users=2" in html and "no sweep shape" not in html
    assert ">batching ok<" in html and "last live check: batching pending" in html
    running = stage_html(stage_view(None, live, summary, 2, "running", sweep=False))
    assert "no sweep shape" in running and "batching pending" in running and "batching ok" not in running
    summary["attribution"]["batching_failure"] = {"verdict": True, "failed_at_s": 42.0, "baseline": {}}
    assert ">batching FAILED from 42 s<" in stage_html(stage_view(None, live, summary, 0, "stopped", sweep=True))


def test_an_accepted_start_is_spawning_not_ready_while_test_start_runs(monkeypatch):
    """Locust's page, polling the stats while the test_start listeners run (model, tokenizer: ~2 s with the runner
    still "ready"), took the run for not started and showed the start form for the whole run."""
    from flask import jsonify

    from webui.plugin import LLMTab

    environment, role = _env(monkeypatch)
    try:
        tab = LLMTab(environment)
        app = environment.web_ui.app

        def stats(state: str) -> str:
            with app.test_request_context("/stats/requests"):
                return tab._add_rows(jsonify({"state": state, "extended_stats": []})).get_json()["state"]

        assert stats("ready") == "ready"  # nothing started
        with app.test_request_context("/swarm", method="POST"):
            tab._add_rows(jsonify({"success": True, "message": "Swarming started"}))
        assert stats("ready") == "spawning" and stats("ready") == "spawning"
        assert stats("running") == "running" and stats("ready") == "ready"  # once it moved on, "ready" is true again
        with app.test_request_context("/swarm", method="POST"):
            tab._add_rows(jsonify({"success": False, "message": "--input-len: ..."}))
        assert stats("ready") == "ready"  # a refused start
    finally:
        role.close()
        environment.runner.quit()


def test_a_capacity_search_shows_its_probes_live(monkeypatch):
    """The probes judged so far, from the search's own record (the summary's capacity.probes): the stage view's card
    and the charts of each SLO against load and the Pareto view, with the probe's values."""
    from shapes.search import SloSearchShape, search_config

    environment, role = _env(monkeypatch, shape="slo-search", search_users="2:5", slo_ttft_p99_ms=300.0)
    try:
        role.on_test_start()
        shape = environment.shape_class = SloSearchShape()
        shape._config = search_config(environment.parsed_options)
        shape.search = shape._config.search()
        for n, users, ttft, passed in ((1, 2, 45.7, True), (2, 4, 540.6, False)):
            shape.search.record(float(users), passed)
            shape.record.append({"probe": n, "load": float(users), "stage": f"probe {n} users={users}",
                                 "users": users, "rate": None, "passed": passed, "early_stop": None,
                                 "complete": True, "requests": 10, "errors": 0, "goodput_rps": 1.0,
                                 "output_per_s": 100.0 * users, "span_s": 2.0, "energy_j": None, "energy_note": None,
                                 "checks": [{"name": "ttft_p99_ms", "threshold": 300.0, "value": ttft,
                                             "passed": passed}]})
        environment.runner.state = "running"  # the search goes on
        d = environment.web_ui.app.test_client().get("/llm/charts/data").get_json()
        assert [p["stage"] for p in d["status"]["capacity"]["probes"]] == ["probe 1 users=2", "probe 2 users=4"]
        card = re.search(r'data-key="capacity search">.*?class="v">([^<]*)</div><div class="s">([^<]*)<',
                         d["status_html"])
        assert card is not None and card.groups() == ("probe 2 users=4: breached", "2 of at most 12 probes judged")
        figures = {f["id"]: f["svg"] for f in d["figures"] if f["id"].startswith("capacity")}
        assert len(figures) == 2  # TTFT p99 against load, the Pareto view
        assert "probe 2 users=4: ttft_p99_ms 540.6 (breached)" in figures["capacity-0"]
        assert "probe 1 users=2: 100 tok/s per user, 200 tok/s per GPU" in figures["capacity-1"]
    finally:
        role.close()
        environment.runner.quit()
