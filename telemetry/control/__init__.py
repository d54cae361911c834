"""Live control: the judges and guards that watch the run's live figures while it goes on, and warn or act.

- ``detectors``: the batching-collapse rule and the SLO checks on a sliding window (gauges, log lines).
- ``routing``: ``--route-fallback`` judged and applied to the route table; the ``versions`` sections.
- ``capacity``: the SLO judge of a capacity search's probes (``--shape slo-search``).
- ``client_load``: the client saturation guard (event-loop lag and CPU of every process with users).

Each reads the run through :mod:`telemetry.measure` (a view, the scraper); none is an output of the run.
"""
