"""Server /metrics parsing (vLLM V1 and legacy names, counters with or without _total), scraper failures."""

from __future__ import annotations

import logging
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from telemetry.measure.scraper import ServerScraper, parse_server_metrics
from telemetry.measure.targets import metrics_url
from tests.support import free_port

V1 = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 7.0
vllm:num_requests_running{engine="1",model_name="tiny"} 5.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="tiny"} 3.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.625
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0",model_name="tiny"} 4.0
vllm:num_preemptions_created{engine="0",model_name="tiny"} 1.7e9
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{engine="0",model_name="tiny"} 5120.0
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="tiny"} 2560.0
# TYPE vllm:request_success counter
vllm:request_success_total{engine="0",finished_reason="length",model_name="tiny"} 9.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="tiny"} 1.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="tiny"} 4.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="tiny"} 9.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="tiny"} 10.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="tiny"} 10.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="tiny"} 2.5
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1",model_name="tiny"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.5",model_name="tiny"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="tiny"} 2.0
vllm:time_to_first_token_seconds_count{engine="1",model_name="tiny"} 2.0
vllm:time_to_first_token_seconds_sum{engine="1",model_name="tiny"} 1.5
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01",model_name="tiny"} 100.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="tiny"} 250.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="tiny"} 250.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="tiny"} 5.0
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{engine="0",le="0.3",model_name="tiny"} 10.0
vllm:request_queue_time_seconds_bucket{engine="0",le="+Inf",model_name="tiny"} 10.0
vllm:request_queue_time_seconds_count{engine="0",model_name="tiny"} 10.0
vllm:request_queue_time_seconds_sum{engine="0",model_name="tiny"} 0.4
"""

LEGACY = """\
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="ds"} 0.91
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="ds"} 12.0
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{model_name="ds"} 17.0
vllm:generation_tokens{model_name="ds"} 999.0
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{le="0.05",model_name="ds"} 30.0
vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="ds"} 40.0
vllm:time_per_output_token_seconds_count{model_name="ds"} 40.0
vllm:time_per_output_token_seconds_sum{model_name="ds"} 2.0
"""


def test_v1_names_gauges_counters_and_histograms_summed_over_label_sets():
    s = parse_server_metrics(V1)
    assert s["metric_names"] == "vllm-v1"
    assert s["kv_cache_usage"] == 0.625 and s["requests_running"] == 12.0 and s["requests_waiting"] == 3.0
    assert s["preemptions_total"] == 4.0  # _created is not added in
    assert s["prompt_tokens_total"] == 5120.0 and s["generation_tokens_total"] == 2560.0
    assert s["request_success_total"] == 10.0  # summed over finish reasons
    ttft = s["hist"]["ttft"]
    assert ttft["le"] == [0.1, 0.5, math.inf] and ttft["cum"] == [5.0, 10.0, 12.0]
    assert ttft["count"] == 12.0 and ttft["sum"] == 4.0
    assert s["hist"]["itl"]["count"] == 250.0 and s["hist"]["queue"]["sum"] == 0.4
    assert "prefill" not in s["hist"]


def test_legacy_names_and_counters_without_total():
    s = parse_server_metrics(LEGACY)
    assert s["metric_names"] == "vllm-legacy"
    assert s["kv_cache_usage"] == 0.91 and s["requests_waiting"] == 12.0 and s["requests_running"] is None
    assert s["preemptions_total"] == 17.0
    assert s["generation_tokens_total"] == 999.0  # plain name, no _total
    assert s["hist"]["itl"]["cum"] == [30.0, 40.0]  # time_per_output_token read as ITL


def test_not_vllm_text_gives_none_names():
    s = parse_server_metrics("# TYPE up gauge\nup 1\n")
    assert s["metric_names"] == "none" and s["kv_cache_usage"] is None and s["hist"] == {}


@pytest.mark.parametrize(
    "option,host,expected",
    [
        (None, "http://127.0.0.1:8000", "http://127.0.0.1:8000/metrics"),
        (None, "http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/metrics"),
        ("off", "http://127.0.0.1:8000", None),
        ("OFF", "http://h", None),
        ("http://other:9/m", "http://h", "http://other:9/m"),
        (None, None, None),
    ],
)
def test_metrics_url(option, host, expected):
    assert metrics_url(option, host) == expected


class _Handler(BaseHTTPRequestHandler):
    body = V1.encode()

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *a):
        pass


def test_scrape_once_keeps_series_with_time_since_start():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sc = ServerScraper(f"http://127.0.0.1:{server.server_port}/metrics", interval_s=0.5)
        sc._t0_wall -= 3.0
        s = sc.scrape_once()
        assert s is not None and s["kv_cache_usage"] == 0.625 and s["t"] >= 3.0
        assert sc.series == [s] and sc.successes == 1 and sc.metric_names == "vllm-v1"
    finally:
        server.shutdown()


def test_failures_are_counted_and_warned_once(caplog):
    sc = ServerScraper(f"http://127.0.0.1:{free_port()}/metrics", interval_s=0.5, timeout_s=1)
    with caplog.at_level(logging.WARNING):
        assert sc.scrape_once() is None
        assert sc.scrape_once() is None
    assert sc.failures == 2 and sc.series == []
    assert len([r for r in caplog.records if "scrape" in r.getMessage()]) == 1
