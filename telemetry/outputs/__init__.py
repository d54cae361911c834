"""Outputs: what presents the run, live (web UI figures, progress line, Prometheus exporter) or at its end.

- ``summary``: the summary (docs/summary.schema.json) from a view; ``runrecord``, ``prefix_cache``: its sections.
- ``end_of_run``: the end-of-run sinks registered on the summary hooks (SLO gate, console, JSON, CSV, vLLM bench).
- ``sinks``: console table, summary JSON, CSV files; ``vllmbench``: the ``vllm bench serve`` result file.
- ``requestlog``: one JSON line per request (``--llm-requests-jsonl``); ``live``: the web UI's live figures.
- ``progress``: the headless progress line; ``exporter``: the Prometheus collector and its HTTP server.
- ``report``: the self-contained HTML report.

The compare command (``python -m telemetry.compare``) stays at the package's top: it is a user-facing command
that reads two summary files, not a part of a run.
"""
