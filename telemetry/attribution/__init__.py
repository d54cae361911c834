"""P99 attribution: why the tail moved.

Pure functions over time windows that put the client's latency next to the server's signals:

- :mod:`~telemetry.attribution.histogram` — cumulative-histogram deltas and Prometheus-style quantiles;
- :mod:`~telemetry.attribution.window` — client windows aligned with server scrapes;
- :mod:`~telemetry.attribution.decompose` — client TTFT = queue + prefill + other server + network & client;
- :mod:`~telemetry.attribution.batching` — the dynamic-batching failure detector;
- :mod:`~telemetry.attribution.spikes` — spike windows with their cause in words.

The plugin (:mod:`~telemetry.attribution.plugin`) adds the ``attribution`` section to the summary and
prints a few lines under the console table.
"""
