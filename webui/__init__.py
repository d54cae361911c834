"""The "LLM" tab of Locust's web UI: live per-stage TTFT/ITL/TPOT quantiles, tokens/s and KV usage.

``webui.plugin.install(environment)`` registers it (called from locustfile.py's init listener);
``webui.table`` turns the telemetry hub's ``live()`` dict into the tab's rows.
"""
