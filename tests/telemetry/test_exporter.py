"""Prometheus exporter: the README's names/labels from merged state, quantile gauges, relayed server gauges, HTTP."""

from __future__ import annotations

import logging
import socket
import urllib.request

import pytest

from telemetry.outputs.exporter import Exporter
from tests.telemetry.helpers import fire, local_env
from tests.telemetry.synthetic import make_result


@pytest.fixture
def hub():
    env, hub, role = local_env()
    role.on_test_start()
    for i in range(50):
        fire(env, make_result(ttft=0.051 + 0.002 * i, itl=0.004, tokens=10, stage="s1"))
    fire(env, make_result(ok=False, error_kind="http_5xx", stage="s1"))
    fire(env, make_result(ttft=3.0, itl=0.02, tokens=5, stage="s2", user_class="Batch"))
    role.pump_local()
    yield hub
    role.close()


def test_histograms_counters_and_quantiles(hub):
    reg = Exporter(hub.view, port=0).registry
    s1 = {"user_class": "SynthUser", "stage": "s1"}
    assert reg.get_sample_value("llm_time_to_first_token_seconds_count", s1) == 50
    assert reg.get_sample_value("llm_time_to_first_token_seconds_bucket", {**s1, "le": "0.1"}) == 25
    assert reg.get_sample_value("llm_time_to_first_token_seconds_bucket", {**s1, "le": "+Inf"}) == 50
    # sub-10 ms ITL bucket: 4 ms gaps land at le=0.005 (vLLM's own first bucket is 10 ms)
    assert reg.get_sample_value("llm_inter_token_latency_seconds_bucket", {**s1, "le": "0.005"}) == 50 * 9
    assert reg.get_sample_value("llm_inter_token_latency_seconds_bucket", {**s1, "le": "0.0025"}) == 0
    assert reg.get_sample_value("llm_request_duration_seconds_count", s1) == 50
    assert reg.get_sample_value("llm_decode_span_seconds_count", s1) == 50
    assert reg.get_sample_value("llm_time_per_output_token_seconds_count", s1) == 50
    assert reg.get_sample_value("llm_requests_total", {**s1, "outcome": "ok", "error_kind": ""}) == 50
    assert reg.get_sample_value("llm_requests_total", {**s1, "outcome": "error", "error_kind": "http_5xx"}) == 1
    assert reg.get_sample_value("llm_output_tokens_total", s1) == 500
    assert reg.get_sample_value("llm_prompt_tokens_total", {"user_class": "Batch", "stage": "s2"}) == 100
    p50 = reg.get_sample_value("llm_latency_quantile_seconds", {"metric": "ttft", "quantile": "0.5"})
    assert p50 == pytest.approx(0.101, rel=0.01)  # 51 TTFTs: rank 25
    p99 = reg.get_sample_value("llm_latency_quantile_seconds", {"metric": "ttft", "quantile": "0.99"})
    assert p99 == pytest.approx(0.149, rel=0.01)
    assert reg.get_sample_value("llm_active_users") == 0
    assert reg.get_sample_value("llm_stage_info", {"stage": "main", "index": "0", "users": "", "rate": "",
                                                   "input_len": ""}) == 1


def test_server_gauges_are_relayed_from_the_latest_scrape(hub):
    reg = Exporter(hub.view, port=0).registry
    assert reg.get_sample_value("llm_server_kv_cache_usage_ratio") is None  # nothing scraped: nothing invented

    class FakeScraper:
        engines = {"a/0": {"target": "a", "engine": "0", "kv_cache_usage": 0.5, "requests_running": 2.0},
                   "a/1": {"target": "a", "engine": "1", "kv_cache_usage": 1.0, "requests_running": 4.0}}
        latest = {"kv_cache_usage": 0.75, "requests_running": 6.0, "requests_waiting": 2.0, "preemptions_total": 9.0,
                  "engines": engines}
        series = [latest]
        metric_names = "vllm-v1"
        successes, failures = 1, 0

        def target_states(self):
            return []

        def stop(self, final_scrape=True):
            pass

    hub.merger.scraper = FakeScraper()
    assert reg.get_sample_value("llm_server_kv_cache_usage_ratio") == 0.75
    assert reg.get_sample_value("llm_engine_kv_cache_usage_ratio", {"target": "a", "engine": "1"}) == 1.0
    assert reg.get_sample_value("llm_engine_requests_running", {"target": "a", "engine": "0"}) == 2.0
    assert reg.get_sample_value("llm_server_requests_running") == 6
    assert reg.get_sample_value("llm_server_requests_waiting") == 2
    assert reg.get_sample_value("llm_server_preemptions_total") == 9
    hub.merger.scraper = None


