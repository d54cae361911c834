"""Test-only locustfile: tests/users/results_locustfile.py with Locust's master heartbeat timeout at 3 s
instead of 60 s, so a test can see a worker whose master was SIGKILLed exit by itself."""

from __future__ import annotations

import locust.runners

from tests.users.results_locustfile import *  # noqa: F403  (the users, the options, the results listener)

locust.runners.MASTER_HEARTBEAT_TIMEOUT = 3
