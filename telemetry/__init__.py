"""Token-level telemetry: per-request results -> per-process recorder -> master merge -> sinks.

- ``metrics``: the client metrics (TTFT, TTST, ITL, ...), each defined once; every output below iterates it.
- ``sketch``: mergeable log-bucketed quantile sketch (0.5 % relative error, bounded memory).
- ``buckets``: fixed Prometheus buckets aligned with vLLM's (plus sub-10 ms ITL buckets).
- ``recorder``: per (user class, stage, version) sketches, histograms, counters, 1-s wall-clock slots.
- ``merger``: the run's mutable state (this process's recorder, the merged store, worker bookkeeping).
- ``view``: ``RunView``, a read-only view of the run; the summary, live figures, exporter, sections are its functions.
- ``hooks``: the registry of summary sections and end-of-run sinks other packages add.
- ``hub``: ``environment.llm.telemetry`` (``view()``, ``summary()``, ``live()``, ``hooks``, ``final_summary``).
- ``summary`` / ``live`` / ``sinks``: schema-1 summary, the web UI's live figures, console table, JSON, CSV.
- ``exporter``: Prometheus collector + HTTP server on the master; ``scraper``: the server's /metrics.
- ``slo``: thresholds, goodput, the CHECK FAILED gate; ``distributed``: final reports, dead workers.
- ``plugin`` / ``options``: the Locust wiring; the process's role (local, worker, master) is chosen once.
"""
