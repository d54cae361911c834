"""The project's locustfile for ``bench.master_fanin``'s master, with two probes around the merge of each report.

A ``worker_report`` listener registered at import (before Locust's stats listener and the telemetry role's, which
register at start-up) notes when a report starts being handled and how late it is (the worker stamped its send time
under ``bench_sent``); one registered after every ``init`` listener notes when the master is done with it. At quit
the figures go to the JSON file named by ``BENCH_MASTER_OUT``.
"""

import json
import os
import time

from locust import events

_started: list[float] = []
lags: list[tuple[float, float]] = []
"""(wall time the report was handled, seconds since the worker sent it)."""
merges: list[float] = []
"""Seconds the master's listeners took per report (Locust's stats merge and the telemetry merge)."""


@events.worker_report.add_listener
def _before(client_id=None, data=None, **_kw):
    now = time.time()
    _started.append(time.perf_counter())
    if data and "bench_sent" in data:
        lags.append((now, now - data["bench_sent"]))


import deepseek_locust  # noqa: E402,F401  (registers the plugin)
from users import StreamingChatUser  # noqa: E402,F401


@events.init.add_listener
def _last(environment, **_kw):  # an init listener after the plugin's: its worker_report listeners come first
    @events.worker_report.add_listener
    def _after(**_kw2):
        if _started:
            merges.append(time.perf_counter() - _started.pop())


@events.quitting.add_listener
def _dump(**_kw):
    path = os.environ.get("BENCH_MASTER_OUT")
    if path:
        with open(path, "w") as f:
            json.dump({"lags": lags, "merges": merges}, f)
