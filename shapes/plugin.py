"""Install the shapes package on a Locust environment (called from the locustfile's ``init`` listener).

Creates ``environment.llm_stage_board`` and ``environment.llm_pacer`` (None until an open-loop stage),
wires stage propagation (master -> workers), and — on the master or a local run — installs the sweep
named by ``--shape`` as ``environment.shape_class``. Without ``--shape`` nothing changes: plain -u/-r and
the web UI's user-count form behave as in Locust. The web UI's ``--shape`` drop-down (its form check is
webui/shape_form.py, which calls :func:`set_shape`) and ``--class-picker`` can pick a sweep at start time too.
"""

from __future__ import annotations

import logging
import sys

from locust.runners import WorkerRunner

from shapes.openloop import OpenLoopTally
from shapes.plan import PlanError
from shapes.propagation import StagePropagation
from shapes.registry import NONE, SHAPES, implied_shapes
from shapes.saturation import section as saturation_section
from shapes.search import SloSearchShape
from shapes.stage import StageBoard
from shapes.sweep import SweepShape

logger = logging.getLogger(__name__)


def set_shape(environment, name: str | None) -> SweepShape | None:
    """Make the sweep ``name`` (a key of SHAPES) the environment's shape class; None removes a sweep."""
    current = environment.shape_class
    if name is None:
        if isinstance(current, SweepShape):
            environment.shape_class = None
        return None
    cls = SHAPES[name].shape_class
    if isinstance(current, cls):
        return current
    shape = cls()
    shape.runner = environment.runner
    environment.shape_class = shape
    return shape


def _register_pickable(environment) -> None:
    """List the sweeps in ``--class-picker``'s shape drop-down (keyed by class name, as Locust does)."""
    if environment.available_shape_classes is None:
        environment.available_shape_classes = {}
    for cls in (s.shape_class for s in SHAPES.values()):
        if cls.__name__ not in environment.available_shape_classes:
            shape = cls()
            shape.runner = environment.runner
            environment.available_shape_classes[cls.__name__] = shape


class _Sections:
    """Adds this package's summary sections to telemetry's hooks once they exist (telemetry installs after us)."""

    def __init__(self, environment, tally: OpenLoopTally) -> None:
        self.environment = environment
        self.tally = tally
        self.done = False

    def __call__(self, **_kw) -> None:
        hub = getattr(self.environment, "llm_telemetry", None)
        if self.done or hub is None:
            return
        hub.hooks.add_section("saturation", self.saturation)
        hub.hooks.add_section("open_loop", self.tally.section)
        hub.hooks.add_section("capacity", self.capacity)
        self.done = True

    def saturation(self, view, summary: dict) -> dict:
        """The saturation verdict over the stages, and ``stopped_sweep`` when --llm-stop-on saturation ended it."""
        shape = self.environment.shape_class
        stop = shape.saturation_stop if isinstance(shape, SweepShape) else None
        return saturation_section(view, summary) | ({"stopped_sweep": stop} if stop else {})

    def capacity(self, view, _summary: dict) -> dict | None:
        """The ``capacity`` section: the capacity search's record, None when the run is not one."""
        shape = self.environment.shape_class
        return shape.capacity(view.options) if isinstance(shape, SloSearchShape) else None


def install(environment) -> None:
    environment.llm_stage_board = StageBoard()
    environment.llm_pacer = None
    propagation = StagePropagation(environment).register()
    tally = OpenLoopTally(environment, propagation).register()
    environment.llm_shape_tally = tally
    if isinstance(environment.runner, WorkerRunner):
        return
    sections = _Sections(environment, tally)
    environment.events.test_start.add_listener(sections)
    environment.events.spawning_complete.add_listener(sections)
    _register_pickable(environment)
    options = environment.parsed_options
    name = _shape_name(options)
    if name is not None:
        shape = SHAPES[name]
        try:
            steps = shape.plan(options)
        except PlanError as e:
            logger.error("--shape %s: %s", name, e)
            sys.exit(2)
        set_shape(environment, name)
        logger.info("--shape %s: %s", name, ", ".join(s.stage.name for s in steps))
        if shape.users_from is not None and getattr(options, "num_users", None):
            logger.warning("-u/--users is ignored by --shape %s (users: %s)", name, shape.users_from)


def _shape_name(options) -> str | None:
    """``--shape``; without it, the one sweep option given picks its sweep (``--request-rate 8`` alone works)."""
    name = getattr(options, "shape", None) or NONE
    if name != NONE:
        return name
    implied = implied_shapes(options)
    if len(implied) > 1:
        logger.error("several sweeps asked for (%s); choose one with --shape", ", ".join(implied))
        sys.exit(2)
    return implied[0] if implied else None
