"""``environment.llm``: the one place where the layers share a Locust environment's LLM state.

Each field is written by one layer (named in its comment) and read by that layer and the ones above it; a field
holding a higher layer's object is typed ``Any`` here (this package may import nothing of the project) and names
its class. Readers use the field — it always exists, ``None`` meaning "that layer is not installed / not yet".

    ctx = attach(environment)          # every install() and a user on a bare environment (tests): created once
    environment.llm.stage_board.current.name
    environment.llm.hooks.add_section("name", fn, empty=...)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from run.hooks import SummaryHooks


@dataclass(eq=False)
class RunContext:
    """One Locust process's LLM run state, shared across the layers (``environment.llm``)."""

    hooks: SummaryHooks = field(default_factory=SummaryHooks)
    """The summary's sections and sinks (run/hooks.py). Every layer adds to it at install; telemetry builds and
    delivers the summary."""

    # -- shapes/ ---------------------------------------------------------------------------------------------
    stage_board: Any = None
    """``shapes.stage.StageBoard``: the current stage and the stage history (shapes/plugin.py)."""
    pacer: Any = None
    """``shapes.pacer.Pacer`` while an open-loop or trace stage runs, else None (shapes/propagation.py)."""
    shape_tally: Any = None
    """``shapes.openloop.OpenLoopTally``: the open-loop counters behind the ``open_loop`` section (shapes/plugin.py)."""

    # -- users/ ----------------------------------------------------------------------------------------------
    settings: Any = None
    """``users.settings.RunSettings``: this process's request settings, built at test_start (users/plugin.py; a
    user on an environment without the plugin builds its own, users/base.py)."""
    inflight: Any = None
    """``users.inflight.Inflight``: the live requests of this process (users/plugin.py)."""
    stall_watch: Any = None
    """``users.watchdog.StallWatch`` while a run with the users plugin runs, else None (users/plugin.py)."""
    tokenizer: Any = None
    """``workload.tokenizers.Chosen``: the tokenizer the users count with, for the run record (users/plugin.py)."""
    route_tokenizers: dict | None = None
    """Each route version's tokenizer record, with --route-table (users/plugin.py)."""
    dataset: dict | None = None
    """--dataset's record and selection for the run record's ``dataset`` (users/plugin.py)."""
    budget: Any = None
    """``users.budget.Budget``: this process's share of --num-requests, else None (users/budget.py)."""
    stopped_by: dict | None = None
    """Why the run stopped early (``--num-requests`` done, workers lost), the run record's ``stopped_by``
    (users/budget.py)."""

    # -- telemetry/ ------------------------------------------------------------------------------------------
    telemetry: Any = None
    """``telemetry.hub.TelemetryHub``: the run's numbers, views and summary (telemetry/plugin.py)."""
    traces: Any = None
    """``telemetry.traces.join.TraceJoin`` with --otlp-receiver, else None (telemetry/traces/plugin.py)."""
    client_load: Any = None
    """``telemetry.control.client_load.ClientLoad``: the client saturation guard (telemetry/control/client_load.py)."""


def attach(environment) -> RunContext:
    """``environment.llm``, created on first use (each layer's ``install``; a bare environment in tests)."""
    ctx = environment.__dict__.get("llm")
    if ctx is None:
        ctx = environment.llm = RunContext()
    return ctx
