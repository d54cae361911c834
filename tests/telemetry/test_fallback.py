"""--route-fallback on the master (telemetry/control/routing.py) and each version's own backend scrapes, without
network: per-version windows from a real Recorder, the switch, the before/after shares, the server figures per
version."""

from __future__ import annotations

import argparse

import pytest

from telemetry.control.routing import RouteFallback, fallback_section, server_figures, versions_section
from telemetry.measure.recorder import Recorder
from telemetry.measure.view import RunView
from telemetry.slo import SloSet
from tests.support import free_port
from tests.telemetry.helpers import local_env
from tests.telemetry.synthetic import make_result
from workload.routing.fallback import FallbackRule

TABLE = "v1=http://127.0.0.1:8001@0-49,beta=http://127.0.0.1:8002@50-99"


def _recorder(beta_slow_from: float, until: float, beta_errors_from: float | None = None) -> Recorder:
    """Wall clock == perf clock (offset 0), the run starting at 0: two requests per version per second."""
    rec = Recorder()
    rec._wall_offset = 0.0
    t = 0.5
    while t < until:
        for k in (0.0, 0.25):
            rec.record(make_result(ttft=0.05, tokens=4, itl=0.01, version="v1", end=t + k))
            slow = t >= beta_slow_from
            failed = beta_errors_from is not None and t >= beta_errors_from
            rec.record(make_result(ttft=0.5 if slow else 0.05, tokens=4, itl=0.01, version="beta", end=t + k,
                                   ok=not failed, error_kind="http_5xx" if failed else None))
        t += 0.5
    return rec


def _view(rec: Recorder, duration: float, **kw) -> RunView:
    return RunView(merged=rec, slos=SloSet(), options=argparse.Namespace(route_table=TABLE), host="", model="",
                   t0_wall=0.0, duration_s=duration, attribution_window=2.0, **kw)


def test_rule_fires_after_n_flagged_windows_and_measures_the_switch() -> None:
    rule = FallbackRule.parse("beta->v1 when ttft_p99>+20% for 2 windows")
    rec = _recorder(beta_slow_from=10.0, until=20.0)
    fb = RouteFallback(rule, window_s=2.0)
    assert not fb.check(_view(rec, 20.0), until_s=10.0, now_s=10.5)  # 6-8, 8-10: beta as fast as v1
    assert [w["flagged"] for w in fb.state["last"]] == [False, False]
    assert not fb.check(_view(rec, 20.0), until_s=12.0, now_s=12.5)  # 8-10 not flagged, 10-12 flagged
    assert [w["flagged"] for w in fb.state["last"]] == [False, True]
    assert fb.check(_view(rec, 20.0), until_s=14.0, now_s=14.6)
    s = fb.state
    assert s["fired"] and (s["breach_at_s"], s["rule_met_s"], s["switched_at_s"]) == (12.0, 14.0, 14.6)
    assert s["switch_after_breach_s"] == pytest.approx(2.6) and s["switch_after_rule_s"] == pytest.approx(0.6)
    check = s["last"][0]["checks"][0]
    assert check["value"] == pytest.approx(0.5, rel=0.02) and check["reference"] == pytest.approx(0.05, rel=0.02)
    assert not fb.check(_view(rec, 20.0), until_s=16.0, now_s=16.5)  # fires once


def test_error_rate_condition_and_windows_without_data_judge_nothing() -> None:
    rule = FallbackRule.parse("beta->v1 when error_rate>10% for 1 window of 2s")
    rec = _recorder(beta_slow_from=99.0, until=10.0, beta_errors_from=6.0)
    fb = RouteFallback(rule, window_s=30.0)  # the rule's own "of 2s" wins
    assert fb.window_s == 2.0
    assert not fb.check(_view(rec, 12.0), until_s=6.0, now_s=6.0)
    assert fb.check(_view(rec, 12.0), until_s=8.0, now_s=8.2)
    empty = RouteFallback(FallbackRule.parse("beta->v1 when ttft_p99>+20%"), 2.0)
    assert not empty.check(_view(Recorder(), 10.0), until_s=10.0, now_s=10.0)
    assert empty.state["last"][0]["flagged"] is None


