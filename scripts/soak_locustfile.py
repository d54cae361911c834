"""The soak's locustfile (scripts/soak.py): the project's locustfile plus a sampler greenlet in every process that
appends this process's RSS, open fds, sockets and live greenlets to ``$SOAK_SAMPLES`` every ``$SOAK_SAMPLE_S`` s.

    SOAK_SAMPLES=/tmp/samples.jsonl SOAK_SAMPLE_S=30 locust -f scripts/soak_locustfile.py ...
"""

from __future__ import annotations

import gc
import json
import os
import time

import gevent
from greenlet import greenlet
from locust import events
from locust.runners import MasterRunner, WorkerRunner

from locustfile import *  # noqa: F403  (the plugin and the three user classes)


def sample() -> dict:
    """This process now: RSS (MB), open fds, of which sockets, live greenlets."""
    rss_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:"))
    fds = os.listdir("/proc/self/fd")
    sockets = 0
    for fd in fds:
        try:
            sockets += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:  # closed between the listing and the look
            pass
    live = sum(1 for o in gc.get_objects() if isinstance(o, greenlet) and not o.dead)
    return {"rss_mb": round(rss_kb / 1024.0, 2), "fds": len(fds), "sockets": sockets, "greenlets": live}


@events.init.add_listener
def _sampler(environment, **_kw) -> None:
    path = os.environ.get("SOAK_SAMPLES")
    if not path:
        return
    every = float(os.environ.get("SOAK_SAMPLE_S", "30"))
    runner = environment.runner
    role = "master" if isinstance(runner, MasterRunner) else "worker" if isinstance(runner, WorkerRunner) else "local"
    t0 = time.monotonic()

    def loop() -> None:
        while True:
            row = {"t_s": round(time.monotonic() - t0, 1), "role": role, "pid": os.getpid(), **sample()}
            with open(path, "a") as f:
                f.write(json.dumps(row) + "\n")
            gevent.sleep(every)

    gevent.spawn(loop)
