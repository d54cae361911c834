"""Builds the Grafana dashboard JSON (deploy/grafana/dashboards/deepseek-locust.json) from a short panel list.

    python deploy/grafana/dashboard.py            # rewrite the JSON next to this file
    python deploy/grafana/dashboard.py --check    # exit 1 when the committed JSON is stale

The JSON is committed (Grafana provisions it as a file); this script is its source so the PromQL stays
readable. Client-side series are the Locust master's `llm_*` metrics; server-side series are vLLM's own
`vllm:*` (V1 names, plus the legacy names of older servers such as the seed's v0.6.3) and the master's
relayed `llm_server_*`; GPU memory comes from `server.gpu_exporter`. Stage boundaries are annotations
drawn from `llm_stage_info`. The client latency panels come from telemetry.metrics (one per metric with a
``panel``), so a new client metric gets its panel there.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script from anywhere: the registry lives in the project
    sys.path.insert(0, str(ROOT))

from telemetry.metrics import ClientMetric, having  # noqa: E402

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


def latency_panel(m: ClientMetric) -> Panel:
    """Client p50/p99 per stage from the histogram, the merged sketch's p99, and the server's own p99s."""
    targets = [
        Target(quantile(0.5, m.prom_name), "client p50 {{stage}}"),
        Target(quantile(0.99, m.prom_name), "client p99 {{stage}}"),
        Target(f'llm_latency_quantile_seconds{{metric="{m.key}", quantile="0.99"}}', "client p99 (merged sketch)"),
    ]
    targets += [Target(quantile(0.99, name, by=""), f"server p99 ({name})") for name in m.server]
    return Panel(m.panel_title, "s", targets, m.panel_help)


def p99_panel(m: ClientMetric) -> Panel:
    return Panel(m.panel_title, "s", [Target(quantile(0.99, m.prom_name), "p99 {{stage}}")], m.panel_help)


PANEL_KINDS = {"latency": latency_panel, "p99": p99_panel}
"""ClientMetric.panel -> the function that draws it."""

PANELS: list[Panel] = [
    *(PANEL_KINDS[m.panel](m) for m in having("panel")),
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
