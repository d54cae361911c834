"""Locust options of the telemetry package (docs/architecture.md "… an option"); each mirrors ``LOCUST_<NAME>``.

locust ... --prometheus-port 9646 --slo-preset interactive --llm-summary-json results/summary.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

from telemetry.compare import CompareError, load
from telemetry.measure.targets import targets_or_off
from telemetry.slo import NO_PRESET, PRESET_CHOICES
from workload.argtypes import (
    fraction,
    milliseconds,
    name_list,
    non_negative_seconds,
    output_path,
    port,
    seconds,
    url_or_off,
)

PROMETHEUS_PORT_DEFAULT = 9646
"""--prometheus-port: where the master serves llm_* metrics (0 = off)."""
PROMETHEUS_HOST_DEFAULT = "127.0.0.1"
"""--prometheus-host: the exporter's bind address."""
SERVER_METRICS_INTERVAL_DEFAULT = 2.0
"""--server-metrics-interval: seconds between scrapes of the server's /metrics."""
LLM_STOP_ON_DEFAULT = None
"""--llm-stop-on: the live detectors that end the run when they fire (none)."""
STOP_ON_CHOICES = ("batching", "slo", "saturation", "imbalance")
"""What --llm-stop-on may name (telemetry/control/detectors.py)."""
LLM_PROGRESS_INTERVAL_DEFAULT = 10.0
"""--llm-progress-interval: seconds between live progress lines of a headless run (0 = off)."""
ATTRIBUTION_WINDOW_DEFAULT = 10.0
"""--attribution-window: seconds per window of the report's time series and the spike attribution."""



