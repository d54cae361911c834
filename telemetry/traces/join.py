"""Client records and server spans matched by trace id (or by our request id the server echoes), in bounded
memory — or, for a request that carries the server's in-band record (vLLM's ``--enable-per-request-metrics``,
:class:`users.result.ServerRecord`), joined with that record alone: no collector needed. Spans win: with a receiver
a record waits for its span, and only one still waiting at the end (:meth:`TraceJoin.settle_in_band`) is joined
from its in-band record.

A client record is what the join needs of one :class:`~users.result.GenerationResult` (a tuple, shipped from
the workers under ``llm_traces`` in ``report_to_master``); a server span is an ``llm_request`` span. Whichever
comes first waits in a bounded pending table (oldest evicted and counted); a batch request waits for one span
per prompt (their maxima are its server times). Joined requests are kept up to ``max_joined`` (then counted).

    join = TraceJoin()
    join.add_client(client_record(result))
    join.add_spans(spans)                      # from the OTLP receiver
    join.settle_in_band()                      # at the end: the unjoined records with an in-band record
    join.joined[0].server_ttft_s, join.counts()
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import NamedTuple

from telemetry.traces.otlp import ServerSpan
from users.result import GenerationResult
from users.tracing import trace_id_of

MAX_PENDING = 65536
"""Client records (and span groups) waiting for their other half; the oldest beyond this is dropped, counted."""
MAX_JOINED = 200_000
"""Joined requests kept for the tail analysis (about 200 bytes each); later ones are counted, not kept."""


class ClientRecord(NamedTuple):
    """The client's side of one request, as the join needs it (seconds)."""

    trace_id: str
    request_id: str
    ok: bool
    ttft_s: float | None
    e2e_s: float
    ttfa_s: float | None
    stage: str
    user_class: str
    batch_size: int
    error_kind: str | None
    in_band: tuple | None = None
    """The server's in-band (queue, TTFT, generation) seconds (:func:`in_band_of`), None without them."""


def in_band_of(r: GenerationResult) -> tuple[float, float, float] | None:
    """(queue, TTFT from scheduled, generation) of the result's in-band record; None unless it has all three."""
    rec = r.server
    if rec is None or rec.queue_s is None or rec.ttft_s is None or rec.generation_s is None:
        return None
    return rec.queue_s, rec.ttft_s, rec.generation_s


def client_record(r: GenerationResult) -> ClientRecord | None:
    """None for a result without one of our request ids."""
    m = r.meta
    tid = trace_id_of(m.request_id) if m.request_id else None
    if tid is None:
        return None
    return ClientRecord(tid, m.request_id, r.ok, r.ttft_s, r.e2e_s, r.ttfa_s, m.stage, m.user_class, m.batch_size,
                        r.error_kind, in_band_of(r))


@dataclass(frozen=True, slots=True)
class Joined:
    """One request seen from both ends (seconds; server values None where the span lacked them)."""

    client: ClientRecord
    server_ttft_s: float | None
    server_e2e_s: float | None
    queue_s: float | None
    prefill_s: float | None
    decode_s: float | None
    inference_s: float | None
    server_request_id: str | None
    spans: int
    """Server spans joined (0: joined from the in-band record)."""

    @property
    def source(self) -> str:
        return "span" if self.spans else "in_band"


_OUR_ID = re.compile(r"[0-9a-f]{8}-[0-9]+-[0-9]+")


def _key(s: ServerSpan) -> str:
    """The trace id the span belongs to: from the request id the server echoes (vLLM: ``chatcmpl-<X-Request-Id>``)
    when it holds one of ours — so a proxy that drops ``traceparent`` but keeps ``X-Request-Id`` still joins —
    else the span's own trace id."""
    if s.request_id:
        m = _OUR_ID.search(s.request_id)
        if m is not None and (tid := trace_id_of(m.group(0))) is not None:
            return tid
    return s.trace_id


def _max(values) -> float | None:
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


def _combine(c: ClientRecord, spans: list[ServerSpan]) -> Joined:
    return Joined(
        client=c, server_ttft_s=_max(s.ttft_s for s in spans), server_e2e_s=_max(s.e2e_s for s in spans),
        queue_s=_max(s.queue_s for s in spans), prefill_s=_max(s.prefill_s for s in spans),
        decode_s=_max(s.decode_s for s in spans), inference_s=_max(s.inference_s for s in spans),
        server_request_id=spans[0].request_id, spans=len(spans),
    )


