"""webui.plugin on a real Locust Environment + WebUI (Flask test client, no socket, no browser)."""

from __future__ import annotations

import csv
import io
import json
import re
import sys

import pytest
from locust import User, constant, task
from locust.env import Environment

from run.context import attach
from webui.plugin import REPORT_HREF, install
from webui.table import STRUCTURE, TAB_KEY


class _Idle(User):
    wait_time = constant(1)

    @task
    def nothing(self):
        pass


class FakeHub:
    """Stands in for telemetry's hub: live() returns whatever the test sets."""

    def __init__(self, live: dict | None = None, error: Exception | None = None):
        self.value = live or {}
        self.error = error
        self.calls = 0

    def live(self) -> dict:
        self.calls += 1
        if self.error:
            raise self.error
        return self.value


def stage(name: str, requests: int, ttft_p50: float, ttft_p99: float) -> dict:
    return {"stage": name, "requests": requests, "ttft_p50_ms": ttft_p50, "ttft_p99_ms": ttft_p99}


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["locust"])  # the web UI re-parses sys.argv for its extra options
    environment = Environment(user_classes=[_Idle])
    environment.create_local_runner()
    web_ui = environment.create_web_ui("127.0.0.1", 0, delayed_start=True)
    yield environment
    assert web_ui.server is None  # never started: the test client needs no socket
    environment.runner.quit()


def _stats(client) -> dict:
    r = client.get("/stats/requests")
    assert r.status_code == 200
    return r.get_json()


def test_tab_table_and_links_are_declared_in_template_args(env):
    install(env)
    args = env.web_ui.template_args
    assert {"title": "LLM", "key": TAB_KEY} in args["extendedTabs"]
    assert {"key": TAB_KEY, "structure": STRUCTURE} in args["extendedTables"]
    assert REPORT_HREF in [f["href"] for f in args["extendedCsvFiles"]]
    # they survive Locust's own refresh and reach the page
    html = env.web_ui.app.test_client().get("/").get_data(as_text=True)
    args_json = json.loads(re.search(r"window\.templateArgs = (\{.*\})", html).group(1))
    assert args_json["extendedTabs"][-1] == {"title": "LLM", "key": TAB_KEY}


def test_stats_payload_carries_live_rows_and_follows_changes(env):
    hub = FakeHub({"stages": [stage("users=4", 7, 90.0, 300.0)], "server_kv_usage": 0.5})
    attach(env).telemetry = hub
    install(env)
    client = env.web_ui.app.test_client()
    payload = _stats(client)
    assert "stats" in payload and "errors" in payload  # Locust's own fields are untouched
    (entry,) = [e for e in payload["extended_stats"] if e["key"] == TAB_KEY]
    assert [r["stage"] for r in entry["data"]] == ["users=4", "now"]
    assert entry["data"][0]["ttft_p99"] == "300.0"
    assert entry["data"][1]["users"] == "0"  # Locust's own user count (nothing spawned here)
    assert entry["data"][1]["server_kv"] == "50.0%"
    hub.value = {"stages": [stage("users=4", 7, 90.0, 300.0), stage("users=8", 3, 95.0, 350.0)]}
    rows = client.get("/llm/live").get_json()["rows"]
    assert [r["stage"] for r in rows] == ["users=4", "users=8", "now"] and rows[-1]["requests"] == "10"


def test_stage_rows_show_the_users_the_shape_planned(env):
    from shapes.stage import Stage, StageBoard

    board = StageBoard()
    board.set(Stage("users=4", index=0, users=4))
    board.set(Stage("users=8", index=1, users=8))
    attach(env).stage_board = board
    attach(env).telemetry = FakeHub({"stages": [stage("users=4", 7, 90.0, 300.0), stage("users=8", 1, 99.0, 99.0)]})
    install(env)
    rows = env.web_ui.app.test_client().get("/llm/live").get_json()["rows"]
    assert [(r["stage"], r["users"]) for r in rows[:2]] == [("users=4", "4"), ("users=8", "8")]


