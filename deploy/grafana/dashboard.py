"""Builds the Grafana dashboard JSON (deploy/grafana/dashboards/deepseek-locust.json) from a short panel list.

    python deploy/grafana/dashboard.py            # rewrite the JSON next to this file
    python deploy/grafana/dashboard.py --check    # exit 1 when the committed JSON is stale

The JSON is committed (Grafana provisions it as a file); this script is its source so the PromQL stays
readable. Client-side series are the Locust master's `llm_*` metrics; server-side series are vLLM's own
`vllm:*` (V1 names, plus the legacy names of older servers such as the seed's v0.6.3) and the master's
relayed `llm_server_*`; GPU memory comes from `server.gpu_exporter`. Stage boundaries are annotations
drawn from `llm_stage_info`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

OUT = Path(__file__).resolve().parent / "dashboards" / "deepseek-locust.json"
DATASOURCE = {"type": "prometheus", "uid": "prometheus"}
RATE = "$__rate_interval"


@dataclass(frozen=True)
class Target:
    expr: str
    legend: str


@dataclass(frozen=True)
class Panel:
    title: str
    unit: str
    targets: list[Target]
    description: str = ""
    max: float | None = None
    overrides: list[dict] = field(default_factory=list)


def quantile(q: float, metric: str, by: str = "stage") -> str:
    """p-quantile over a histogram's buckets, merged across label sets except ``by``."""
    group = f"le, {by}" if by else "le"
    return f"histogram_quantile({q}, sum by ({group}) (rate({metric}_bucket[{RATE}])))"


def latency_panel(title: str, client: str, sketch: str, server: list[str], description: str) -> Panel:
    targets = [
        Target(quantile(0.5, client), "client p50 {{stage}}"),
        Target(quantile(0.99, client), "client p99 {{stage}}"),
        Target(f'llm_latency_quantile_seconds{{metric="{sketch}", quantile="0.99"}}', "client p99 (merged sketch)"),
    ]
    targets += [Target(quantile(0.99, name, by=""), f"server p99 ({name})") for name in server]
    return Panel(title, "s", targets, description)


