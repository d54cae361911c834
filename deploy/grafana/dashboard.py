"""Builds the Grafana dashboard JSON (deploy/grafana/dashboards/deepseek-locust.json) from a short panel list.

    python deploy/grafana/dashboard.py            # rewrite the JSON next to this file
    python deploy/grafana/dashboard.py --check    # exit 1 when the committed JSON is stale

The JSON is committed (Grafana provisions it as a file); this script is its source so the PromQL stays
readable. Client-side series are the Locust master's `llm_*` metrics; server-side series are vLLM's own
`vllm:*` (V1 names, plus the legacy names of older servers such as v0.6.3) and the master's
relayed `llm_server_*`; GPU memory and utilization come from `server.gpu_exporter` or, where a cluster runs
NVIDIA's dcgm-exporter instead, from `DCGM_FI_DEV_FB_USED` / `DCGM_FI_DEV_FB_FREE` (MiB) and `DCGM_FI_DEV_GPU_UTIL`
(%), whichever exists (PromQL `or`, ours first). Stage boundaries are annotations drawn from `llm_stage_info`. The
client latency panels are :data:`METRIC_PANELS` (keyed by telemetry.metrics' registry key: a panel's kind, title,
help and vLLM's histograms of the same quantity), so a new client metric gets its panel with one entry there; the
live detectors' gauges (telemetry/control/detectors.py) have their own panels.

Imports anywhere: every query reads the datasource variable ``${datasource}`` (no hard-coded uid), ``__inputs``
lets Grafana's import dialog ask for the Prometheus to use, and the variables ``model`` (vLLM's ``model_name``),
``stage``, ``user_class``, ``version`` and ``engine`` (vLLM's data-parallel rank) filter the series that carry
those labels (each defaults to All, a regex that also matches a series without the label).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script from anywhere: the registry lives in the project
    sys.path.insert(0, str(ROOT))

from telemetry.metrics import BY_KEY, ClientMetric  # noqa: E402

OUT = Path(__file__).resolve().parent / "dashboards" / "deepseek-locust.json"
DS_INPUT = "DS_PROMETHEUS"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
RATE = "$__rate_interval"
MIB = 1048576
CLIENT = 'user_class=~"$user_class", stage=~"$stage", version=~"$version"'
"""The label filter of every llm_* series labelled by user class and stage (and version with --route-table)."""
SERVER = 'model_name=~"$model"'
"""The label filter of vLLM's series."""
ENGINE = 'model_name=~"$model", engine=~"$engine"'
"""vLLM's series of the chosen engines (``engine``: one per data-parallel rank; every replica has its own)."""
VARIABLES = (  # (name, label, the series whose label values it offers, the label)
    ("model", "Model", "vllm:num_requests_running", "model_name"),
    ("stage", "Stage", "llm_requests_total", "stage"),
    ("user_class", "User class", "llm_requests_total", "user_class"),
    ("version", "Version", "llm_requests_total", "version"),
    ("engine", "Engine", "vllm:num_requests_running", "engine"),
)
ALL = ".*"
"""What "All" means in a filter: any value, and no label at all."""


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


def quantile(q: float, metric: str, by: str = "stage", where: str = CLIENT) -> str:
    """p-quantile over a histogram's buckets (filtered by ``where``), merged across label sets except ``by``."""
    group = f"le, {by}" if by else "le"
    return f"histogram_quantile({q}, sum by ({group}) (rate({metric}_bucket{{{where}}}[{RATE}])))"


@dataclass(frozen=True)
class MetricPanel:
    """How the dashboard draws one client metric (a histogram metric of telemetry.metrics)."""

    kind: str
    """``latency``: client p50/p95/p99 per stage, the merged sketch's p95/p99 (a ``top`` metric: the quantile
    gauge), the server's own p95/p99; ``p99``: client p99 per stage only."""
    title: str
    help: str
    server: tuple[str, ...] = ()
    """vLLM's histograms of the same quantity, drawn next to the client's."""


