"""PromQL helpers for the deploy tests: metric names in an expression, the dashboard's queries, and a
small client for a running Prometheus.

    names_in('histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[1m])))')
    # {'vllm:e2e_request_latency_seconds'}
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request

from tests.support import ROOT

DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "deepseek-locust.json"

# The exporter's names (telemetry/metrics.py, telemetry/outputs/exporter.py) and vLLM's: what the dashboard
# may refer to.
CLIENT_METRICS = {
    "llm_time_to_first_token_seconds", "llm_inter_token_latency_seconds", "llm_time_per_output_token_seconds",
    "llm_request_duration_seconds", "llm_decode_span_seconds", "llm_requests_total", "llm_prompt_tokens_total",
    "llm_output_tokens_total", "llm_active_users", "llm_stage_info", "llm_latency_quantile_seconds",
    "llm_client_kv_block_fill_ratio", "llm_server_kv_cache_usage_ratio", "llm_server_requests_running",
    "llm_server_requests_waiting", "llm_server_preemptions_total", "llm_time_to_second_token_seconds",
    "llm_time_to_first_answer_token_seconds", "llm_thinking_span_seconds", "llm_reasoning_tokens_total",
    "llm_batching_degraded", "llm_slo_breached", "llm_slo_value", "llm_slo_threshold",
    "llm_server_time_to_first_token_seconds", "llm_spec_acceptance_ratio", "llm_server_spec_decode_drafts_total",
    "llm_server_spec_decode_draft_tokens_total", "llm_server_spec_decode_accepted_tokens_total",
    "llm_server_spec_decode_accepted_tokens_per_pos_total",
    "llm_engine_imbalanced", "llm_engine_kv_cache_usage_ratio", "llm_engine_requests_running",
    "llm_engine_requests_waiting",
}
VLLM_METRICS = {
    "vllm:kv_cache_usage_perc", "vllm:num_requests_running", "vllm:num_requests_waiting",
    "vllm:num_preemptions_total", "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
    "vllm:cache_config_info",
}
VLLM_LEGACY = {"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds"}
# vLLM V1 names beyond the founding list (served by vLLM 0.11 and by server.sim alike)
VLLM_EXTRA = {"vllm:request_time_per_output_token_seconds", "vllm:generation_tokens_total",
              "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
              "vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_accepted_tokens_per_pos_total",
              "vllm:request_success_total"}
GPU_METRICS = {"gpu_memory_used_bytes", "gpu_memory_total_bytes", "gpu_utilization_ratio"}
KNOWN = CLIENT_METRICS | VLLM_METRICS | VLLM_EXTRA | VLLM_LEGACY | GPU_METRICS

_NAME = re.compile(r"(?<![\w:])((?:llm|gpu)_[a-z0-9_]+|vllm:[a-z0-9_:]+)")
_SERIES_SUFFIX = re.compile(r"_(bucket|sum|count)$")


def names_in(expr: str) -> set[str]:
    """Metric families named in ``expr`` (histogram series suffixes stripped)."""
    return {_SERIES_SUFFIX.sub("", m) for m in _NAME.findall(expr)}


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def dashboard_queries() -> list[tuple[str, str]]:
    """(where, expr) for every panel target and annotation of the dashboard."""
    d = dashboard()
    out = [(f"panel {p['title']!r} {t['refId']}", t["expr"]) for p in d["panels"] for t in p.get("targets", [])]
    out += [(f"annotation {a['name']!r}", a["expr"]) for a in d["annotations"]["list"] if a.get("expr")]
    return out


def concrete(expr: str, rate_window: str = "30s") -> str:
    """Replace Grafana's variables so Prometheus can evaluate the expression: the rate windows, and each of the
    dashboard's label variables by its "All" value (what Grafana sends when nothing is picked)."""
    for var in dashboard()["templating"]["list"]:
        if "allValue" in var:
            expr = expr.replace(f"${var['name']}", var["allValue"])
    return expr.replace("$__rate_interval", rate_window).replace("$__interval", rate_window)


def query(base: str, expr: str) -> dict:
    """GET /api/v1/query; returns the decoded body (also for 4xx answers, which carry the error)."""
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        return json.load(e)
