"""/metrics: vLLM V1 names, types, labels and bucket boundaries; values follow the engine; legacy names on a flag."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from server.sim.metrics import ITL_BUCKETS, REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS, EngineMetrics, build_1_2_5_buckets
from tests.server.sim.helpers import get, metric_value, post, running_sim

V1_TYPES = {
    "vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge", "vllm:kv_cache_usage_perc": "gauge",
    "vllm:num_preemptions": "counter", "vllm:prompt_tokens": "counter", "vllm:generation_tokens": "counter",
    "vllm:prefix_cache_queries": "counter", "vllm:prefix_cache_hits": "counter", "vllm:request_success": "counter",
    "vllm:time_to_first_token_seconds": "histogram", "vllm:inter_token_latency_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram", "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_prefill_time_seconds": "histogram", "vllm:request_decode_time_seconds": "histogram",
    "vllm:request_inference_time_seconds": "histogram", "vllm:request_time_per_output_token_seconds": "histogram",
    "vllm:request_prompt_tokens": "histogram", "vllm:request_generation_tokens": "histogram",
    "vllm:cache_config_info": "gauge",
}
LEGACY = {"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds"}


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _bounds(fam) -> list[float]:
    return [float(s.labels["le"]) for s in fam.samples if s.name.endswith("_bucket") and s.labels["le"] != "+Inf"]


def test_bucket_builders_match_vllm():
    assert build_1_2_5_buckets(100) == (1, 2, 5, 10, 20, 50, 100)
    assert build_1_2_5_buckets(2048)[-1] == 2000
    m = EngineMetrics(2048)
    m.ttft.observe(0.0011)
    m.ttft.observe(0.001)  # on the boundary: counted in le="0.001"
    assert m.ttft.cumulative()[:2] == [("0.001", 1), ("0.005", 2)] and m.ttft.count == 2


@pytest.mark.slow
def test_metrics_parse_with_vllm_names_types_labels_and_follow_the_engine():
    with running_sim("--time-scale", "20", "--num-gpu-blocks", "300", "--max-model-len", "1024") as proc:
        total_out = 0
        for i in range(5):
            _s, _h, raw = post(proc.port, "/v1/completions", {"prompt": [100 + i] * 40, "max_tokens": 9 + i,
                                                              "ignore_eos": True})
            total_out += 9 + i
        # the same 40-token prompt again: 2 full blocks come from the prefix cache
        post(proc.port, "/v1/completions", {"prompt": [100] * 40, "max_tokens": 1, "ignore_eos": True})
        status, raw = get(proc.port, "/metrics")
    text = raw.decode()
    fams = _families(text)
    assert status == 200
    for name, typ in V1_TYPES.items():
        assert fams[name].type == typ, name
    assert not LEGACY & set(fams)
    for fam in fams.values():
        for s in fam.samples:
            if fam.name != "vllm:cache_config_info":
                assert s.labels["model_name"] == "sim-tiny" and s.labels["engine"] == "0"
    assert _bounds(fams["vllm:time_to_first_token_seconds"]) == list(TTFT_BUCKETS)
    assert _bounds(fams["vllm:inter_token_latency_seconds"]) == list(ITL_BUCKETS)
    for name in ("e2e_request_latency", "request_queue_time", "request_prefill_time", "request_decode_time"):
        assert _bounds(fams[f"vllm:{name}_seconds"]) == list(REQUEST_LATENCY_BUCKETS)
    assert _bounds(fams["vllm:request_prompt_tokens"]) == list(build_1_2_5_buckets(1024))
    assert metric_value(text, "vllm:generation_tokens_total") == total_out + 1
    assert metric_value(text, "vllm:prompt_tokens_total") == 6 * 40
    assert metric_value(text, "vllm:request_success_total", {"finished_reason": "length"}) == 6
    assert metric_value(text, "vllm:time_to_first_token_seconds_count") == 6
    assert metric_value(text, "vllm:inter_token_latency_seconds_count") == total_out - 5
    assert metric_value(text, "vllm:prefix_cache_queries_total") == 6 * 40
    assert metric_value(text, "vllm:prefix_cache_hits_total") == 32
    assert metric_value(text, "vllm:num_requests_running") == 0 and metric_value(text, "vllm:kv_cache_usage_perc") == 0
    info = fams["vllm:cache_config_info"].samples[0]
    assert info.value == 1 and info.labels["block_size"] == "16" and info.labels["num_gpu_blocks"] == "300"


@pytest.mark.slow
def test_legacy_flag_adds_pre_v1_names():
    with running_sim("--time-scale", "20", "--legacy-metrics") as proc:
        post(proc.port, "/v1/completions", {"prompt": "x", "max_tokens": 5, "ignore_eos": True})
        text = get(proc.port, "/metrics")[1].decode()
    fams = _families(text)
    assert fams["vllm:gpu_cache_usage_perc"].type == "gauge"
    assert fams["vllm:time_per_output_token_seconds"].type == "histogram"
    assert metric_value(text, "vllm:time_per_output_token_seconds_count") == 4
    assert metric_value(text, "vllm:kv_cache_usage_perc") == metric_value(text, "vllm:gpu_cache_usage_perc")