def _from_in_band(c: ClientRecord) -> Joined:
    """vLLM's in-band clocks start at the engine's queue: queue = arrival to scheduled, TTFT = scheduled to first
    token (the prefill part), generation = first to last token (decode); the server's TTFT and E2E as a span has
    them are their sums."""
    queue, ttft, gen = c.in_band  # type: ignore[misc]
    return Joined(client=c, server_ttft_s=queue + ttft, server_e2e_s=queue + ttft + gen, queue_s=queue,
                  prefill_s=ttft, decode_s=gen, inference_s=ttft + gen, server_request_id=None, spans=0)


class TraceJoin:
    def __init__(self, max_pending: int = MAX_PENDING, max_joined: int = MAX_JOINED) -> None:
        self.max_pending, self.max_joined = max_pending, max_joined
        self.spans_expected = True
        """A receiver takes spans: a record waits for its span; False: records are joined from in-band at once."""
        self.reset()

    def reset(self) -> None:
        self._clients: OrderedDict[str, ClientRecord] = OrderedDict()
        self._spans: OrderedDict[str, list[ServerSpan]] = OrderedDict()
        self.joined: list[Joined] = []
        self.spans_received = 0
        self.other_spans = 0
        self.bad_exports = 0
        self.joined_ok = 0
        self.joined_failed = 0
        self.not_kept = 0
        self.evicted_clients = 0
        self.evicted_spans = 0
        self.joined_in_band = 0

    # ---- input -----------------------------------------------------------------------------
    def add_client(self, rec: ClientRecord) -> None:
        if not self.spans_expected:
            if rec.in_band is not None:
                self._join(rec, [])
            return
        spans = self._spans.get(rec.trace_id)
        if spans is not None and len(spans) >= rec.batch_size:
            del self._spans[rec.trace_id]
            self._join(rec, spans)
            return
        self._clients[rec.trace_id] = rec
        if len(self._clients) > self.max_pending:
            self._clients.popitem(last=False)
            self.evicted_clients += 1

    def add_spans(self, spans: list[ServerSpan], other: int = 0) -> None:
        self.spans_received += len(spans)
        self.other_spans += other
        for s in spans:
            key = s.trace_id if s.trace_id in self._clients else _key(s)
            group = self._spans.get(key)
            if group is None:
                group = self._spans[key] = []
                if len(self._spans) > self.max_pending:
                    _tid, dropped = self._spans.popitem(last=False)
                    self.evicted_spans += len(dropped)
            group.append(s)
            rec = self._clients.get(key)
            if rec is not None and len(group) >= rec.batch_size:
                del self._clients[key]
                del self._spans[key]
                self._join(rec, group)

    def settle_in_band(self) -> None:
        """At the end: the records still waiting for a span that carry an in-band record are joined from it."""
        for tid, rec in list(self._clients.items()):
            if rec.in_band is not None:
                del self._clients[tid]
                self._join(rec, [])

    def _join(self, rec: ClientRecord, spans: list[ServerSpan]) -> None:
        """Join ``rec`` with its ``spans`` (none: with its in-band record)."""
        if rec.ok:
            self.joined_ok += 1
        else:
            self.joined_failed += 1
        if not spans:
            self.joined_in_band += 1
        if len(self.joined) < self.max_joined:
            self.joined.append(_combine(rec, spans) if spans else _from_in_band(rec))
        else:
            self.not_kept += 1

    # ---- state -----------------------------------------------------------------------------
    def waiting_ok(self) -> int:
        """Completed (ok) client requests whose span has not come (yet)."""
        return sum(1 for r in self._clients.values() if r.ok)

    def counts(self) -> dict:
        """The summary's ``traces`` counters: ``joined`` (ok requests joined with their span), ``unmatched``
        (server spans joined with no client request, evicted ones included), ``requests_unjoined`` (ok
        requests without a span), and the rest."""
        waiting = self.waiting_ok()
        return {
            "spans": self.spans_received,
            "joined": self.joined_ok,
            "joined_failed": self.joined_failed,
            "unmatched": sum(len(g) for g in self._spans.values()) + self.evicted_spans,
            "requests_unjoined": waiting + self.evicted_clients,
            "other_spans": self.other_spans,
            "bad_exports": self.bad_exports,
            "not_kept": self.not_kept,
            "joined_in_band": self.joined_in_band,
        }
