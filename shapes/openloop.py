"""What the open-loop pacers did, per stage, summed over workers: the summary's ``open_loop`` section.

Each worker adds its pacer's counters to ``report_to_master`` under ``"llm_pacer"``; the master sums them
(a local run reads its own pacer). ``scheduled`` counts slots users took, ``late`` those that were
already due (every user busy: the request waited in the client), ``unsent`` slots no user took before
the stage ended — together they show a rate the client could not keep instead of hiding it. A replayed trace's
stage also names its ``trace_lines`` (scheduled + unsent = trace_lines once every process has reported) and
``trace_speedup``.

    {"arrival": "poisson", "stages": [{"name": "rate=8", "rate": 8.0, "duration_s": 30.0,
      "scheduled": 239, "late": 12, "unsent": 0, "offered_rps": 7.97}]}
"""

from __future__ import annotations

from locust.runners import MasterRunner, WorkerRunner

from shapes.values import ARRIVAL_DEFAULT

REPORT_KEY = "llm_pacer"
TRACE_ARRIVAL = "trace"
"""The section's ``arrival`` when the sends followed a trace's clock (``--trace``), not an arrival process."""


def merge_counts(into: dict[str, dict[str, int]], more: dict[str, dict[str, int]]) -> None:
    for stage, counts in (more or {}).items():
        mine = into.setdefault(stage, {"scheduled": 0, "late": 0, "unsent": 0})
        for k in mine:
            mine[k] += int(counts.get(k, 0))


class OpenLoopTally:
    def __init__(self, environment, propagation) -> None:
        self.environment = environment
        self.counts: dict[str, dict[str, int]] = {}
        self._unreported: dict[str, dict[str, int]] = {}
        propagation.on_pacer_done = self._pacer_done

    def register(self) -> OpenLoopTally:
        runner, events = self.environment.runner, self.environment.events
        if isinstance(runner, WorkerRunner):
            events.report_to_master.add_listener(self._on_report_to_master)
        elif isinstance(runner, MasterRunner):
            events.worker_report.add_listener(self._on_worker_report)
        events.test_start.add_listener(self._on_test_start)
        return self

    def _on_test_start(self, environment, **_kw) -> None:
        if not isinstance(environment.runner, WorkerRunner):
            self.counts = {}

    def _pacer_done(self, pacer) -> None:
        merge_counts(self._unreported, pacer.take_stats())

    def _take(self) -> dict[str, dict[str, int]]:
        out, self._unreported = self._unreported, {}
        pacer = self.environment.llm.pacer
        if pacer is not None:
            merge_counts(out, pacer.take_stats())
        return out

    def _on_report_to_master(self, client_id, data: dict, **_kw) -> None:
        counts = self._take()
        if counts:
            data[REPORT_KEY] = counts

    def _on_worker_report(self, client_id, data: dict, **_kw) -> None:
        merge_counts(self.counts, data.get(REPORT_KEY) or {})

    def section(self, _view=None, _summary=None) -> dict | None:
        """The ``open_loop`` summary section, or None when no stage had a rate."""
        if not isinstance(self.environment.runner, (WorkerRunner, MasterRunner)):
            merge_counts(self.counts, self._take())
        board = self.environment.llm.stage_board
        history = board.history
        closed = getattr(board, "closed_at", None)  # a sweep's last stage ends when the sweep finished it
        rows = []
        for i, (stage, _wall, start) in enumerate(history):
            if stage.rate is None:
                continue
            end = history[i + 1][2] if i + 1 < len(history) else (closed[1] if closed else None)
            c = self.counts.get(stage.name, {"scheduled": 0, "late": 0, "unsent": 0})
            row = {"name": stage.name, "rate": stage.rate, "warmup": stage.warmup, **c}
            if stage.trace_speedup is not None:  # a replayed trace: its lines, all taken (scheduled) or unsent
                row["trace_lines"], row["trace_speedup"] = stage.trace_lines, stage.trace_speedup
            if end is not None and end > start:
                row["duration_s"] = round(end - start, 3)
                row["offered_rps"] = round((c["scheduled"] + c["unsent"]) / (end - start), 3)
            rows.append(row)
        if not rows:
            return None
        arrival = getattr(self.environment.parsed_options, "arrival", None) or ARRIVAL_DEFAULT
        if any("trace_lines" in row for row in rows):
            arrival = TRACE_ARRIVAL
        return {"arrival": arrival, "stages": rows}
