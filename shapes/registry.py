"""The load shapes, one entry each: everything else (``--shape``'s choices and help, the plan a name runs,
the web UI's start form check in webui/shape_form.py, the options that imply a shape, the ``-u`` warning)
is read from here.

    SHAPES["rate-sweep"].plan(options)      # the steps, or PlanError
    shape_names()                           # ("none", "concurrency-sweep", ..., "rate-sweep", "trace-replay")
    implied_shapes(options)                 # ["rate-sweep"] when only --request-rate is given

Adding a shape: write its plan function (``shapes/plan.py``: options -> list of Step, PlanError naming the
option), a :class:`~shapes.sweep.SweepShape` subclass naming it (``plan_name``, ``build``), and one
``register(Shape(...))`` below; its own options go to ``shapes/options.py`` with their grammar and defaults
in ``shapes/values.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from shapes.plan import Step
from shapes.search import SloSearchShape
from shapes.sweep import ConcurrencySweepShape, LengthSweepShape, RateSweepShape, SweepShape, TraceReplayShape

NONE = "none"
"""``--shape none``: no shape, Locust's plain -u/-r behaviour."""


@dataclass(frozen=True, slots=True)
class Shape:
    """One load shape as the options, the plugin and the web UI see it."""

    shape_class: type[SweepShape]
    """The LoadTestShape that runs it; its ``plan_name`` is the ``--shape`` name, its ``build`` the plan."""
    help: str
    """What ``--shape``'s help says about it, in brackets after the name (the options it reads)."""
    implied_by: str
    """The option (argparse dest) that, given without ``--shape``, picks this shape."""
    fields: tuple[str, ...]
    """The options (argparse dests) its plan reads; the web UI passes these from the start form to the plan."""
    users_from: str | None = None
    """What sets its user count when -u is ignored (named in the warning); None: it reads -u."""

    @property
    def name(self) -> str:
        return self.shape_class.plan_name

    @property
    def plan(self) -> Callable[..., list[Step]]:
        """parsed options -> the steps (raises :class:`~shapes.plan.PlanError`)."""
        return self.shape_class.build


SHAPES: dict[str, Shape] = {}
"""``--shape`` name -> its entry, in the order ``--shape`` lists them."""


def register(shape: Shape) -> Shape:
    """Add a shape (its name must be new; it reads -u or says what sets its user count instead)."""
    if shape.name in SHAPES or shape.name == NONE or not shape.name:
        raise ValueError(f"shape name {shape.name!r} is empty or taken")
    if (shape.users_from is None) != ("num_users" in shape.fields):
        raise ValueError(f"shape {shape.name!r}: read num_users (-u) or name what sets the user count in users_from")
    SHAPES[shape.name] = shape
    return shape


def shape_names() -> tuple[str, ...]:
    """``--shape``'s choices: ``none`` and every registered shape."""
    return (NONE, *SHAPES)


def shape_help() -> str:
    """``--shape``'s help text."""
    listed = ", ".join(f"{s.name} ({s.help})" for s in SHAPES.values())
    return f"Load shape: {listed}. '{NONE}' keeps Locust's plain -u/-r behaviour."


def implied_shapes(options) -> list[str]:
    """The shapes whose ``implied_by`` option is set in ``options`` (``--request-rate 8`` alone -> rate-sweep)."""
    return [s.name for s in SHAPES.values() if getattr(options, s.implied_by, None)]


_STAGES = ("stage_duration", "stage_warmup")

register(Shape(
    ConcurrencySweepShape,
    help="--sweep-users",
    implied_by="sweep_users",
    fields=("sweep_users", "spawn_rate", *_STAGES),
    users_from="the --sweep-users levels",
))
register(Shape(
    LengthSweepShape,
    help="-u users, --length-sweep",
    implied_by="length_sweep",
    fields=("length_sweep", "num_users", "spawn_rate", *_STAGES),
))
register(Shape(
    RateSweepShape,
    help="open loop, --request-rate",
    implied_by="request_rate",
    fields=("request_rate", "arrival", "max_concurrency", *_STAGES),
    users_from="--max-concurrency",
))
register(Shape(
    TraceReplayShape,
    help="open loop on a trace's clock, --trace",
    implied_by="trace",
    fields=("trace", "trace_speedup", "max_concurrency", "stage_warmup"),
    users_from="--max-concurrency",
))
register(Shape(
    SloSearchShape,
    help="capacity under SLO: --search-users LO:HI or --search-rate LO:HI, --slo-*",
    implied_by="search_users",
    fields=("search_users", "search_rate", "search_precision", "search_max_probes", "arrival", "max_concurrency",
            "spawn_rate", *_STAGES),
    users_from="--search-users (or --max-concurrency with --search-rate)",
))
