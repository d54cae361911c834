"""Measurement: what the run's numbers are, per process and merged, and nothing that judges or shows them.

- ``sketch``: mergeable log-bucketed quantile sketch (0.5 % relative error, bounded memory).
- ``buckets``: fixed Prometheus buckets aligned with vLLM's (plus sub-10 ms ITL buckets).
- ``recorder``: per (user class, stage, version) sketches, histograms, counters, 1-s wall-clock slots.
- ``runstate``: the run's mutable state (this process's recorder, the merged store, worker bookkeeping).
- ``view``: ``RunView``, a read-only view of the run; every judge and output is a function of it.
- ``scraper``: the server's Prometheus ``/metrics`` as a time series.
- ``distributed``: the workers' final reports at quit, dead-worker warnings.

Imports neither :mod:`telemetry.control` nor :mod:`telemetry.outputs` (tests/test_layers.py).
"""
