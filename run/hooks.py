"""What the layers add to the summary: named sections, each with its empty value, and the sinks that receive the
final summary.

A section is ``fn(view, summary) -> value`` and fills ``summary[name]``: a function of the run's read-only view
(``telemetry.measure.view.RunView``) and of the summary built so far (read it, do not change it). Its owner also gives
its empty value, ``empty(view) -> value``: what the key holds until ``fn`` has run (the summary builder places
every section's key, with that value, after ``workers_lost``, in registration order; then runs the sections in
the same order, so a section sees the empty value of a later one). The summary builder knows no section.

A sink is ``fn(summary)``, called once with the final summary on the master (or a local run), in registration
order: the SLO gate and console table, the summary JSON, CSV and vLLM-bench files, the HTML report ... A failing
section becomes ``{"error": ...}`` and a failing sink a log line; neither loses the rest.

    hooks = environment.llm.hooks
    hooks.add_section("saturation", lambda view, summary: verdict(summary["stages"]), empty=lambda view: {...})
    hooks.on_summary(lambda summary: write_report(summary))
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

Section = Callable[[Any, dict], object]
"""``fn(view, summary) -> value`` (``view``: a ``telemetry.measure.view.RunView``)."""
Empty = Callable[[Any], object]
"""``empty(view) -> value``: the section's value when it is not run."""
Sink = Callable[[dict], None]


class SummaryHooks:
    """The registry of summary sections and end-of-run sinks of one process (``environment.llm.hooks``)."""

    def __init__(self) -> None:
        self.sections: dict[str, Section] = {}
        self.empties: dict[str, Empty] = {}
        self.sinks: list[Sink] = []
        self.preparers: list[Callable[[], None]] = []

    def add_section(self, name: str, fn: Section, empty: Empty) -> None:
        """``fn(view, summary)`` fills ``summary[name]`` (attribution, saturation, versions...); a name once.
        ``empty(view)`` is the key's value until ``fn`` has run."""
        self.sections[name] = fn
        self.empties[name] = empty

    def on_summary(self, fn: Sink) -> None:
        """``fn(summary)`` is called once with the final summary on the master (file writers, report...)."""
        self.sinks.append(fn)

    def before_final(self, fn: Callable[[], None]) -> None:
        """``fn()`` is called once at the end of the run, just before the final summary is built (e.g. the
        trace join waiting for the last spans)."""
        self.preparers.append(fn)

    def prepare_final(self) -> None:
        for fn in self.preparers:
            deliver_to(getattr(fn, "__qualname__", repr(fn)), fn)

    def empty(self, view) -> dict:
        """Every section's empty value, in registration order."""
        return {name: fn(view) for name, fn in list(self.empties.items())}

    def fill(self, view, summary: dict) -> None:
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
