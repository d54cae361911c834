"""What other packages add to the summary: named sections, and sinks that receive the final summary.

A section is ``fn(view, summary) -> value`` and fills ``summary[name]``: a function of the run's read-only
view (:class:`~telemetry.view.RunView`) and of the summary built so far (read it, do not change it). A sink
is ``fn(summary)``, called once with the final summary on the master (or a local run). A failing section
becomes ``{"error": ...}`` and a failing sink a log line; neither loses the rest.

    hooks = environment.llm_telemetry.hooks
    hooks.add_section("saturation", lambda view, summary: verdict(summary["stages"]))
    hooks.on_summary(lambda summary: write_report(summary))
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from telemetry.view import RunView

log = logging.getLogger(__name__)

Section = Callable[[RunView, dict], object]
Sink = Callable[[dict], None]


class SummaryHooks:
    """The registry of summary sections and end-of-run sinks of one process."""

    def __init__(self) -> None:
        self.sections: dict[str, Section] = {}
        self.sinks: list[Sink] = []
        self.preparers: list[Callable[[], None]] = []

    def add_section(self, name: str, fn: Section) -> None:
        """``fn(view, summary)`` fills ``summary[name]`` (attribution, saturation, versions...); a name once."""
        self.sections[name] = fn

    def on_summary(self, fn: Sink) -> None:
        """``fn(summary)`` is called once with the final summary on the master (report writer...)."""
        self.sinks.append(fn)

    def before_final(self, fn: Callable[[], None]) -> None:
        """``fn()`` is called once at the end of the run, just before the final summary is built (e.g. the
        trace join waiting for the last spans)."""
        self.preparers.append(fn)

    def prepare_final(self) -> None:
        for fn in self.preparers:
            deliver_to(getattr(fn, "__qualname__", repr(fn)), fn)

    def fill(self, view: RunView, summary: dict) -> None:
        """Run every section into ``summary`` in registration order (over a copy: a section registered while a
        summary is being built — a test starting while the web UI's live charts read one — waits for the next)."""
        for name, fn in list(self.sections.items()):
            try:
                summary[name] = fn(view, summary)
            except Exception as e:  # a broken provider must not lose the rest of the summary
                log.error(f"summary section {name!r} failed: {type(e).__name__}: {e}")
                summary[name] = {"error": f"{type(e).__name__}: {e}"}

    def deliver(self, summary: dict) -> None:
        """Hand the final summary to every sink; one failing sink does not stop the others."""
        for fn in self.sinks:
            deliver_to(getattr(fn, "__qualname__", repr(fn)), lambda fn=fn: fn(summary))


def deliver_to(name: str, fn: Callable[[], object]) -> None:
    """Run one sink, logging (not raising) its failure."""
    try:
        fn()
    except Exception as e:  # one failing sink must not stop the others
        log.error(f"LLM {name} sink failed: {type(e).__name__}: {e}")
