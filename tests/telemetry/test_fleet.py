"""A fleet of servers and engines: --server-metrics-url's target list, every series kept per engine, the fleet's
figures as the engines' sums (KV usage their mean), one target's failures counted on its own."""

from __future__ import annotations

import argparse
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from telemetry.measure.scraper import ServerScraper, parse_engines, parse_server_metrics
from telemetry.measure.targets import Target, metrics_targets, parse_targets, targets_or_off
from telemetry.outputs.fleet import engine_entries, fleet_totals
from tests.support import free_port


def engine_text(engine: str, *, running: float, waiting: float, kv: float, ok: float, blocks: int,
                queue_le: tuple[float, float, float] = (5, 5, 5)) -> str:
    """One engine's series as vLLM V1 exports them (every sample labelled ``engine``)."""
    lab = f'engine="{engine}",model_name="tiny"'
    a, b, c = queue_le
    return f"""\
vllm:num_requests_running{{{lab}}} {running}
vllm:num_requests_waiting{{{lab}}} {waiting}
vllm:kv_cache_usage_perc{{{lab}}} {kv}
vllm:num_preemptions_total{{{lab}}} 1.0
vllm:request_success_total{{{lab},finished_reason="length"}} {ok}
vllm:request_success_total{{{lab},finished_reason="stop"}} 1.0
vllm:request_queue_time_seconds_bucket{{{lab},le="0.1"}} {a}
vllm:request_queue_time_seconds_bucket{{{lab},le="1.0"}} {b}
vllm:request_queue_time_seconds_bucket{{{lab},le="+Inf"}} {c}
vllm:request_queue_time_seconds_count{{{lab}}} {c}
vllm:request_queue_time_seconds_sum{{{lab}}} 1.0
vllm:cache_config_info{{block_size="16",{lab.replace(',model_name="tiny"', '')},num_gpu_blocks="{blocks}"}} 1.0
"""


def page(*engines: str) -> str:
    head = ("# TYPE vllm:num_requests_running gauge\n# TYPE vllm:num_requests_waiting gauge\n"
            "# TYPE vllm:kv_cache_usage_perc gauge\n# TYPE vllm:num_preemptions counter\n"
            "# TYPE vllm:request_success counter\n# TYPE vllm:request_queue_time_seconds histogram\n"
            "# TYPE vllm:cache_config_info gauge\n")
    # prometheus' text format wants a family's samples together: group the lines by metric name
    lines = [ln for e in engines for ln in e.splitlines()]
    order = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
             "vllm:num_preemptions", "vllm:request_success", "vllm:request_queue_time_seconds",
             "vllm:cache_config_info")
    return head + "".join(ln + "\n" for name in order for ln in lines if ln.startswith(name))


def test_each_engine_keeps_its_own_series_and_the_fleet_adds_them_up():
    text = page(engine_text("0", running=3, waiting=1, kv=0.2, ok=4, blocks=512),
                engine_text("1", running=5, waiting=0, kv=0.6, ok=6, blocks=512))
    engines = parse_engines(text)
    assert list(engines) == ["0", "1"]
    assert engines["1"]["requests_running"] == 5 and engines["0"]["kv_cache_usage"] == 0.2
    assert engines["0"]["request_success_total"] == 5  # summed over finish reasons, not over engines
    assert engines["1"]["cache_config"] == {"block_size": "16", "num_gpu_blocks": "512"}
    fleet = parse_server_metrics(text)
    assert fleet["requests_running"] == 8 and fleet["requests_waiting"] == 1
    assert fleet["kv_cache_usage"] == pytest.approx(0.4)  # a share: the engines' mean, not 0.8
    assert fleet["request_success_total"] == 12
    assert fleet["hist"]["queue"]["count"] == 10


