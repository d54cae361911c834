"""Per-request identity: a unique ``X-Request-Id`` and a W3C ``traceparent`` on every LLM request.

The request id is ``<run>-<worker>-<sequence>`` (run: 8 hex digits drawn once per process run; worker: the
Locust worker index; sequence: 1, 2, ... in this process). The trace id is the same three numbers in 32 hex
digits, so a server span (vLLM's ``llm_request`` continues the incoming trace context) is tied to the
request by its trace id alone, and :func:`trace_id_of` recovers it from a request id:

    ids = RequestIds(worker=0)
    rid, traceparent = ids.next()      # "1a2b3c4d-0-17", "00-1a2b3c4d000000000000000000000011-...-01"
    trace_id_of(rid) == traceparent[3:35]

The span id of ``traceparent`` is the client's own span (exported with ``--otlp-endpoint``): the server's span
is its child. Cheap: one counter step and two f-strings per request.
"""

from __future__ import annotations

import os

HEADER_REQUEST_ID = "X-Request-Id"
HEADER_TRACEPARENT = "traceparent"


class RequestIds:
    """Request ids and trace contexts of one process's run."""

    __slots__ = ("run", "worker", "seq")

    def __init__(self, worker: int = 0, run: int | None = None) -> None:
        self.run = int.from_bytes(os.urandom(4), "big") if run is None else run
        self.worker = int(worker)
        self.seq = 0

    def next(self) -> tuple[str, str]:
        """(X-Request-Id, traceparent) of the next request."""
        self.seq += 1
        rid = f"{self.run:08x}-{self.worker}-{self.seq}"
        return rid, f"00-{trace_id(self.run, self.worker, self.seq)}-{span_id(self.worker, self.seq)}-01"


def trace_id(run: int, worker: int, seq: int) -> str:
    """32 hex digits: run (8), worker (8), sequence (16); never all zero (the sequence starts at 1)."""
    return f"{run & 0xFFFFFFFF:08x}{worker & 0xFFFFFFFF:08x}{seq & 0xFFFFFFFFFFFFFFFF:016x}"


def span_id(worker: int, seq: int) -> str:
    """16 hex digits of the client's span: worker (4) and sequence (12), with the top bit set (never zero)."""
    return f"{0x8000 | (worker & 0x7FFF):04x}{seq & 0xFFFFFFFFFFFF:012x}"


def trace_id_of(request_id: str) -> str | None:
    """The trace id of one of our request ids, None for anything else."""
    parts = request_id.split("-")
    if len(parts) != 3:
        return None
    try:
        return trace_id(int(parts[0], 16), int(parts[1]), int(parts[2]))
    except ValueError:
        return None


def span_id_of(request_id: str) -> str | None:
    parts = request_id.split("-")
    try:
        return span_id(int(parts[1]), int(parts[2])) if len(parts) == 3 else None
    except ValueError:
        return None
