"""A sweep as data: the list of steps a shape walks through, built from the parsed options.

Each :class:`Step` is one measured :class:`~shapes.stage.Stage` plus how to get there (user count,
spawn rate) and how long to hold it. Stage indices count every stage in time order, warm-ups included.

    steps = concurrency_plan(options)   # [Step(stage=Stage("users=1", ...), users=1, ...), ...]

A plan function takes the parsed options and returns the steps or raises :class:`PlanError`; the shape
registry (:mod:`shapes.registry`) names each one with its shape.
"""

from __future__ import annotations

from argparse import ArgumentTypeError
from dataclasses import dataclass, replace

from shapes.stage import Stage
from shapes.trace import trace_duration
from shapes.values import (
    ARRIVAL_DEFAULT,
    MAX_CONCURRENCY_DEFAULT,
    STAGE_DURATION_DEFAULT,
    STAGE_WARMUP_DEFAULT,
    TRACE_SPEEDUP_DEFAULT,
    parse_arrival,
    parse_length_sweep,
    parse_pool,
    parse_rates,
    parse_speedup,
    parse_stage_duration,
    parse_stage_warmup,
    parse_trace,
    parse_users_list,
)
from workload import argtypes


class PlanError(ValueError):
    """An option combination that cannot make a sweep; the message names the option."""


@dataclass(frozen=True, slots=True)
class Step:
    stage: Stage
    """The measured stage."""
    users: int
    """Total user count the step runs at."""
    spawn_rate: float
    duration: float
    """Seconds the measured stage is held."""
    warmup: float = 0.0
    """Seconds of warm-up after the user count is reached and before the measured stage."""
    warmup_stage: Stage | None = None
    """The stage results are stamped with while ramping / warming up (``warmup=True``); None without
    ``--stage-warmup`` (the ramp is then part of the measured stage)."""


def _opt(options, name: str, default=None):
    value = getattr(options, name, default)
    return default if value in (None, "") else value


def _timing(options) -> tuple[float, float]:
    try:
        duration = parse_stage_duration(_opt(options, "stage_duration", STAGE_DURATION_DEFAULT))
        warmup = parse_stage_warmup(_opt(options, "stage_warmup", STAGE_WARMUP_DEFAULT))
    except (ValueError, ArgumentTypeError) as e:
        raise PlanError(str(e)) from None
    return duration, warmup


def _steps(stages: list[Stage], users: list[int], spawn_rates: list[float], options,
           pool: bool = False) -> list[Step]:
    """With ``--stage-warmup`` > 0 every stage gets a warm-up twin (the ramp to its user count and the warm-up,
    left out of its numbers); with 0 there is none: a request belongs to the stage the board shows when it is
    drawn, ramp included, so no stage loses its first wave to a stage the user never asked for. ``pool``: an open
    loop's user pool is infrastructure, not a load level: the first stage waits for it in a twin of its own (else
    the pacer's slots would pile up while the pool spawns and count as that stage's client queue)."""
    duration, warmup = _timing(options)
    steps: list[Step] = []
    index = 0
    for i, (stage, n, rate) in enumerate(zip(stages, users, spawn_rates, strict=True)):
        warm = None
        if warmup > 0 or (pool and i == 0):
            warm = replace(stage, name=f"warmup {stage.name}", index=index, warmup=True)
            index += 1
        steps.append(Step(replace(stage, index=index), n, rate, duration, warmup, warm))
        index += 1
    return steps


def _spawn_rate(options) -> float:
    rate = _opt(options, "spawn_rate", 1.0)  # 1.0: Locust's own default
    try:
        return argtypes.positive_number(rate)
    except ArgumentTypeError as e:
        raise PlanError(f"-r/--spawn-rate: {e}") from None


def _checked(parse, value, option: str):
    if value is None:
        raise PlanError(f"{option} is required by this --shape")
    try:
        return parse(value)
    except (ValueError, ArgumentTypeError) as e:
        raise PlanError(str(e)) from None


def concurrency_plan(options) -> list[Step]:
    """One stage per ``--sweep-users`` level, ramped at -r users/s."""
    levels = _checked(parse_users_list, _opt(options, "sweep_users"), "--sweep-users")
    stages = [Stage(f"users={n}", users=n) for n in levels]
    rate = _spawn_rate(options)
    return _steps(stages, levels, [rate] * len(levels), options)


def length_plan(options) -> list[Step]:
    """One stage per ``--length-sweep`` SPEC at the fixed -u user count."""
    specs = _checked(parse_length_sweep, _opt(options, "length_sweep"), "--length-sweep")
    try:
        users = argtypes.positive_int(_opt(options, "num_users", 1))
    except ArgumentTypeError:
        raise PlanError(
            f"-u/--users: {_opt(options, 'num_users')!r} must be an integer >= 1 for --shape length-sweep"
        ) from None
    stages = [Stage(f"len={spec}", users=users, input_len=spec) for spec in specs]
    return _steps(stages, [users] * len(stages), [_spawn_rate(options)] * len(stages), options)


def rate_plan(options) -> list[Step]:
    """One stage per ``--request-rate`` value; the user pool (``--max-concurrency``) is spawned at once."""
    rates = _checked(parse_rates, _opt(options, "request_rate"), "--request-rate")
    _checked(parse_arrival, _opt(options, "arrival", ARRIVAL_DEFAULT), "--arrival")
    pool = _checked(parse_pool, _opt(options, "max_concurrency", MAX_CONCURRENCY_DEFAULT), "--max-concurrency")
    stages = [Stage(f"rate={r:g}", users=pool, rate=r) for r in rates]
    return _steps(stages, [pool] * len(stages), [float(pool)] * len(stages), options, pool=True)



def trace_plan(options) -> list[Step]:
    """One stage replaying ``--trace`` at ``--trace-speedup`` with the ``--max-concurrency`` pool, held until its
    last line is due (plus a tail); before it, a warm-up twin holds the users (sending nothing) until all run
    and ``--stage-warmup`` has passed, so the trace's clock starts with every user ready."""
    trace = _checked(parse_trace, _opt(options, "trace"), "--trace")
    speedup = _checked(parse_speedup, _opt(options, "trace_speedup", TRACE_SPEEDUP_DEFAULT), "--trace-speedup")
    pool = _checked(parse_pool, _opt(options, "max_concurrency", MAX_CONCURRENCY_DEFAULT), "--max-concurrency")
    _, warmup = _timing(options)
    duration = trace_duration(trace, speedup)
    lines = len(trace.records)
    stage = Stage("trace", index=1, users=pool, rate=round(lines / duration, 6), trace_speedup=speedup,
                  trace_lines=lines)
    hold = replace(stage, name="warmup trace", index=0, rate=None, warmup=True)
    return [Step(stage, pool, float(pool), duration, warmup, hold)]
