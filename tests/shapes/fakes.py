"""A fake clock and runner for the sweeps' tick() schedules, no Locust runner needed."""

from __future__ import annotations

from argparse import Namespace

from run.context import RunContext
from shapes.stage import StageBoard


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


class FakeRunner:
    """user_count follows the last tick only when the test says the spawn finished."""

    def __init__(self, **options):
        base = dict(stage_duration="10", stage_warmup="0", spawn_rate=100.0, num_users=4, arrival="poisson",
                    max_concurrency="32", sweep_users=None, length_sweep=None, request_rate=None)
        self.environment = Namespace(parsed_options=Namespace(**{**base, **options}),
                                     llm=RunContext(stage_board=StageBoard()))
        self.user_count = 0


def sweep_shape(cls, **options):
    clock = Clock()
    shape = cls(clock=clock)
    shape.runner = FakeRunner(**options)
    return shape, clock, shape.runner