METRIC_PANELS: dict[str, MetricPanel] = {
    "ttft": MetricPanel("latency", "Time to first token", "Client TTFT from t0 (scheduled send time in open loop) to "
                        "the first token-bearing chunk; the server's own TTFT excludes the network and client "
                        "queueing.",
                        ("vllm:time_to_first_token_seconds",)),
    "itl": MetricPanel("latency", "Inter-token latency", "Gap between token-bearing chunks divided by the tokens they "
                       "carry. Server: V1 ITL, or the legacy per-output-token histogram of older vLLM.",
                       ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")),
    "tpot": MetricPanel("latency", "Time per output token", "Per request: decode span / (output tokens - 1).",
                        ("vllm:request_time_per_output_token_seconds",)),
    "e2e": MetricPanel("latency", "End-to-end latency", "From t0 to the end of the stream.",
                       ("vllm:e2e_request_latency_seconds",)),
    "decode_span": MetricPanel("p99", "Decode span p99 (cumulative drift)", "Last token minus first token, per request "
                               "(cumulative drift; SLO preset interactive: p99 2500 ms)."),
    "ttst": MetricPanel("latency", "Time to second token", "Gap between the first and the second token-bearing chunk "
                        "(AIPerf's TTST): the first decode step after prefill, as the client sees it."),
    "ttfa": MetricPanel("latency", "Time to first answer token", "Client time from t0 to the first answer token "
                        "(content), after an R1-style model's reasoning (reasoning_content / reasoning, or "
                        "<think>...</think> in content)."),
    "thinking": MetricPanel("p99", "Thinking span p99", "First answer token minus first reasoning token, per request "
                            "(R1-style reasoning)."),
}
"""Client metric (registry key) -> its panel, in registry order."""


def latency_panel(m: ClientMetric, p: MetricPanel) -> Panel:
    """Client p50/p95/p99 per stage from the histogram, the merged sketch's p95 and p99, the server's own p95/p99."""
    targets = [Target(quantile(q, m.prom_name), f"client p{q * 100:g} {{{{stage}}}}") for q in (0.5, 0.95, 0.99)]
    targets += [
        Target(f'llm_latency_quantile_seconds{{metric="{m.key}", quantile="{q:g}"}}',
               f"client p{q * 100:g} (merged sketch)")
        for q in (0.95, 0.99)
    ]
    targets += [
        Target(quantile(q, name, by="", where=SERVER), f"server p{q * 100:g} ({name})")
        for name in p.server for q in (0.95, 0.99)
    ]
    return Panel(p.title, "s", targets, p.help)


def p99_panel(m: ClientMetric, p: MetricPanel) -> Panel:
    return Panel(p.title, "s", [Target(quantile(0.99, m.prom_name), "p99 {{stage}}")], p.help)


PANEL_KINDS = {"latency": latency_panel, "p99": p99_panel}
"""MetricPanel.kind -> the function that draws it."""

PANELS: list[Panel] = [
    *(PANEL_KINDS[p.kind](BY_KEY[key], p) for key, p in METRIC_PANELS.items()),
    Panel(
        "Tokens per second",
        "short",
        [
            Target(f"sum(rate(llm_output_tokens_total{{{CLIENT}}}[{RATE}]))", "output tok/s"),
            Target(f"sum(rate(llm_prompt_tokens_total{{{CLIENT}}}[{RATE}]))", "prompt tok/s"),
            Target(f"sum(rate(vllm:generation_tokens_total{{{SERVER}}}[{RATE}]))", "server output tok/s"),
        ],
        "Client: summed over all workers (the master's counters). Server: vLLM's own generation counter.",
    ),
    Panel(
        "Requests by outcome",
        "reqps",
        [
            Target(f"sum by (outcome) (rate(llm_requests_total{{{CLIENT}}}[{RATE}]))", "{{outcome}}"),
            Target(
                f'sum by (error_kind) (rate(llm_requests_total{{outcome!="ok", {CLIENT}}}[{RATE}]))',
                "failed: {{error_kind}}",
            ),
        ],
        "One Locust request per LLM request; failures split by error kind.",
    ),
    Panel("Active users", "short", [Target("sum(llm_active_users)", "users")], "Locust users running."),
    Panel(
        "KV cache: server usage vs client block fill",
        "percentunit",
        [
            Target(f"vllm:kv_cache_usage_perc{{{SERVER}}}", "server KV usage (vLLM V1) {{instance}}"),
            Target(f"vllm:gpu_cache_usage_perc{{{SERVER}}}", "server KV usage (vLLM legacy) {{instance}}"),
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
            Target(f"vllm:num_requests_running{{{SERVER}}}", "running {{instance}}"),
            Target(f"vllm:num_requests_waiting{{{SERVER}}}", "waiting {{instance}}"),
            Target("llm_server_requests_running", "running (relayed)"),
            Target("llm_server_requests_waiting", "waiting (relayed)"),
        ],
        "Requests in the server's batch and in its queue.",
    ),
    Panel(
        "Preemptions",
        "short",
        [
            Target(f"sum(increase(vllm:num_preemptions_total{{{SERVER}}}[{RATE}]))", "server"),
            Target(f"sum(increase(llm_server_preemptions_total[{RATE}]))", "relayed"),
        ],
        "Sequences evicted when KV blocks run out (recomputed later): a sign of KV pressure.",
    ),
    Panel(
        "GPU memory",
        "bytes",
        [
            Target(f"gpu_memory_used_bytes or DCGM_FI_DEV_FB_USED * {MIB}", "used gpu {{gpu}}"),
            Target(f"gpu_memory_total_bytes or (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) * {MIB}",
                   "total gpu {{gpu}}"),
        ],
        "From server.gpu_exporter (gpu profile), else from NVIDIA's dcgm-exporter (frame buffer, MiB -> bytes).",
    ),
    Panel(
        "GPU utilization",
        "percentunit",
        [Target("gpu_utilization_ratio or DCGM_FI_DEV_GPU_UTIL / 100", "gpu {{gpu}}")],
        "From server.gpu_exporter (gpu profile), else from NVIDIA's dcgm-exporter (percent -> 0..1).",
        max=1.0,
    ),
    Panel(
        "Live detectors",
        "short",
        [
            Target("llm_batching_degraded", "batching degraded"),
            Target("llm_slo_breached", "SLO breached: {{slo}}"),
        ],
        "1 while the load generator's live detector fires (telemetry/control/detectors.py, every second on the "
        "trailing --batching-windows windows): the batching-collapse rule, each SLO. The alerts "
        "LLMBatchingCollapsed and LLMSLOBreached read the same gauges.",
        max=1.0,
    ),
    Panel(
        "Per engine: KV cache usage",
        "percentunit",
        [Target(f"vllm:kv_cache_usage_perc{{{ENGINE}}}", "{{instance}} engine {{engine}}"),
         Target('llm_engine_kv_cache_usage_ratio{engine=~"$engine"}', "{{target}} engine {{engine}} (relayed)")],
        "Every replica's every engine (vLLM's engine label, one per --data-parallel-size rank): a full pool on one "
        "engine while the others idle is hidden by the fleet's mean.",
        max=1.0,
    ),
    Panel(
        "Per engine: waiting and running",
        "short",
        [Target(f"vllm:num_requests_waiting{{{ENGINE}}}", "waiting {{instance}} engine {{engine}}"),
         Target(f"vllm:num_requests_running{{{ENGINE}}}", "running {{instance}} engine {{engine}}")],
        "Each engine's queue and batch: a straggler holds more running requests, a starved engine fewer.",
    ),
    Panel(
        "Per engine: queue time p99 and finished requests",
        "s",
        [Target(f"histogram_quantile(0.99, sum by (instance, engine, le) "
                f"(rate(vllm:request_queue_time_seconds_bucket{{{ENGINE}}}[{RATE}])))", "queue p99 {{instance}} engine "
                "{{engine}}"),
         Target(f"sum by (instance, engine) (rate(vllm:request_success_total{{{ENGINE}}}[{RATE}]))",
                "finished/s {{instance}} engine {{engine}}")],
        "From each engine's own histogram and counter; the finished rate (req/s, right axis) shows how evenly "
        "requests are spread.",
        overrides=[{"matcher": {"id": "byRegexp", "options": "finished.*"},
                    "properties": [{"id": "unit", "value": "reqps"},
                                   {"id": "custom.axisPlacement", "value": "right"}]}],
    ),
    Panel(
        "Engine imbalance",
        "short",
        [Target('llm_engine_imbalanced{engine=~"$engine"}', "{{target}} engine {{engine}}")],
        "1 for the engine the load generator's imbalance detector finds off the rest of the fleet (waiting, "
        "queue-time p99, ITL or finished requests against the other engines' median, --imbalance-windows windows "
        "in a row); the alert LLMEngineImbalanced reads the same gauge.",
        max=1.0,
    ),
    Panel(
        "Live SLOs: value vs threshold",
        "short",
        [
            Target("llm_slo_value", "{{slo}}"),
            Target("llm_slo_threshold", "{{slo}} threshold"),
        ],
        "Each SLO's value over the trailing windows and its threshold (ms; error_rate 0..1).",
    ),
]

STAGE_ANNOTATION = {
    "name": "Stages",
    "datasource": DATASOURCE,
    "enable": True,
    "iconColor": "rgba(255, 152, 48, 0.6)",
    "expr": 'max by (stage) (llm_stage_info{stage=~"$stage"}) > 0',
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


def variables() -> list[dict]:
    """The datasource variable, then one query variable per label filter (multi-select, All by default)."""
    ds = {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
          "current": {"selected": False, "text": f"${{{DS_INPUT}}}", "value": f"${{{DS_INPUT}}}"},
          "hide": 0, "refresh": 1, "regex": "", "options": []}
    out = [ds]
    for name, label, series, lbl in VARIABLES:
        out.append({
            "name": name, "label": label, "type": "query", "datasource": DATASOURCE,
            "definition": f"label_values({series}, {lbl})",
            "query": {"query": f"label_values({series}, {lbl})", "refId": f"{name}-values"},
            "includeAll": True, "allValue": ALL, "multi": True, "refresh": 2, "sort": 1, "hide": 0,
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "options": [], "regex": "",
        })
    return out


def build() -> dict:
    return {
        "__inputs": [{"name": DS_INPUT, "label": "Prometheus", "description": "The Prometheus that scrapes the "
                      "Locust master, the server and the GPU exporter", "type": "datasource",
                      "pluginId": "prometheus", "pluginName": "Prometheus"}],
        "__requires": [{"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
                       {"type": "panel", "id": "timeseries", "name": "Time series", "version": ""}],
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
        "templating": {"list": variables()},
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
