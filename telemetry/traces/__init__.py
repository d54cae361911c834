"""Per-request truth from both ends: the server's OpenTelemetry spans joined with the client's requests.

- :mod:`~telemetry.traces.otlp` — OTLP/HTTP protobuf in and out (vLLM's ``llm_request`` span attributes).
- :mod:`~telemetry.traces.receiver` — ``--otlp-receiver PORT``: the endpoint vLLM's ``--otlp-traces-endpoint``
  points at (``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf``).
- :mod:`~telemetry.traces.join` — client records and server spans matched by trace id, bounded.
- :mod:`~telemetry.traces.tail` — the slowest requests and the tail's composition (summary ``traces``).
- :mod:`~telemetry.traces.export` — ``--otlp-endpoint URL``: our own span per LLM request.
"""
