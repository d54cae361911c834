"""Test-only locustfile: tests/users/results_locustfile.py plus :class:`CpuHogUser`, whose task holds the gevent loop
for 30 ms at a time (free for 5 ms between) — a worker it runs on is starved, as one running too many streams is."""

from __future__ import annotations

import time

from locust import User, constant, task

from tests.users.results_locustfile import *  # noqa: F403  (the users, the options, the results listener)


class CpuHogUser(User):
    wait_time = constant(0.005)  # the loop is free 5 ms between holds

    @task
    def hog(self) -> None:
        end = time.perf_counter() + 0.03
        while time.perf_counter() < end:  # never yields: every other greenlet of the process waits
            pass
