"""The LoadTestShape classes: a sweep walks its plan one step at a time and keeps the stage board current.

For every step (:meth:`SweepShape._advance`, the one phase machine, which the capacity search shares): ask for the
step's user count and stamp results with its warm-up stage (with ``--stage-warmup`` > 0; else with the measured
stage itself, ramp included); once that many users are actually running (``runner.user_count``) wait
``--stage-warmup`` seconds; then switch the board to the measured stage and hold it for ``--stage-duration``
seconds (so ramp time never eats the dwell).
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
class StepPhase:
    """Where one step is in its phases, as :meth:`SweepShape._advance` moves it: ``enter`` (the board shows the
    warm-up stage) -> ``settle`` (waiting for the step's users to run) -> ``warmup`` -> ``hold`` (the measured
    stage is on the board); a subclass may add phases after ``hold`` (the capacity search's ``judge``)."""

    step: Step
    phase: str = "enter"
    since: float = 0.0
    """When the current phase began (the shape's clock)."""


@dataclass(slots=True)
class _Progress:
    steps: list[Step]
    i: int = 0
    at: StepPhase | None = None
    """The current step's phase (None until the step is entered)."""


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
        """Where the sweep is, for the web UI's stage view (:meth:`_phase_view`); None before the first tick or
        after the last step."""
        p, step = self._progress, self.current_step
        if p is None or step is None:
            return None
        return self._phase_view(p.at or StepPhase(step), p.i + 1, len(p.steps))

    def _phase_view(self, at: StepPhase, number: int, of: int) -> dict:
        """A step's place for the stage view: its number (1-based, of how many), its measured stage's name, users
        and rate, the phase (``settle``: waiting for the users, ``warmup``, ``hold``: measuring, or a subclass's
        own), the seconds spent in it and the seconds left (None where the phase has no set length)."""
        step = at.step
        spent = max(0.0, self._clock() - at.since) if at.phase != "enter" else 0.0
        length = {"warmup": step.warmup, "hold": step.duration}.get(at.phase)
        return {"step": number, "steps": of, "stage": step.stage.name, "users": step.users,
                "rate": step.stage.rate, "phase": at.phase, "phase_s": spent, "phase_len_s": length,
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
            if p.at is None:
                p.at = StepPhase(p.steps[p.i])
            if not self._advance(p.at, now):
                return p.at.step.users, p.at.step.spawn_rate
            p.i, p.at = p.i + 1, None
            if p.i < len(p.steps) and self._over_saturated(p.steps[: p.i - 1]):
                break
        self.board.close()
        logger.info("%s: last stage done", type(self).__name__)
        return None

    def _advance(self, at: StepPhase, now: float, stop_early: Callable[[float], bool] | None = None) -> bool:
        """Move one step through its phases as far as ``now`` allows: enter (the board shows the warm-up stage, or
        the measured one without a warm-up), settle (until the step's users run, :meth:`_settled`), warm-up
        (``step.warmup`` s), then the measured stage on the board for the hold. True once the hold is over: after
        ``step.duration`` s, or earlier when ``stop_early(seconds held)`` says so. Called with ``at.phase`` one of
        these four."""
        step = at.step
        if at.phase == "enter":
            self.board.set(step.warmup_stage or step.stage)
            at.phase, at.since = "settle", now
        if at.phase == "settle":
            if not self._settled(step, now - at.since):
                return False
            at.phase, at.since = "warmup", now
        if at.phase == "warmup":
            if now - at.since < step.warmup:
                return False
            self.board.set(step.stage)
            at.phase, at.since = "hold", now
        held = now - at.since
        return held >= step.duration or (stop_early is not None and stop_early(held))

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