def test_engine_entries_read_each_engine_over_the_run():
    def sample(t, ok0, ok1, slow1):
        s = parse_server_metrics(page(engine_text("0", running=2, waiting=0, kv=0.1, ok=ok0, blocks=512),
                                      engine_text("1", running=2, waiting=4, kv=0.9, ok=ok1, blocks=256,
                                                  queue_le=slow1)))
        return {**s, "t": t}

    series = [sample(0.0, 0, 0, (0, 0, 0)), sample(2.0, 10, 30, (0, 10, 30))]
    entries = engine_entries(series)
    assert [e["engine"] for e in entries] == ["0", "1"]
    e0, e1 = entries
    assert e0["requests_finished"] == 10 and e1["requests_finished"] == 30
    assert e1["requests_waiting_max"] == 4 and e1["kv_cache_usage"]["max"] == 0.9
    assert e0["queue_time_ms"]["p99"] is None  # no queue time observed in the run: no quantile
    # 10 of 30 queued 0.1..1 s, 20 longer: both ranks fall past the last finite bound (histogram_quantile's rule)
    assert e1["queue_time_ms"] == {"p50": 1000.0, "p99": 1000.0}
    assert fleet_totals(entries) == {"engine_count": 2, "kv_blocks_total": 768}


@pytest.mark.parametrize("text,names,roles", [
    ("http://a:1/metrics,http://b:2/metrics", ["a:1", "b:2"], [None, None]),
    ("prefill=http://p:1/metrics, decode=http://d:2/metrics", ["prefill", "decode"], ["prefill", "decode"]),
    ("http://a:1/m,http://a:1/n", ["a:1", "a:1#2"], [None, None]),
])
def test_target_list(text, names, roles):
    targets = parse_targets(text)
    assert [t.name for t in targets] == names and [t.role for t in targets] == roles


@pytest.mark.parametrize("bad", ["", "gpu=http://a:1/m", "prefill=a:1", "http://a:1/m,ftp://b"])
def test_bad_target_list_is_one_line(bad):
    with pytest.raises(argparse.ArgumentTypeError, match="URL"):
        targets_or_off(bad)


def test_default_target_is_the_host_and_off_is_none():
    assert metrics_targets(None, "http://127.0.0.1:8000/v1") == [Target("127.0.0.1:8000",
                                                                       "http://127.0.0.1:8000/metrics")]
    assert metrics_targets("off", "http://h:1") == []


def _serve(body: str) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_two_targets_are_scraped_and_counted_one_by_one():
    a = _serve(page(engine_text("0", running=1, waiting=0, kv=0.5, ok=3, blocks=100)))
    dead = free_port()
    try:
        targets = parse_targets(f"http://127.0.0.1:{a.server_port}/metrics,http://127.0.0.1:{dead}/metrics")
        sc = ServerScraper(targets, interval_s=0.5, timeout_s=1)
        s = sc.scrape_once()
        assert s is not None and list(s["engines"]) == [f"127.0.0.1:{a.server_port}/0"]
        assert s["engines"][f"127.0.0.1:{a.server_port}/0"]["target"] == f"127.0.0.1:{a.server_port}"
        states = {t["target"]: (t["scrapes"], t["scrape_failures"]) for t in sc.target_states()}
        assert states == {f"127.0.0.1:{a.server_port}": (1, 0), f"127.0.0.1:{dead}": (0, 1)}
        assert (sc.successes, sc.failures) == (1, 1)
    finally:
        a.shutdown()


def test_kv_transfer_series_are_scraped_per_engine():
    text = """\
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} 1.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="deferred"} 3.0
# TYPE vllm:nixl_xfer_time_seconds histogram
vllm:nixl_xfer_time_seconds_bucket{engine="0",le="0.1",model_name="m"} 4.0
vllm:nixl_xfer_time_seconds_bucket{engine="0",le="+Inf",model_name="m"} 5.0
vllm:nixl_xfer_time_seconds_count{engine="0",model_name="m"} 5.0
vllm:nixl_xfer_time_seconds_sum{engine="0",model_name="m"} 0.45
# TYPE vllm:nixl_bytes_transferred histogram
vllm:nixl_bytes_transferred_bucket{engine="0",le="+Inf",model_name="m"} 5.0
vllm:nixl_bytes_transferred_count{engine="0",model_name="m"} 5.0
vllm:nixl_bytes_transferred_sum{engine="0",model_name="m"} 1000.0
# TYPE vllm:nixl_num_failed_transfers counter
vllm:nixl_num_failed_transfers_total{engine="0",model_name="m"} 2.0
"""
    e = parse_engines(text)["0"]
    assert e["requests_deferred"] == 3.0  # the deferred reason only, not the capacity one
    assert e["kv_transfer_failures_total"] == 2.0
    assert e["hist"]["kv_transfer"]["count"] == 5 and e["hist"]["kv_transfer"]["sum"] == 0.45
    assert e["hist"]["kv_transfer_bytes"]["sum"] == 1000.0