def test_section_splits_requests_sent_before_and_after_the_switch() -> None:
    rec = _recorder(beta_slow_from=10.0, until=14.0)
    fb = RouteFallback(FallbackRule.parse("beta->v1 when ttft_p99>+20% for 2 windows"), 2.0)
    assert fb.check(_view(rec, 14.0), until_s=14.0, now_s=14.0)
    t = 14.25
    while t < 20:  # after the switch only v1 is sent
        rec.record(make_result(ttft=0.05, tokens=4, itl=0.01, version="v1", end=t))
        t += 0.5
    section = fallback_section(_view(rec, 20.0, route_fallback=fb.state))
    assert section["before"]["beta"]["sent"] > 0 and section["before"]["v1"]["sent"] > 0
    assert set(section["after"]) == {"v1"} and section["after"]["v1"]["share"] == 1.0
    assert fallback_section(_view(rec, 20.0)) is None


def test_versions_section_has_each_backends_own_server_figures_and_mismatch() -> None:
    rec = Recorder()
    rec.record(make_result(version="v1", prompt_tokens=100, prompt_tokens_client=100))
    rec.record(make_result(version="beta", prompt_tokens=100, prompt_tokens_client=90))
    servers = {
        "v1": {"url": "http://a/metrics", "scrapes": 3, "failures": 0, "series": [
            {"t": 0, "kv_cache_usage": 0.1, "requests_running": 2, "requests_waiting": 0, "preemptions_total": 1,
             "prefix_cache_queries_total": 100, "prefix_cache_hits_total": 10},
            {"t": 1, "kv_cache_usage": 0.5, "requests_running": 4, "requests_waiting": 3, "preemptions_total": 4,
             "prefix_cache_queries_total": 300, "prefix_cache_hits_total": 60}]},
        "beta": {"url": "http://b/metrics", "scrapes": 0, "failures": 7, "series": []},
    }
    out = versions_section(_view(rec, 10.0, version_servers=servers), None, {"v1": {"name": "deepseek-v2"}})
    v1, beta = out["v1"]["server"], out["beta"]["server"]
    assert v1["kv_cache_usage"] == {"mean": pytest.approx(0.3), "max": 0.5, "last": 0.5}
    assert (v1["preemptions"], v1["prefix_cache_queries"], v1["prefix_cache_hit_rate"]) == (3, 200, 0.25)
    assert v1["requests_waiting"]["max"] == 3 and v1["metrics_url"] == "http://a/metrics"
    assert beta["scrape_failures"] == 7 and beta["kv_cache_usage"]["max"] is None and beta["preemptions"] is None
    assert out["v1"]["prompt_mismatch_ratio"] == 0 and out["beta"]["prompt_mismatch_ratio"] == pytest.approx(0.1)
    assert out["v1"]["tokenizer"] == {"name": "deepseek-v2"} and out["beta"]["tokenizer"] is None
    assert server_figures(None) is None


def test_every_backend_is_scraped_and_an_unreachable_one_is_a_counted_failure() -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    env, hub, role = local_env(route_table=f"v1={dead}@0-49,beta={dead}/b@50-99", server_metrics_url=None,
                               server_metrics_interval=60.0)
    try:
        role.on_test_start()
        scrapers = role.merger.version_scrapers
        assert {v: s.url for v, s in scrapers.items()} == {"v1": f"{dead}/metrics", "beta": f"{dead}/b/metrics"}
        for s in scrapers.values():
            assert s.scrape_once() is None
        view = hub.view()
        assert {v: x["failures"] >= 1 and x["scrapes"] == 0 for v, x in view.version_servers.items()} == {
            "v1": True, "beta": True}
    finally:
        role.close()


def test_a_rule_naming_a_version_the_table_lacks_is_logged_and_not_run(caplog) -> None:
    env, hub, role = local_env(route_table=TABLE, route_fallback="canary->v1 when ttft_p99>+20%")
    try:
        role.on_test_start()
        assert role.route_switch.fallback is None
        assert "'canary', not in --route-table" in caplog.text
        assert hub.view().route_fallback["error"].startswith("--route-fallback names 'canary'")
    finally:
        role.close()


