"""Stage propagation: the master's stage board reaches every worker, and each process's pacer follows it.

- master: every board change goes to all workers as an ``llm_stage`` message (``Stage.to_dict()`` plus
  ``"workers"``: how many workers share the rate); it is sent again when that count changes, and
  it is also kept in ``parsed_options.llm_stage`` so a worker that connects late gets it with its first
  spawn message (Locust forwards custom ``parsed_options`` to workers before their ``test_start``).
- worker: ``register_message("llm_stage")`` sets its board; ``test_start`` takes the stage from
  ``parsed_options``.
- local: the board is set by the shape in the same process.

Wherever users run, an open-loop stage (``stage.rate``) creates ``environment.llm.pacer`` and gives it
this process's share: rate / workers. A trace stage (``stage.trace_speedup``) gives it this process's share of
``--trace``'s lines instead (every ``workers``-th, from its place), its warm-up twin a paused pacer.
"""

from __future__ import annotations

import logging
from argparse import ArgumentTypeError

import numpy as np
from locust.runners import STATE_RUNNING, STATE_SPAWNING, MasterRunner, WorkerRunner

from shapes.pacer import Pacer
from shapes.stage import MAIN, MESSAGE_TYPE, Stage
from shapes.trace import TraceSchedule
from shapes.values import ARRIVAL_DEFAULT, parse_arrival
from workload.trace import Trace, load_trace

logger = logging.getLogger(__name__)

OPTION_KEY = "llm_stage"
"""Attribute of ``parsed_options`` that carries the current stage message to late workers."""


def make_pacer(environment, workers: int) -> Pacer:
    """A pacer seeded with ``--seed`` + worker index, phase-shifted by the worker's place among ``workers``."""
    options = environment.parsed_options
    try:
        arrival = parse_arrival(getattr(options, "arrival", None) or ARRIVAL_DEFAULT)
    except (ValueError, ArgumentTypeError) as e:
        logger.error("%s; using %s", e, ARRIVAL_DEFAULT)
        arrival = parse_arrival(ARRIVAL_DEFAULT)
    index = max(getattr(environment.runner, "worker_index", 0), 0)
    seed = getattr(options, "seed", None)
    rng = np.random.default_rng(None if seed is None else [int(seed) + index, 0x9ACE])
    return Pacer(arrival, rng, phase=(index % max(workers, 1)) / max(workers, 1))