def summary_file(text: str) -> str:
    """--llm-baseline: a summary JSON that exists and reads as one ("" = none)."""
    if not text:
        return text
    try:
        load(Path(text))
    except CompareError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def add_arguments(parser) -> None:
    a = parser.add_argument
    a(
        "--llm-summary-json",
        type=output_path,
        metavar="PATH",
        env_var="LOCUST_LLM_SUMMARY_JSON",
        default=None,
        help="Write the merged LLM summary (schema 2) as JSON to PATH at the end of the run",
    )
    a(
        "--llm-csv",
        type=output_path,
        metavar="PREFIX",
        env_var="LOCUST_LLM_CSV",
        default=None,
        help="Write PREFIX_llm_stats.csv and PREFIX_llm_stages.csv from the merged state at the end of the run",
    )
    a(
        "--llm-report",
        type=output_path,
        metavar="PATH",
        env_var="LOCUST_LLM_REPORT",
        default=None,
        help="Write a self-contained HTML report to PATH at the end of the run",
    )
    a(
        "--llm-requests-jsonl",
        type=output_path,
        metavar="PATH",
        env_var="LOCUST_LLM_REQUESTS_JSONL",
        default=None,
        help="Write one JSON line per LLM request of every worker to PATH, on the master, as reports arrive "
        "(its labels, worker, tokens, finish reason, <metric>_ms of every per-request client metric, chunk "
        "arrival offsets, error)",
    )
    a(
        "--vllm-bench-json",
        type=output_path,
        metavar="PATH",
        env_var="LOCUST_VLLM_BENCH_JSON",
        default=None,
        help="Write the result in the form of vLLM's `vllm bench serve --save-result --save-detailed` to PATH at "
        "the end of the run (same field names, units and meaning)",
    )
    a(
        "--llm-progress-interval",
        type=non_negative_seconds,
        metavar="SECONDS",
        env_var="LOCUST_LLM_PROGRESS_INTERVAL",
        default=LLM_PROGRESS_INTERVAL_DEFAULT,
        help="Headless runs: print one progress line every SECONDS (stage, users, req/s, output tok/s, TTFT "
        "p50/p99, ITL p99, errors, server KV and waiting) over the last SECONDS; 0 = off "
        f"(default {LLM_PROGRESS_INTERVAL_DEFAULT:g})",
    )
    a(
        "--gpu-metrics-url",
        type=url_or_off,
        metavar="URL",
        env_var="LOCUST_GPU_METRICS_URL",
        default=None,
        include_in_web_ui=False,
        help="The server host's GPU metrics (python -m server.gpu_exporter, or NVIDIA's DCGM exporter): the summary's "
        "server_env.gpu names each GPU with its memory total and the peak memory used during the run; with an energy "
        "counter, --shape slo-search's capacity.energy_j_per_output_token",
    )
    a(
        "--llm-baseline",
        type=summary_file,
        metavar="PATH",
        env_var="LOCUST_LLM_BASELINE",
        default=None,
        help="A previous run's summary JSON: the HTML report draws both runs on the same axes and adds the compare "
        "table (python -m telemetry.compare)",
    )
    a(
        "--prometheus-port",
        type=port,
        metavar="N",
        env_var="LOCUST_PROMETHEUS_PORT",
        default=PROMETHEUS_PORT_DEFAULT,
        include_in_web_ui=False,
        help="Serve llm_* metrics for Prometheus on this port (master; 0 = off)",
    )
    a(
        "--prometheus-host",
        metavar="HOST",
        env_var="LOCUST_PROMETHEUS_HOST",
        default=PROMETHEUS_HOST_DEFAULT,
        include_in_web_ui=False,
        help=f"Address the Prometheus exporter binds (default {PROMETHEUS_HOST_DEFAULT})",
    )
    a(
        "--server-metrics-url",
        type=targets_or_off,
        metavar="URL[,URL...]",
        env_var="LOCUST_SERVER_METRICS_URL",
        default=None,
        include_in_web_ui=False,
        help="The servers' Prometheus endpoints to scrape, one per replica, each kept per target and per engine; "
        "an item prefill=URL or decode=URL names a disaggregated server's role (default <host>/metrics; 'off')",
    )
    a(
        "--server-metrics-interval",
        type=seconds,
        metavar="SECONDS",
        default=SERVER_METRICS_INTERVAL_DEFAULT,
        env_var="LOCUST_SERVER_METRICS_INTERVAL",
        include_in_web_ui=False,
        help=f"Seconds between scrapes of the server's /metrics (default {SERVER_METRICS_INTERVAL_DEFAULT:g})",
    )
    a(
        "--slo-ttft-p99-ms",
        type=milliseconds,
        metavar="MS",
        env_var="LOCUST_SLO_TTFT_P99_MS",
        default=None,
        help="SLO: TTFT p99 at most MS milliseconds (exit code 3 when crossed)",
    )
    a(
        "--slo-ttfa-p99-ms",
        type=milliseconds,
        metavar="MS",
        env_var="LOCUST_SLO_TTFA_P99_MS",
        default=None,
        help="SLO: time to first answer token (after the reasoning of an R1-style model) p99 at most MS milliseconds",
    )
    a(
        "--slo-itl-p95-ms",
        type=milliseconds,
        metavar="MS",
        env_var="LOCUST_SLO_ITL_P95_MS",
        default=None,
        help="SLO: inter-token latency p95 at most MS milliseconds",
    )
    a(
        "--slo-decode-span-p99-ms",
        "--slo-drift-p99-ms",
        type=milliseconds,
        metavar="MS",
        env_var="LOCUST_SLO_DECODE_SPAN_P99_MS",
        default=None,
        help="SLO: decode span (last token - first token) p99 at most MS milliseconds (--slo-drift-p99-ms: its "
        "old name, still accepted)",
    )
    a(
        "--slo-error-rate",
        type=fraction,
        metavar="RATIO",
        env_var="LOCUST_SLO_ERROR_RATE",
        default=None,
        help="SLO: failed requests / all requests at most RATIO (0..1)",
    )
    a(
        "--slo-preset",
        choices=PRESET_CHOICES,
        env_var="LOCUST_SLO_PRESET",
        default=NO_PRESET,
        help="SLO preset: none (the default: only the --slo-* options given) or interactive = TTFT p99 800 ms, ITL "
        "p95 120 ms, decode span p99 2500 ms (explicit options win; seed: its old name, still accepted)",
    )
    a(
        "--llm-stop-on",
        type=name_list(STOP_ON_CHOICES),
        metavar="LIST",
        env_var="LOCUST_LLM_STOP_ON",
        default=LLM_STOP_ON_DEFAULT,
        help="End the run when a live detector fires: batching (collapse rule on the trailing windows), slo "
        "(TTFT/ITL/error-rate SLO over the trailing windows); the summary's detectors section says why; "
        "saturation ends a concurrency or rate sweep after an over-saturated stage (output tok/s +<5 %% while TTFT "
        "p99 grows; the saturation section's stopped_sweep says which); imbalance (one engine of the fleet off "
        "the others for --imbalance-windows windows)",
    )
    a(
        "--attribution-window",
        type=seconds,
        metavar="SECONDS",
        env_var="LOCUST_ATTRIBUTION_WINDOW",
        default=ATTRIBUTION_WINDOW_DEFAULT,
        help="Window (seconds) for time series in the report and latency-spike attribution",
    )
