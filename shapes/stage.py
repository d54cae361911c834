"""The current load stage, shared by shapes (which set it), users (which stamp it on each result)
and telemetry (which labels metrics with it).

On the master the shape sets the board; workers receive the same :class:`Stage` as a dict in the
``llm_stage`` custom message and set their own board. Without a shape there is one stage, "main".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

MESSAGE_TYPE = "llm_stage"


@dataclass(frozen=True, slots=True)
class Stage:
    name: str
    """Unique within a run, e.g. ``users=16`` or ``len=zipf:1.2:16:4096`` or ``rate=8``."""
    index: int = 0
    users: int | None = None
    rate: float | None = None
    """Total requests/s across all workers (open loop), else None."""
    input_len: str | None = None
    """Input-length SPEC of this stage, None = the ``--input-len`` option."""
    warmup: bool = False
    """Results sent during warm-up are left out of the stage's numbers."""
    trace_speedup: float | None = None
    """Replays ``--trace`` at this speed (open loop; a warm-up twin holds the users until it starts), else None."""
    trace_lines: int | None = None
    """The trace's requests (all workers), with ``trace_speedup``."""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Stage:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


MAIN = Stage("main")


class StageBoard:
    """Holds the current stage and its history (start times from ``time.perf_counter``)."""

    def __init__(self) -> None:
        self.current: Stage = MAIN
        self.history: list[tuple[Stage, float, float]] = []  # (stage, wall start, perf start)
        self._listeners: list[Callable[[Stage], None]] = []
        self.closed_at: tuple[float, float] | None = None
        """(wall, perf) when a sweep finished its last stage (the run may take longer to stop); else None."""
        self.judge: Callable[[str, float | None], dict] | None = None
        """On the master (or a local run) telemetry's SLO verdict of a stage (``shapes.search.Judge``), for the
        capacity search; None on a worker."""

    def set(self, stage: Stage) -> None:
        if stage == self.current and self.history:
            return
        self.current = stage
        self.history.append((stage, time.time(), time.perf_counter()))
        for fn in list(self._listeners):
            fn(stage)

    def on_change(self, fn: Callable[[Stage], None]) -> None:
        self._listeners.append(fn)

    def reset(self) -> None:
        """Forget the history and go back to ``main`` (a new run starts); listeners are not called."""
        self.current = MAIN
        self.history = []
        self.closed_at = None

    def close(self) -> None:
        """The last stage ends now (its span stops here, not when the test has finished stopping)."""
        if self.closed_at is None:
            self.closed_at = (time.time(), time.perf_counter())
