"""``environment.llm.telemetry``: how other packages read the run's LLM numbers and add to its summary.

It writes nothing of the run: the :class:`~telemetry.measure.runstate.RunState` (written by the telemetry roles)
holds the state; :meth:`TelemetryHub.view` takes a read-only :class:`~telemetry.measure.view.RunView` of
it with this process's options, host, stage board and user count, and the summary and live figures are
functions of that view.

    hub = environment.llm.telemetry
    hub.hooks.add_section("saturation", fn, empty=...)   # fills summary["saturation"] (the run context's hooks)
    hub.hooks.on_summary(lambda summary: write_report(summary))
    hub.view(); hub.summary(); hub.live(); hub.final_summary
"""

from __future__ import annotations

from run.context import attach
from run.hooks import SummaryHooks
from telemetry.measure.runstate import RunState
from telemetry.measure.view import RunView
from telemetry.outputs.live import live
from telemetry.outputs.summary import build_summary


class TelemetryHub:
    """The read side of one process's telemetry, plus the registry of summary sections and sinks (the run
    context's, ``environment.llm.hooks``, unless given)."""

    def __init__(self, environment, merger: RunState | None = None, hooks: SummaryHooks | None = None) -> None:
        self.environment = environment
        self.merger = merger if merger is not None else RunState()
        ctx = attach(environment)
        self.hooks = hooks if hooks is not None else ctx.hooks

    def view(self) -> RunView:
        env = self.environment
        runner = getattr(env, "runner", None)
        return self.merger.view(
            options=getattr(env, "parsed_options", None),
            host=getattr(env, "host", None) or "",
            stage_board=env.llm.stage_board,
            active_users=getattr(runner, "user_count", 0) or 0,
        )

    def summary(self) -> dict:
        """The summary as of now (sections included); during a run too."""
        return build_summary(self.view(), self.hooks)

    def live(self) -> dict:
        return live(self.view())

    @property
    def final_summary(self) -> dict | None:
        """The summary the run ended with (master or local run), None while it runs."""
        return self.merger.final_summary
