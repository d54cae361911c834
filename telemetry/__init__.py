"""Token-level telemetry: per-request results -> per-process recorder -> master merge -> sinks.

- ``sketch``: mergeable log-bucketed quantile sketch (0.5 % relative error, bounded memory).
- ``buckets``: fixed Prometheus buckets aligned with vLLM's (plus sub-10 ms ITL buckets).
- ``recorder``: per (user class, stage, version) sketches, histograms, counters, 1-s wall-clock slots.
- ``hub``: ``environment.llm_telemetry`` (summary, sections, sinks, live view, windows).
- ``summary`` / ``sinks``: schema-1 summary, console table, JSON, CSV.
- ``exporter``: Prometheus collector + HTTP server on the master; ``scraper``: the server's /metrics.
- ``slo``: thresholds, goodput, the CHECK FAILED gate; ``distributed``: final reports, dead workers.
- ``plugin`` / ``options``: the Locust wiring.
"""