def test_compare_rows_each_versions_own_backend() -> None:
    from telemetry.compare import rows

    def summary(kv: float, pre: int) -> dict:
        return {"schema": 2, "requests": {}, "versions": {"beta": {"server": {
            "kv_cache_usage": {"mean": kv, "max": kv, "last": 0.0}, "preemptions": pre}}}}

    got = {r.figure: (r.base, r.new) for r in rows(summary(0.2, 1), summary(0.05, 4)) if r.scope == "version beta"}
    assert got == {"server_kv_mean": (0.2, 0.05), "preemptions": (1, 4)}


def test_live_view_web_ui_cards_and_report_show_each_version_and_the_switch() -> None:
    from telemetry.outputs.live import live
    from telemetry.outputs.report.sections import versions
    from webui.charts import stage_html, stage_view

    rec = _recorder(beta_slow_from=10.0, until=14.0)
    fb = RouteFallback(FallbackRule.parse("beta->v1 when ttft_p99>+20% for 2 windows"), 2.0)
    assert fb.check(_view(rec, 14.0), until_s=14.0, now_s=14.0)
    servers = {"v1": {"url": "u", "scrapes": 1, "failures": 0, "series": [
                   {"kv_cache_usage": 0.42, "requests_running": 3, "requests_waiting": 1}]},
               "beta": {"url": "u", "scrapes": 0, "failures": 2, "series": []}}
    view = _view(rec, 16.0, version_servers=servers, route_fallback=fb.state)
    now = live(view)
    assert now["versions"]["v1"]["kv_cache_usage"] == 0.42 and now["versions"]["beta"]["scrape_failures"] == 2
    assert now["route_fallback"]["fired"] and now["route_fallback"]["switched_at_s"] == 14.0
    html = stage_html(stage_view(None, now, {}, 8, "running"))
    assert "version v1" in html and "KV 42%" in html and "2 failed scrapes" in html
    assert "beta → v1: switched at 14 s" in html
    summary = {"versions": versions_section(view, None, {"v1": {"name": "deepseek-v2", "compat_level": "full"}}),
               "route_fallback": fallback_section(view)}
    page = versions(summary)
    assert "deepseek-v2" in page and "Fallback beta → v1 at 14 s" in page
    assert "before: beta 54 (0.50), v1 54 (0.50); after: none" in page  # two of each per second for 13.5 s


def test_prometheus_has_each_versions_backend_and_the_fallback_counter() -> None:
    from telemetry.outputs.exporter import llm_registry

    rec = _recorder(beta_slow_from=10.0, until=14.0)
    fb = RouteFallback(FallbackRule.parse("beta->v1 when ttft_p99>+20% for 2 windows"), 2.0)
    servers = {"v1": {"url": "u", "scrapes": 1, "failures": 0, "series": [{"kv_cache_usage": 0.42}]},
               "beta": {"url": "u", "scrapes": 1, "failures": 0, "series": [{"kv_cache_usage": 0.07}]}}
    reg = llm_registry(lambda: _view(rec, 16.0, version_servers=servers, route_fallback=fb.state))
    labels = {"from": "beta", "to": "v1"}
    assert reg.get_sample_value("llm_route_fallback_total", labels) == 0.0
    assert fb.check(_view(rec, 14.0), until_s=14.0, now_s=14.0)
    assert reg.get_sample_value("llm_route_fallback_total", labels) == 1.0
    for v, kv in (("v1", 0.42), ("beta", 0.07)):
        assert reg.get_sample_value("llm_version_server_kv_cache_usage_ratio", {"version": v}) == kv


def test_a_new_test_forgets_the_last_runs_applied_fallback() -> None:
    from workload.routing.table import ROUTE_FALLBACK_OPTION

    env, hub, role = local_env(route_table=TABLE, route_fallback="beta->v1 when ttft_p99>+20%",
                               **{ROUTE_FALLBACK_OPTION: {"from": "beta", "to": "v1"}})
    try:
        role.on_test_start()
        assert getattr(env.parsed_options, ROUTE_FALLBACK_OPTION) is None
        assert role.route_switch.fallback is not None and hub.view().route_fallback["fired"] is False
    finally:
        role.close()
