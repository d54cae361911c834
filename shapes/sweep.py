"""The LoadTestShape classes: a sweep walks its plan one step at a time and keeps the stage board current.

For every step: ask for the step's user count and stamp results with its warm-up stage (with ``--stage-warmup``
> 0; else with the measured stage itself, ramp included); once that many users are actually running
(``runner.user_count``) wait ``--stage-warmup`` seconds; then switch the board to the measured stage and hold it
for ``--stage-duration`` seconds (so ramp time never eats the dwell).
After the last step ``tick()`` returns None and Locust stops the test.

The plan is built from ``environment.parsed_options`` at the first tick of a run (so values typed in the
web UI count) and forgotten when the run stops.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from locust import LoadTestShape

from shapes.plan import PlanError, Step, concurrency_plan, length_plan, rate_plan, trace_plan
from shapes.saturation import verdict
from shapes.stage import StageBoard

logger = logging.getLogger(__name__)

SATURATION_STOP = "saturation"
"""``--llm-stop-on saturation``: a concurrency or rate sweep ends once a measured stage is over-saturated."""

SETTLE_GRACE_S = 30.0
"""Extra seconds allowed for a user count to be reached (beyond count / spawn rate) before moving on anyway."""


@dataclass(slots=True)
class _Progress:
    steps: list[Step]
    i: int = 0
    phase: str = "enter"  # enter -> settle -> warmup -> hold -> (next step)
    since: float = 0.0


class SweepShape(LoadTestShape):
    """Base of the sweeps: a subclass names its ``--shape`` and its plan function; the shape registry
    (:mod:`shapes.registry`) lists it."""

    abstract = True
    use_common_options = True
    plan_name: str = ""
    """The ``--shape`` name (the key in :data:`shapes.registry.SHAPES`)."""
    build: Callable[..., list[Step]]
    """The plan function: parsed options -> the steps (``staticmethod(...)`` in a subclass)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        super().__init__()
        self._clock = clock
        self._progress: _Progress | None = None
        self.saturation_stop: dict | None = None
        """``{"stage", "reason"}`` when --llm-stop-on saturation ended the sweep early, else None."""

    # -- life cycle ---------------------------------------------------------------------------------------
    @property
    def board(self) -> StageBoard:
        return self.runner.environment.llm.stage_board

    def plan(self) -> list[Step]:
        return self.build(self.runner.environment.parsed_options)

    def finish(self) -> None:
        """Forget the run's progress (called when a test stops); the next run starts from the first step."""
        self._progress = None

    @property
    def current_step(self) -> Step | None:
        p = self._progress
        return p.steps[p.i] if p is not None and p.i < len(p.steps) else None

    def progress(self) -> dict | None:
        """Where the sweep is, for the web UI's stage view: the step (1-based, of how many), its measured stage's
        name, users and rate, the phase (``settle``: waiting for the users, ``warmup``, ``hold``: measuring), the
        seconds spent in it and the seconds left (None while settling); None before the first tick or after."""
        p, step = self._progress, self.current_step
        if p is None or step is None:
            return None
        spent = max(0.0, self._clock() - p.since) if p.phase != "enter" else 0.0
        length = {"warmup": step.warmup, "hold": step.duration}.get(p.phase)
        return {"step": p.i + 1, "steps": len(p.steps), "stage": step.stage.name, "users": step.users,
                "rate": step.stage.rate, "phase": p.phase, "phase_s": spent, "phase_len_s": length,
                "left_s": None if length is None else max(0.0, length - spent)}

    def _begin(self) -> _Progress | None:
        try:
            steps = self.plan()
        except PlanError as e:
            logger.error("%s: %s; stopping the test", type(self).__name__, e)
            return None
        self.board.reset()
        self.saturation_stop = None
        logger.info("%s: %d stages: %s", type(self).__name__, len(steps), ", ".join(s.stage.name for s in steps))
        return _Progress(steps)

    # -- the schedule -------------------------------------------------------------------------------------
    def tick(self) -> tuple[int, float] | None:
        if self._progress is None:
            self._progress = self._begin()
            if self._progress is None:
                return None
        p = self._progress
        now = self._clock()
        while p.i < len(p.steps):
            step = p.steps[p.i]
            if p.phase == "enter":
                self.board.set(step.warmup_stage or step.stage)
                p.phase, p.since = "settle", now
            if p.phase == "settle":
                if not self._settled(step, now - p.since):
                    return step.users, step.spawn_rate
                p.phase, p.since = "warmup", now
            if p.phase == "warmup":
                if now - p.since < step.warmup:
                    return step.users, step.spawn_rate
                self.board.set(step.stage)
                p.phase, p.since = "hold", now
            if now - p.since < step.duration:
                return step.users, step.spawn_rate
            p.i, p.phase = p.i + 1, "enter"
            if p.i < len(p.steps) and self._over_saturated(p.steps[: p.i - 1]):
                break
        self.board.close()
        logger.info("%s: last stage done", type(self).__name__)
        return None

    def _over_saturated(self, done: list[Step]) -> bool:
        """With ``--llm-stop-on saturation``: True (and ``saturation_stop`` set) when the saturation verdict over the
        measured stages ``done`` names one. Called as each stage ends, over the stages before it, whose requests
        have all been reported by then (the stage just ended is judged when the next one ends)."""
        options = self.runner.environment.parsed_options
        wanted = {x.strip() for x in str(getattr(options, "llm_stop_on", None) or "").split(",")}
        judge = getattr(self.board, "judge", None)
        if SATURATION_STOP not in wanted or judge is None or len(done) < 2:
            return False
        rows = []
        for step in done:
            v = judge(step.stage.name, None)
            rows.append({"name": step.stage.name, "users": step.users, "rate": step.stage.rate,
                         "requests": v.get("requests"), "output_per_s": v.get("output_per_s"),
                         "ttft_ms": {"p99": v.get("ttft_p99_ms")}})
        found = verdict(rows)
        if found["stage"] is None:
            return False
        self.saturation_stop = found
        logger.warning("%s: --llm-stop-on saturation: ending the sweep: %s", type(self).__name__, found["reason"])
        return True

    def _settled(self, step: Step, waited: float) -> bool:
        running = self.runner.user_count
        if running == step.users:
            return True
        patience = step.users / step.spawn_rate + SETTLE_GRACE_S
        if waited > patience:
            logger.warning(
                "%s: %d of %d users running after %.0f s; holding %s anyway",
                type(self).__name__, running, step.users, waited, step.stage.name,
            )
            return True
        return False


class ConcurrencySweepShape(SweepShape):
    """Closed loop at each ``--sweep-users`` level in turn."""

    plan_name = "concurrency-sweep"
    build = staticmethod(concurrency_plan)


class LengthSweepShape(SweepShape):
    """Closed loop at -u users; each stage draws prompt lengths from one ``--length-sweep`` SPEC."""

    plan_name = "length-sweep"
    build = staticmethod(length_plan)


class RateSweepShape(SweepShape):
    """Open loop: a pool of ``--max-concurrency`` users sends at each ``--request-rate`` in turn (see pacer)."""

    plan_name = "rate-sweep"
    build = staticmethod(rate_plan)



class TraceReplayShape(SweepShape):
    """Open loop on a trace's clock: a pool of ``--max-concurrency`` users sends ``--trace``'s lines (see pacer)."""

    plan_name = "trace-replay"
    build = staticmethod(trace_plan)
