"""Install the shapes package on a Locust environment (called from the locustfile's ``init`` listener).

Fills the run context's shapes fields (``environment.llm.stage_board``, ``.pacer`` — None until an open-loop
stage — and ``.shape_tally``), wires stage propagation (master -> workers), and — on the master or a local run —
adds the ``saturation`` and ``open_loop`` summary sections and installs the sweep
named by ``--shape`` as ``environment.shape_class``. Without ``--shape`` nothing changes: plain -u/-r and
the web UI's user-count form behave as in Locust. The web UI's ``--shape`` drop-down (its form check is
webui/shape_form.py, which calls :func:`set_shape`) and ``--class-picker`` can pick a sweep at start time too.
"""

from __future__ import annotations

import logging
import sys

from locust.runners import WorkerRunner

from run.context import attach
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


NO_SATURATION = {"stage": None, "reason": "no saturation analysis ran"}
"""The ``saturation`` section until the verdict has run."""


def _saturation(environment):
    """The ``saturation`` section: the verdict over the stages, and ``stopped_sweep`` when --llm-stop-on saturation
    ended the sweep."""

    def section(view, summary: dict) -> dict:
        shape = environment.shape_class
        stop = shape.saturation_stop if isinstance(shape, SweepShape) else None
        return saturation_section(view, summary) | ({"stopped_sweep": stop} if stop else {})

    return section


def _capacity(environment):
    """The ``capacity`` section: the capacity search's record, None when the run is not one."""

    def section(view, _summary: dict) -> dict | None:
        shape = environment.shape_class
        return shape.capacity(view.options) if isinstance(shape, SloSearchShape) else None

    return section


def install(environment) -> None:
    ctx = attach(environment)
    ctx.stage_board = StageBoard()
    ctx.pacer = None
    propagation = StagePropagation(environment).register()
    tally = ctx.shape_tally = OpenLoopTally(environment, propagation).register()
    if isinstance(environment.runner, WorkerRunner):
        return
    ctx.hooks.add_section("saturation", _saturation(environment), empty=lambda _view: dict(NO_SATURATION))
    ctx.hooks.add_section("open_loop", tally.section, empty=lambda _view: None)
    ctx.hooks.add_section("capacity", _capacity(environment), empty=lambda _view: None)
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