class StagePropagation:
    def __init__(self, environment) -> None:
        self.environment = environment
        self.board = environment.llm.stage_board
        self._sent_workers: int | None = None
        self.on_pacer_done = lambda pacer: None
        """Called with the pacer at the end of a run (its last counters are still in it)."""
        self._trace: Trace | None = None
        self._path: str | None = None

    def register(self) -> StagePropagation:
        runner, events = self.environment.runner, self.environment.events
        if isinstance(runner, WorkerRunner):
            runner.register_message(MESSAGE_TYPE, self._on_message)
            if getattr(runner, "worker_state", None) in (STATE_SPAWNING, STATE_RUNNING):
                # joined a running test and its first spawn was handled before we were installed
                self._apply_message(getattr(self.environment.parsed_options, OPTION_KEY, None))
        elif isinstance(runner, MasterRunner):
            self.board.on_change(self._broadcast)
            events.heartbeat_sent.add_listener(self._on_heartbeat)
        else:
            self.board.on_change(lambda stage: self.apply(stage, 1))
        events.test_start.add_listener(self._on_test_start)
        events.test_stop.add_listener(self._on_test_stop)
        return self

    # -- master -------------------------------------------------------------------------------------------
    def sharing_workers(self) -> int:
        """Workers that share the rate: those with users; before any has users, all connected ones.

        A worker that connects mid-run gets no users until the next spawn (Locust does not rebalance by
        default), so counting it would silently lower the total rate.
        """
        runner = self.environment.runner
        clients = getattr(runner, "clients", None)
        busy = sum(1 for c in clients.running + clients.spawning if c.user_count > 0) if clients is not None else 0
        return max(busy or getattr(runner, "worker_count", 1), 1)

    def message(self) -> dict:
        return {**self.board.current.to_dict(), "workers": self.sharing_workers()}

    def _broadcast(self, _stage: Stage | None = None) -> None:
        msg = self.message()
        self._sent_workers = msg["workers"]
        if self.environment.parsed_options is not None:
            setattr(self.environment.parsed_options, OPTION_KEY, msg)
        self.environment.runner.send_message(MESSAGE_TYPE, msg)

    def _on_heartbeat(self, **_kw) -> None:
        if self._sent_workers is not None and self.sharing_workers() != self._sent_workers:
            self._broadcast()

    # -- worker -------------------------------------------------------------------------------------------
    def _on_message(self, environment, msg, **_kw) -> None:
        self._apply_message(msg.data)

    def _apply_message(self, data: dict | None) -> None:
        if not data:
            return
        try:
            stage = Stage.from_dict(data)
        except TypeError as e:
            logger.error("bad %s message %r: %s", MESSAGE_TYPE, data, e)
            return
        self.apply(stage, int(data.get("workers") or 1))

    # -- every process with users -------------------------------------------------------------------------
    def apply(self, stage: Stage, workers: int) -> None:
        self.board.set(stage)
        pacer = self.environment.llm.pacer
        if stage.trace_speedup is not None:
            self._replay(stage, workers)
            return
        if pacer is not None:
            pacer.replaying = False
        if stage.rate is None:
            if pacer is not None and pacer.rate is not None:
                pacer.start_stage(stage.name, None)
            return
        if pacer is None:
            pacer = self.environment.llm.pacer = make_pacer(self.environment, workers)
        share = stage.rate / max(workers, 1)
        if pacer.stage != stage.name:
            pacer.start_stage(stage.name, share)
        elif pacer.rate != share:
            pacer.set_rate(share)

    def trace(self) -> Trace | None:
        """``--trace``, read once per path in this process (a worker reads its own copy, like --prompt-file)."""
        path = getattr(self.environment.parsed_options, "trace", None)
        if not path:
            return None
        if path != self._path:
            try:
                self._trace = load_trace(path)
            except (ValueError, OSError) as e:
                logger.error("--trace: %s; this process sends nothing", e)
                self._trace = None
            self._path = path
        return self._trace

    def _replay(self, stage: Stage, workers: int) -> None:
        env = self.environment
        pacer = env.llm.pacer
        if pacer is None:
            pacer = env.llm.pacer = make_pacer(env, workers)
        pacer.replaying = True
        if pacer.stage == stage.name:
            return
        trace = None if stage.warmup else self.trace()
        if trace is None:
            pacer.start_stage(stage.name, None)  # users wait for the trace's clock to start
            return
        place = max(getattr(env.runner, "worker_index", 0), 0)
        schedule = TraceSchedule(pacer.now(), trace, float(stage.trace_speedup or 1.0), place, workers)
        logger.info("%s: %d of %d trace lines in this process", stage.name, len(schedule), len(trace.records))
        pacer.start_schedule(stage.name, schedule)

    def _on_test_start(self, environment, **_kw) -> None:
        runner = environment.runner
        if isinstance(runner, WorkerRunner):
            self.board.reset()
            self._apply_message(getattr(environment.parsed_options, OPTION_KEY, None) or MAIN.to_dict())
        elif environment.shape_class is None or not hasattr(environment.shape_class, "plan_name"):
            self.board.reset()  # no sweep: the whole run is one stage, "main"
            self.board.set(MAIN)
        elif not isinstance(runner, MasterRunner):
            self.apply(self.board.current, 1)  # the sweep set the first stage before this process had a pacer

    def _on_test_stop(self, environment, **_kw) -> None:
        pacer = environment.llm.pacer
        if pacer is not None:
            pacer.stop()
            self.on_pacer_done(pacer)
            environment.llm.pacer = None  # closed loop again until an open-loop stage comes
        shape = environment.shape_class
        if shape is not None and hasattr(shape, "finish"):
            shape.finish()
