"""Bookkeeping of workers: the final reports' flush (worker) and drain (master) at quit, and dead-worker warnings.

Locust's master waits only 0.5 s for the workers' last reports before it stops listening; on a
busy machine a worker's final report (sent after its users stop) can arrive later and would be
lost. :func:`drain_final_reports` keeps reading the master's socket after that until every worker
still connected has sent its ``quit`` (which it sends after its final ``stats``), or a timeout.
:class:`WorkerWatch` warns once when a worker stops sending heartbeats (killed, hung): the summary
keeps what it reported.

    drain_final_reports(environment, timeout_s=10)      # the master, at quit
    flush_to_master(environment.runner)                 # a worker, at its very end
    watch = WorkerWatch(environment, merger); watch.start(); ...; watch.stop()
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import gevent
from locust.exception import RPCError

if TYPE_CHECKING:
    from telemetry.measure.runstate import RunState

log = logging.getLogger(__name__)
STATE_MISSING = "missing"


def drain_final_reports(environment, timeout_s: float = 10.0) -> set[str]:
    """Receive the remaining ``stats`` messages (fired as ``worker_report``); return workers that never quit."""
    runner = environment.runner
    if any(not g.dead for g in runner.greenlet):  # e.g. SIGTERM: Locust has not quit the runner yet
        runner.quit()  # sends quit to the workers, waits 0.5 s, stops Locust's own listener
    expected = {c.id for c in runner.clients.all if c.state != STATE_MISSING}
    deadline = time.monotonic() + timeout_s
    while expected:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            with gevent.Timeout(remaining):
                _client_id, msg = runner.server.recv_from_client()
        except gevent.Timeout:
            break
        except RPCError as e:
            log.warning(f"while waiting for the workers' final reports: {e}")
            continue
        if msg.type == "stats":
            environment.events.worker_report.fire(client_id=msg.node_id, data=msg.data)
        elif msg.type == "quit":
            expected.discard(msg.node_id)
    for wid in sorted(expected):
        log.warning(f"worker {wid} sent no final report within {timeout_s:.0f} s; the LLM summary holds only "
                    "what it reported before")
    return expected


FLUSH_LINGER_MS = 5000
"""How long a quitting worker waits at most for ZeroMQ to write its last messages to the master."""


def flush_to_master(runner, linger_ms: int = FLUSH_LINGER_MS) -> bool:
    """On a worker at the very end (Locust's ``quit`` event): wait until the final ``stats`` and the ``quit`` are
    written. Locust sends both just before the process exits, and ZeroMQ writes them from its own I/O thread; on a
    busy box that thread may not run before the exit, and both were lost (a soak's master waited out its drain and
    its summary missed the worker's last second: 42 of 4,269 requests). Closing the socket with a linger and
    terminating its context blocks until they are written, at most ``linger_ms``. False when there is no socket."""
    client = getattr(runner, "client", None)
    sock = getattr(client, "socket", None)
    if sock is None or sock.closed:
        return False
    sock.close(linger=linger_ms)
    sock.context.term()
    return True


class WorkerWatch:
    """Polls the master's worker list each second; warns once per worker that goes missing."""

    def __init__(self, environment, merger: RunState, interval_s: float = 1.0) -> None:
        self.environment = environment
        self.merger = merger
        self.interval_s = interval_s
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._loop)

    def stop(self) -> None:
        g, self._greenlet = self._greenlet, None
        if g is not None:
            g.kill(block=False)

    def _loop(self) -> None:
        me = gevent.getcurrent()
        while self._greenlet is me:  # stop() clears it: no check after a stop, even before the kill lands
            self.check()
            gevent.sleep(self.interval_s)

    def check(self) -> None:
        runner = self.environment.runner
        for c in list(runner.clients.all):
            if c.state == STATE_MISSING and self.merger.mark_lost(c.id):
                info = self.merger.workers.get(c.id)
                held = f"the {info.requests} requests it reported" if info else "nothing from it (it never reported)"
                age = f", last report {time.time() - info.last_report_wall:.0f} s ago" if info else ""
                log.warning(f"WARNING: worker {c.id} stopped sending heartbeats (killed or hung); the LLM summary "
                            f"keeps {held}{age}; its later results are lost")
            elif c.state != STATE_MISSING and self.merger.mark_back(c.id):
                log.info(f"worker {c.id} is sending heartbeats again")
