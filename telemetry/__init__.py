"""Token-level telemetry: per-request results -> per-process recorder -> master merge -> judges and outputs.

Its parts, one-way (``measure`` imports neither of the two after it; tests/test_layers.py):

- ``measure/``: sketch, buckets, recorder, the run's state and its read-only view, the server scraper, the
  workers' final reports.
- ``control/``: live judges and guards (batching and SLO detectors, route fallback, capacity-search judge,
  client saturation guard).
- ``outputs/``: the summary and its sinks (console, JSON, CSV, vLLM bench), the request log, the live figures,
  the progress line, the Prometheus exporter, the HTML report.
- ``attribution/``: where the latency goes (queue, prefill, network), batching collapse, spikes.
- ``traces/``: OTLP spans in and out, client records joined with the server's spans.

At the top stay the wiring and the registries every part reads:

- ``plugin``: the Locust wiring; the process's role (local, worker, master) is chosen once and schedules loops.
- ``parts``: the master's scheduled parts (scrapers, detectors, route fallback, model discovery, progress).
- ``hub``: ``environment.llm.telemetry`` (``view()``, ``summary()``, ``live()``, ``hooks``, ``final_summary``).
- ``metrics``: the client metrics (TTFT, TTST, ITL, ...), each defined once; every output iterates it.
- ``slo``: thresholds, goodput, the CHECK FAILED gate (read by the view, the detectors and the outputs).
- ``options``: the package's Locust options.
- ``compare``: ``python -m telemetry.compare BASE NEW``, the user-facing command that compares two runs.
"""
