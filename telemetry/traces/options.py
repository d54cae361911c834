"""Locust options of the trace join and export (docs/architecture.md "… an option").

    locust ... --otlp-receiver 4318            # vllm serve ... --otlp-traces-endpoint http://<master>:4318/v1/traces
    locust ... --otlp-endpoint http://collector:4318/v1/traces
"""

from __future__ import annotations

from workload.argtypes import non_negative_seconds, port, url_or_off

OTLP_RECEIVER_DEFAULT = 0
"""--otlp-receiver: port of the master's OTLP/HTTP trace endpoint (0 = off)."""
OTLP_RECEIVER_HOST_DEFAULT = "127.0.0.1"
"""--otlp-receiver-host: its bind address."""
OTLP_GRACE_DEFAULT = 10.0
"""--otlp-grace: seconds the end of the run waits for the spans of completed requests (vLLM batches its
exports every 5 s)."""


def add_arguments(parser) -> None:
    a = parser.add_argument
    a("--otlp-receiver", type=port, metavar="PORT", env_var="LOCUST_OTLP_RECEIVER", default=OTLP_RECEIVER_DEFAULT,
      include_in_web_ui=False,
      help="Receive the server's OpenTelemetry spans (OTLP/HTTP protobuf, POST /v1/traces) on this port of the "
           "master and join each with its request (summary 'traces'; vLLM: --otlp-traces-endpoint "
           "http://<master>:PORT/v1/traces with OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf; 0 = off)")
    a("--otlp-receiver-host", metavar="HOST", env_var="LOCUST_OTLP_RECEIVER_HOST",
      default=OTLP_RECEIVER_HOST_DEFAULT, include_in_web_ui=False,
      help=f"Address the OTLP receiver binds (default {OTLP_RECEIVER_HOST_DEFAULT})")
    a("--otlp-grace", type=non_negative_seconds, metavar="SECONDS", env_var="LOCUST_OTLP_GRACE",
      default=OTLP_GRACE_DEFAULT, include_in_web_ui=False,
      help="At the end of the run, wait up to SECONDS for the spans of completed requests "
           f"(default {OTLP_GRACE_DEFAULT:g})")
    a("--otlp-endpoint", type=url_or_off, metavar="URL", env_var="LOCUST_OTLP_ENDPOINT", default=None,
      include_in_web_ui=False,
      help="Export one OpenTelemetry span per LLM request (OTLP/HTTP protobuf) to this collector URL, "
           "e.g. http://collector:4318/v1/traces; the server's span is its child ('off' or unset: none)")