PANELS: list[Panel] = [
    latency_panel(
        "Time to first token",
        "llm_time_to_first_token_seconds",
        "ttft",
        ["vllm:time_to_first_token_seconds"],
        "Client TTFT from t0 (scheduled send time in open loop) to the first token-bearing chunk; "
        "the server's own TTFT excludes the network and client queueing.",
    ),
    latency_panel(
        "Inter-token latency",
        "llm_inter_token_latency_seconds",
        "itl",
        ["vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"],
        "Gap between token-bearing chunks divided by the tokens they carry. Server: V1 ITL, or the legacy "
        "per-output-token histogram of older vLLM.",
    ),
    latency_panel(
        "Time per output token",
        "llm_time_per_output_token_seconds",
        "tpot",
        ["vllm:request_time_per_output_token_seconds"],
        "Per request: decode span / (output tokens - 1).",
    ),
    latency_panel(
        "End-to-end latency",
        "llm_request_duration_seconds",
        "e2e",
        ["vllm:e2e_request_latency_seconds"],
        "From t0 to the end of the stream.",
    ),
    Panel(
        "Decode span p99 (cumulative drift)",
        "s",
        [Target(quantile(0.99, "llm_decode_span_seconds"), "p99 {{stage}}")],
        "Last token minus first token, per request (the seed's cumulative drift, SLO 2500 ms).",
    ),
    Panel(
        "Tokens per second",
        "short",
        [
            Target(f"sum(rate(llm_output_tokens_total[{RATE}]))", "output tok/s"),
            Target(f"sum(rate(llm_prompt_tokens_total[{RATE}]))", "prompt tok/s"),
            Target(f"sum(rate(vllm:generation_tokens_total[{RATE}]))", "server output tok/s"),
        ],
        "Client: summed over all workers (the master's counters). Server: vLLM's own generation counter.",
    ),
    Panel(
        "Requests by outcome",
        "reqps",
        [
            Target(f"sum by (outcome) (rate(llm_requests_total[{RATE}]))", "{{outcome}}"),
            Target(
                f'sum by (error_kind) (rate(llm_requests_total{{outcome!="ok"}}[{RATE}]))', "failed: {{error_kind}}"
            ),
        ],
        "One Locust request per LLM request; failures split by error kind.",
    ),
    Panel("Active users", "short", [Target("sum(llm_active_users)", "users")], "Locust users running."),
    Panel(
        "KV cache: server usage vs client block fill",
        "percentunit",
        [
            Target("vllm:kv_cache_usage_perc", "server KV usage (vLLM V1) {{instance}}"),
            Target("vllm:gpu_cache_usage_perc", "server KV usage (vLLM legacy) {{instance}}"),
            Target("llm_server_kv_cache_usage_ratio", "server KV usage (relayed by master)"),
            Target("llm_client_kv_block_fill_ratio", "client KV block fill (blocks of 16)"),
        ],
        "Server: fraction of KV blocks in use. Client: over in-flight requests, used / allocated token slots "
        "with 16-token blocks (prompt + generated so far).",
        max=1.0,
    ),
    Panel(
        "Scheduler: running and waiting",
        "short",
        [
            Target("vllm:num_requests_running", "running {{instance}}"),
            Target("vllm:num_requests_waiting", "waiting {{instance}}"),
            Target("llm_server_requests_running", "running (relayed)"),
            Target("llm_server_requests_waiting", "waiting (relayed)"),
        ],
        "Requests in the server's batch and in its queue.",
    ),
    Panel(
        "Preemptions",
        "short",
        [
            Target(f"sum(increase(vllm:num_preemptions_total[{RATE}]))", "server"),
            Target(f"sum(increase(llm_server_preemptions_total[{RATE}]))", "relayed"),
        ],
        "Sequences evicted when KV blocks run out (recomputed later): a sign of KV pressure.",
    ),
    Panel(
        "GPU memory",
        "bytes",
        [
            Target("gpu_memory_used_bytes", "used gpu {{gpu}}"),
            Target("gpu_memory_total_bytes", "total gpu {{gpu}}"),
        ],
        "From server.gpu_exporter (gpu profile).",
    ),
    Panel(
        "GPU utilization",
        "percentunit",
        [Target("gpu_utilization_ratio", "gpu {{gpu}}")],
        "From server.gpu_exporter (gpu profile).",
        max=1.0,
    ),
]

STAGE_ANNOTATION = {
    "name": "Stages",
    "datasource": DATASOURCE,
    "enable": True,
    "iconColor": "rgba(255, 152, 48, 0.6)",
    "expr": "max by (stage) (llm_stage_info) > 0",
    "step": "5s",
    "titleFormat": "stage {{stage}}",
    "textFormat": "",
    "tagKeys": "stage",
    "useValueForTime": False,
}


def _panel_json(panel: Panel, pid: int) -> dict:
    width, height = 12, 8
    defaults: dict = {"unit": panel.unit, "min": 0, "custom": {"lineWidth": 1, "fillOpacity": 0, "spanNulls": False}}
    if panel.max is not None:
        defaults["max"] = panel.max
    return {
        "id": pid,
        "type": "timeseries",
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": height, "w": width, "x": ((pid - 1) % 2) * width, "y": ((pid - 1) // 2) * height},
        "fieldConfig": {"defaults": defaults, "overrides": panel.overrides},
        "options": {
            "legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": t.expr, "legendFormat": t.legend}
            for i, t in enumerate(panel.targets)
        ],
    }


def build() -> dict:
    return {
        "uid": "deepseek-locust",
        "title": "deepseek-locust: LLM load test",
        "description": "Token-level latency, throughput and KV-cache pressure of an OpenAI-compatible LLM server "
        "under a Locust load test.",
        "tags": ["llm", "locust", "vllm"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": False,
        "refresh": "5s",
        "time": {"from": "now-30m", "to": "now"},
        "annotations": {"list": [STAGE_ANNOTATION]},
        "templating": {"list": []},
        "panels": [_panel_json(p, i) for i, p in enumerate(PANELS, start=1)],
    }


def render() -> str:
    return json.dumps(build(), indent=2) + "\n"


def main(argv: list[str]) -> int:
    if "--check" in argv:
        if OUT.read_text() != render():
            print(f"{OUT} is stale: run python deploy/grafana/dashboard.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(render())
    print(f"wrote {OUT} ({len(PANELS)} panels)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
