"""A locustfile for the browser test of the LLM tab alone: a stand-in hub whose live() figures grow on
every call, and one idle user. The real run (locustfile.py + the simulator) is tested next to it.

    locust -f tests/webui/fake_locustfile.py --web-host 127.0.0.1 --web-port P
"""

from __future__ import annotations

import itertools

from locust import User, constant, events, task

from webui.plugin import install


class IdleUser(User):
    wait_time = constant(1)

    @task
    def idle(self):
        pass


class GrowingHub:
    """live() in the summary schema; every call adds one request and moves the quantiles."""

    def __init__(self) -> None:
        self._ticks = itertools.count(1)

    def live(self) -> dict:
        n = next(self._ticks)
        q = {"count": n, "mean": 100.0 + n, "p50": 100.0 + n, "p90": 300.0, "p95": 350.0, "p99": 400.0 + n}
        return {
            "requests": {"total": n, "ok": n, "failed": 0},
            "tokens": {"output_per_s": 10.0 * n},
            "ttft_ms": q,
            "server": {"kv_cache_usage": min(1.0, n / 100)},
            "stages": [{"name": "main", "users": 1, "requests": n, "ttft_ms": q, "output_per_s": 10.0 * n}],
        }


@events.init.add_listener
def _install(environment, **_kw):
    environment.llm_telemetry = GrowingHub()
    install(environment)