def _summary_with(engines: list[dict]) -> dict:
    return {"schema": 2, "requests": {}, "server": {"engines": engines, "kv_blocks_total": 768}}


def _engine(target: str, engine: str, finished: int, q99: float) -> dict:
    return {"target": target, "role": None, "engine": engine, "requests_finished": finished,
            "kv_cache_usage": {"mean": 0.5, "max": 0.9}, "queue_time_ms": {"p50": 10.0, "p99": q99},
            "requests_waiting_max": 2, "preemptions": 0}


def test_console_and_compare_show_each_engine():
    from telemetry.compare import rows
    from telemetry.outputs.sinks import engine_lines

    base = _summary_with([_engine("a:1", "0", 10, 100.0), _engine("a:1", "1", 12, 120.0)])
    new = _summary_with([_engine("a:1", "0", 10, 100.0), _engine("a:1", "1", 3, 900.0)])
    lines = engine_lines(base["server"])
    assert lines[0].strip().startswith("2 engines, KV blocks 768") and "engine 1: finished 12" in lines[2]
    table = {(r.scope, r.figure): r for r in rows(base, new)}
    assert table[("engine 1", "engine_queue_p99")].new == 900.0
    assert table[("engine 1", "engine_finished")].delta == -9
    assert engine_lines({"engines": [_engine("a:1", "0", 1, 1.0)]}) == []  # one engine: the server line says it all


def test_imbalance_compares_an_engine_with_its_peers_of_the_same_role():
    from telemetry.attribution.imbalance import ImbalanceRule, judge_windows

    def sample(t: float, itl_sum: dict[str, float]) -> dict:
        engines = {}
        for key, role in (("p/0", "prefill"), ("d/0", "decode"), ("d/1", "decode")):
            n = 10.0 * t
            engines[key] = {"role": role, "requests_waiting": 0.0, "request_success_total": n,
                            "hist": {"itl": {"le": [0.01, float("inf")], "cum": [n, n], "sum": itl_sum[key] * t,
                                             "count": n}}}
        return {"t": t, "engines": engines}

    slow = {"p/0": 0.0, "d/0": 0.01, "d/1": 0.01}  # prefill makes no ITL at all: not a straggler among decoders
    series = [sample(t, slow) for t in (0.0, 1.0, 2.0)]
    (w,) = judge_windows(series, [0.0], 2.0, ImbalanceRule())
    assert w["engines"] == 3 and w["flagged"] == {}
    series = [sample(t, {**slow, "d/1": 0.05}) for t in (0.0, 1.0, 2.0)]  # one decoder 5x slower
    (w,) = judge_windows(series, [0.0], 2.0, ImbalanceRule())
    assert list(w["flagged"]) == ["d/1"] and "itl_mean_ms" in w["flagged"]["d/1"]


def test_a_pair_blames_its_kv_transfer_not_the_network():
    from telemetry.attribution.bottleneck import verdict

    def q(mean: float) -> dict:
        return {"count": 10, "mean": mean}

    # the prefill side's TTFT is 20 ms of a 355 ms first token; the rest is the transfer and the decode side's step
    d = {"ttft_client_ms": q(355.0), "ttft_server_ms": q(20.0), "queue_ms": q(13.0), "prefill_ms": q(5.0),
         "kv_transfer_ms": q(250.0), "remainder_ms": {"network_client": 35.0, "server_other": 2.0,
                                                      "decode_first_step": 50.0}}
    v = verdict({}, None, d, None)
    assert v["cause"] == "kv_transfer" and "70 %" in v["evidence"], v
