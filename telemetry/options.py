"""Locust options of the telemetry package (DESIGN.md "Locust options"); each mirrors ``LOCUST_<NAME>``.

locust ... --prometheus-port 9646 --slo-preset seed --llm-summary-json results/summary.json
"""

from __future__ import annotations

import argparse

from telemetry.slo import PRESETS


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port 0..65535 (0 = off), got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds such as 2 or 0.5, got {text!r}")
    return value


def positive_ms(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of milliseconds such as 800, got {text!r}")
    return value


def ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a ratio between 0 and 1 such as 0.01, got {text!r}")
    return value


def metrics_url(text: str) -> str:
    if text.strip().lower() == "off" or text.startswith(("http://", "https://")):
        return text
    raise argparse.ArgumentTypeError(f"expected an http(s):// URL or 'off', got {text!r}")


def add_arguments(parser) -> None:
    a = parser.add_argument
    a(
        "--llm-summary-json",
        metavar="PATH",
        env_var="LOCUST_LLM_SUMMARY_JSON",
        default=None,
        help="Write the merged LLM summary (schema 1) as JSON to PATH at the end of the run",
    )
    a(
        "--llm-csv",
        metavar="PREFIX",
        env_var="LOCUST_LLM_CSV",
        default=None,
        help="Write PREFIX_llm_stats.csv and PREFIX_llm_stages.csv from the merged state at the end of the run",
    )
    a(
        "--llm-report",
        metavar="PATH",
        env_var="LOCUST_LLM_REPORT",
        default=None,
        help="Write a self-contained HTML report to PATH at the end of the run",
    )
    a(
        "--prometheus-port",
        type=port,
        metavar="N",
        env_var="LOCUST_PROMETHEUS_PORT",
        default=9646,
        include_in_web_ui=False,
        help="Serve llm_* metrics for Prometheus on this port (master; 0 = off)",
    )
    a(
        "--prometheus-host",
        metavar="HOST",
        env_var="LOCUST_PROMETHEUS_HOST",
        default="127.0.0.1",
        include_in_web_ui=False,
        help="Address the Prometheus exporter binds (default 127.0.0.1)",
    )
    a(
        "--server-metrics-url",
        type=metrics_url,
        metavar="URL",
        env_var="LOCUST_SERVER_METRICS_URL",
        default=None,
        include_in_web_ui=False,
        help="The server's Prometheus endpoint to scrape (default <host>/metrics; 'off')",
    )
    a(
        "--server-metrics-interval",
        type=positive_seconds,
        metavar="SECONDS",
        default=2.0,
        env_var="LOCUST_SERVER_METRICS_INTERVAL",
        include_in_web_ui=False,
        help="Seconds between scrapes of the server's /metrics (default 2)",
    )
    a(
        "--slo-ttft-p99-ms",
        type=positive_ms,
        metavar="MS",
        env_var="LOCUST_SLO_TTFT_P99_MS",
        default=None,
        help="SLO: TTFT p99 at most MS milliseconds (exit code 3 when crossed)",
    )
    a(
        "--slo-itl-p95-ms",
        type=positive_ms,
        metavar="MS",
        env_var="LOCUST_SLO_ITL_P95_MS",
        default=None,
        help="SLO: inter-token latency p95 at most MS milliseconds",
    )
    a(
        "--slo-drift-p99-ms",
        type=positive_ms,
        metavar="MS",
        env_var="LOCUST_SLO_DRIFT_P99_MS",
        default=None,
        help="SLO: decode span (last token - first token) p99 at most MS milliseconds",
    )
    a(
        "--slo-error-rate",
        type=ratio,
        metavar="RATIO",
        env_var="LOCUST_SLO_ERROR_RATE",
        default=None,
        help="SLO: failed requests / all requests at most RATIO (0..1)",
    )
    a(
        "--slo-preset",
        choices=sorted(PRESETS),
        env_var="LOCUST_SLO_PRESET",
        default=None,
        help="SLO preset: seed = TTFT p99 800 ms, ITL p95 120 ms, decode span p99 2500 ms (explicit options win)",
    )
    a(
        "--attribution-window",
        type=positive_seconds,
        metavar="SECONDS",
        env_var="LOCUST_ATTRIBUTION_WINDOW",
        default=10.0,
        help="Window (seconds) for time series in the report and latency-spike attribution",
    )