def test_a_running_stage_without_a_plan_shows_the_current_users(env, monkeypatch):
    attach(env).telemetry = FakeHub({"stages": [stage("main", 7, 90.0, 300.0)]})
    install(env)
    client = env.web_ui.app.test_client()
    assert client.get("/llm/live").get_json()["rows"][0]["users"] == "—"  # stopped: no count claimed
    monkeypatch.setattr(type(env.runner), "user_count", property(lambda self: 3))
    env.runner.state = "running"
    assert client.get("/llm/live").get_json()["rows"][0]["users"] == "3"


def test_hub_errors_leave_the_stats_page_working(env, caplog):
    attach(env).telemetry = FakeHub(error=RuntimeError("boom"))
    install(env)
    payload = _stats(env.web_ui.app.test_client())
    assert payload["extended_stats"] == [{"key": TAB_KEY, "data": []}]
    assert "live() failed" in caplog.text


def test_without_hub_the_tab_is_empty(env):
    install(env)
    payload = _stats(env.web_ui.app.test_client())
    assert payload["extended_stats"] == [{"key": TAB_KEY, "data": []}]


def test_live_json_and_csv_routes(env):
    attach(env).telemetry = FakeHub({"stages": [{"stage": "main", "itl_p99_ms": 30.0, "output_tok_s": 123.45}]})
    install(env)
    client = env.web_ui.app.test_client()
    body = client.get("/llm/live").get_json()
    assert body["live"]["stages"][0]["output_tok_s"] == 123.45
    assert body["rows"][0]["itl_p99"] == "30.0"
    r = client.get("/llm/live.csv")
    assert r.status_code == 200 and r.mimetype == "text/csv"
    header, first, now = list(csv.reader(io.StringIO(r.get_data(as_text=True))))
    assert now[0] == "now"
    assert header[0] == "Stage" and first[0] == "main"
    assert first[header.index("Output tok/s")] == "123.5"


def test_other_routes_are_not_rewritten(env):
    attach(env).telemetry = FakeHub({"stages": [stage("main", 1, 1.0, 2.0)]})
    install(env)
    body = env.web_ui.app.test_client().get("/tasks").get_json()
    assert "extended_stats" not in body


def test_no_web_ui_no_tab():
    environment = Environment(user_classes=[_Idle])
    install(environment)  # headless / worker: nothing to do, and no error
    assert environment.web_ui is None


def _options():
    from locust.argument_parser import parse_options

    opts = parse_options(args=["--headless"])  # Locust's own defaults
    for name, value in (("slo_ttft_p99_ms", None), ("slo_itl_p95_ms", None), ("llm_report", None),
                        ("input_len", "fixed:512")):
        setattr(opts, name, value)  # as the project's options register them
    return opts


FORM = {"user_count": "1", "spawn_rate": "1", "slo_ttft_p99_ms": "", "slo_itl_p95_ms": "120", "llm_report": "",
        "input_len": "fixed:64"}


@pytest.mark.parametrize("with_plugin", [True, False])
def test_empty_start_form_fields_leave_unset_options_unset(monkeypatch, with_plugin):
    monkeypatch.setattr(sys, "argv", ["locust"])
    environment = Environment(user_classes=[_Idle], parsed_options=_options())
    environment.create_local_runner()
    environment.create_web_ui("127.0.0.1", 0, delayed_start=True)
    if with_plugin:
        install(environment)
    try:
        body = environment.web_ui.app.test_client().post("/swarm", data=FORM).get_json()
        assert body["success"], body
        opts = environment.parsed_options
        assert opts.slo_itl_p95_ms == "120" and opts.input_len == "fixed:64"  # given values still arrive
        if with_plugin:
            assert opts.slo_ttft_p99_ms is None and opts.llm_report is None
        else:  # what Locust alone does, and why the plugin steps in
            assert opts.slo_ttft_p99_ms == "" and opts.llm_report == ""
    finally:
        environment.runner.quit()