def test_client_kv_block_fill_from_latest_snapshots(hub):
    hub.merger.absorb("w1", {**_empty(), "kv_last": [10, 16]})
    hub.merger.absorb("w2", {**_empty(), "kv_last": [40, 48]})
    reg = Exporter(hub.view, port=0).registry
    assert reg.get_sample_value("llm_client_kv_block_fill_ratio") == pytest.approx(50 / 64)


def _empty() -> dict:
    return {"v": 1, "slot_s": 1.0, "cells": [], "slots": [], "token_sources": {}, "mismatch": [0, 0], "kv_fill": {},
            "kv_last": None}


def test_http_server_busy_port_and_double_stop(hub, caplog):
    ex = Exporter(hub.view, port=0)
    assert ex.start() and ex.port > 0
    with urllib.request.urlopen(f"http://127.0.0.1:{ex.port}/metrics", timeout=5) as r:
        body = r.read().decode()
    assert 'llm_requests_total{error_kind="",outcome="ok",stage="s1",user_class="SynthUser"} 50.0' in body
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = Exporter(hub.view, port=s.getsockname()[1])
        with caplog.at_level(logging.ERROR):
            assert busy.start() is False
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "--prometheus-port" in errors[0].getMessage()
    ex.stop()
    ex.stop()
    busy.stop()


def test_web_ui_serves_the_same_text_at_llm_metrics(monkeypatch):
    import sys

    from locust import User
    from locust.env import Environment

    from telemetry.plugin import install
    from tests.support import free_port
    from tests.telemetry.helpers import options
    from webui.metrics import install as install_metrics

    class Nobody(User):
        abstract = True

    env = Environment(user_classes=[Nobody], host="http://127.0.0.1:9")
    env.create_local_runner()
    port = free_port()
    monkeypatch.setattr(sys, "argv", ["locust"])  # the web UI parses the command line for its form
    web_ui = env.create_web_ui("127.0.0.1", port)
    env.parsed_options = options()
    role = install(env)
    assert install_metrics(env)  # the route lives in webui/, over the same collector
    role.on_test_start()
    fire(env, make_result(ttft=0.2))
    role.pump_local()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/llm/metrics", timeout=5) as r:
            body = r.read().decode()
            ctype = r.headers["Content-Type"]
    finally:
        web_ui.stop()
        role.close()
    assert ctype.startswith("text/plain")
    assert 'llm_time_to_first_token_seconds_count{stage="main",user_class="SynthUser"} 1.0' in body
    assert 'llm_latency_quantile_seconds{metric="ttft",quantile="0.5"}' in body


def test_route_table_runs_label_histograms_and_counters_by_version():
    env, hub, role = local_env(route_table="v1=http://127.0.0.1:9@0-79,beta=http://127.0.0.1:10@80-99")
    role.on_test_start()
    for i in range(30):
        fire(env, make_result(ttft=0.05, tokens=4, stage="s1", version="v1" if i % 3 else "beta"))
    role.pump_local()
    reg = Exporter(hub.view, port=0).registry
    v1, beta = ({"user_class": "SynthUser", "stage": "s1", "version": v} for v in ("v1", "beta"))
    for name in ("llm_time_to_first_token_seconds_count", "llm_time_per_output_token_seconds_count",
                 "llm_request_duration_seconds_count", "llm_decode_span_seconds_count"):
        assert reg.get_sample_value(name, v1) == 20 and reg.get_sample_value(name, beta) == 10, name
    assert reg.get_sample_value("llm_inter_token_latency_seconds_count", beta) == 10 * 3  # 3 gaps per request
    assert reg.get_sample_value("llm_requests_total", {**beta, "outcome": "ok", "error_kind": ""}) == 10
    assert reg.get_sample_value("llm_output_tokens_total", v1) == 80
    assert reg.get_sample_value("llm_prompt_tokens_total", beta) == 1000
    assert reg.get_sample_value("llm_output_tokens_total", {"user_class": "SynthUser", "stage": "s1"}) is None
    role.close()


def test_without_a_route_table_the_label_set_is_design_mds(hub):
    reg = Exporter(hub.view, port=0).registry
    for fam in reg.collect():
        if fam.name.startswith(("llm_time", "llm_inter", "llm_request", "llm_decode", "llm_prompt", "llm_output")):
            for sample in fam.samples:
                assert set(sample.labels) - {"le", "outcome", "error_kind"} == {"user_class", "stage"}, sample
