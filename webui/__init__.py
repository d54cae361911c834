"""Every web route of the project, on Locust's own web UI (webui imports telemetry and shapes, never the reverse).

- ``plugin``: ``install(environment)`` adds them all (called from deepseek_locust.py's init listener), and the
  "LLM" tab: live per-stage TTFT/ITL/TPOT quantiles, tokens/s and KV usage (``/llm/live``, ``/llm/live.csv``).
- ``table``: the tab's rows from telemetry's live figures (``environment.llm.telemetry.live()``).
- ``metrics``: ``/llm/metrics``; ``report``: ``/llm/report``; ``shape_form``: the start form's ``--shape`` check.
- ``charts``: ``/llm/charts``, the live charts and stage view (also inside the LLM tab), drawn by the report's code.
- ``downloads``: the Download Data tab's files (summary JSON, LLM CSV, per-request JSONL, vLLM-bench JSON).
"""
