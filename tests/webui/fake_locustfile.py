"""A locustfile for the browser test of the LLM tab alone: a stand-in hub whose live() figures grow on
every call, and one idle user. The real run (locustfile.py + the simulator) is tested next to it.

    locust -f tests/webui/fake_locustfile.py --web-host 127.0.0.1 --web-port P
"""

from __future__ import annotations

import itertools

from locust import User, constant, events, task

from run.context import attach
from webui.plugin import install


class IdleUser(User):
    wait_time = constant(1)

    @task
    def idle(self):
        pass


class GrowingHub:
    """live() in telemetry's shape; every call adds one request and moves the figures."""

    def __init__(self) -> None:
        self._ticks = itertools.count(1)

    def live(self) -> dict:
        n = next(self._ticks)
        main = {"stage": "main", "requests": n, "ttft_p50_ms": 100.0 + n, "ttft_p99_ms": 400.0 + n,
                "itl_p50_ms": None, "itl_p99_ms": None, "output_tok_s": 10.0 * n}
        return {"elapsed_s": float(n), "workers": 1, "stages": [main], "server_kv_usage": min(1.0, n / 100),
                "client_kv_block_fill": None}


@events.init.add_listener
def _install(environment, **_kw):
    attach(environment).telemetry = GrowingHub()
    install(environment)
