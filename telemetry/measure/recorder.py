"""Per-process recorder of request results, and the mergeable state it ships to the master.

One :class:`Recorder` per process is fed by the ``request`` event listener. It keeps, per
(user class, stage, route version), quantile sketches of every latency metric, Prometheus-style
fixed-bucket histograms, and counters (requests by outcome / error kind, prompt and output tokens,
goodput). Next to that it keeps wall-clock time slots (``slot_s`` wide, aligned on the epoch so
slots from different workers line up) of TTFT / ITL / TPOT / E2E sketches for windowed views,
and the client-side KV block fill samples.

``take()`` returns the whole state as plain data and resets (what a worker puts under ``llm`` in
``report_to_master``); ``merge(state)`` adds such a state in (what the master does). The same
class serves as the master's merged store, so a local run and a distributed run share one path.

    rec = Recorder(slos)
    rec.record(result)
    master.merge(rec.take())
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from telemetry.measure.buckets import BucketHistogram
from telemetry.measure.sketch import MIN_VALUE, LogSketch
from telemetry.metrics import BOUNDS, CLIENT_METRICS, keys
from telemetry.slo import SloSet
from users.result import GenerationResult

STATE_VERSION = 1
METRICS = tuple(m.key for m in CLIENT_METRICS)
"""Sketched per cell (seconds): every client metric of telemetry.metrics."""
HIST_METRICS = keys("histogram")
"""Also kept as fixed-bucket histograms for the exporter."""
WINDOW_METRICS = keys("windowed")
"""Also kept per wall-clock slot."""
FINE_ALPHA = 0.001
"""Relative accuracy of the distribution sketches (buckets 0.2 % wide): a steady 8.3 ± 0.1 ms TPOT spans about 12 of
them, so the report's histogram shows its shape (the cells' 1 % buckets would give it three bars)."""
FINE_METRICS = tuple(m.key for m in CLIENT_METRICS if m.distribution and not m.samples)
"""Per-request metrics of the summary's ``histograms``, also sketched at FINE_ALPHA (one value per request: cheap;
per-token samples such as ITL are plotted from the cells' sketches)."""
_VALUES = tuple((m.key, m.take, m.histogram, m.windowed, m.at) for m in CLIENT_METRICS if not m.samples)
_CLIENT_VALUES = tuple(v for v, m in zip(_VALUES, (m for m in CLIENT_METRICS if not m.samples), strict=True)
                       if not m.server)
"""The per-request values of a result without the server's in-band record (the server's would all be None)."""
_SAMPLES = tuple((m.key, m.take, m.histogram, m.windowed, m.at) for m in CLIENT_METRICS if m.samples)
SLOT_ALPHA = 0.01
"""Relative accuracy of the per-slot (windowed) sketches: 1 %, half the buckets of the cells' sketches,
since a long run keeps one slot per second on the master."""
KV_BLOCK = 16
"""Tokens per KV block for the client-side block fill when the server reports no block_size
(``vllm:cache_config_info``; FlashMLA on Hopper uses 64)."""

Key = tuple[str, str, str | None]  # (user_class, stage, version)


@dataclass
class Cell:
    """Everything recorded for one (user class, stage, version)."""

    sketches: dict[str, LogSketch] = field(default_factory=lambda: {m: LogSketch() for m in METRICS})
    hists: dict[str, BucketHistogram] = field(
        default_factory=lambda: {m: BucketHistogram(BOUNDS[m]) for m in HIST_METRICS}
    )
    fine: dict[str, LogSketch] = field(default_factory=lambda: {m: LogSketch(FINE_ALPHA) for m in FINE_METRICS})
    """The distribution sketches (FINE_METRICS) the summary's ``histograms`` are binned from."""
    outcomes: Counter = field(default_factory=Counter)
    """"ok" or the error kind -> requests."""
    good: int = 0
    """ok requests that met every configured per-request SLO."""
    prompt_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    """The part of output_tokens that was reasoning (R1-style models)."""
    prompts: int = 0
    """Prompts sent (a batch request carries several)."""
    mismatch: list[int] = field(default_factory=lambda: [0, 0])
    """[sum of |client - server prompt count|, sum of server prompt counts] of the requests with usage."""

    @property
    def requests(self) -> int:
        return sum(self.outcomes.values())

    @property
    def ok(self) -> int:
        return self.outcomes.get("ok", 0)

    def merge(self, other: Cell) -> None:
        for m in METRICS:
            self.sketches[m].merge(other.sketches[m])
        for m in HIST_METRICS:
            self.hists[m].merge(other.hists[m])
        for m in FINE_METRICS:
            self.fine[m].merge(other.fine[m])
        self.outcomes.update(other.outcomes)
        self.good += other.good
        self.prompt_tokens += other.prompt_tokens
        self.output_tokens += other.output_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.prompts += other.prompts
        self.mismatch[0] += other.mismatch[0]
        self.mismatch[1] += other.mismatch[1]

    def to_dict(self, key: Key) -> dict:
        return {
            "user_class": key[0],
            "stage": key[1],
            "version": key[2],
            "outcomes": dict(self.outcomes),
            "good": self.good,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "prompts": self.prompts,
            "mismatch": list(self.mismatch),
            "sketches": {m: s.to_dict() for m, s in self.sketches.items() if s.count},
            "hists": {m: h.to_dict() for m, h in self.hists.items() if h.count},
            "fine": {m: s.to_dict() for m, s in self.fine.items() if s.count},
        }

    @classmethod
    def from_dict(cls, d: dict) -> tuple[Key, Cell]:
        c = cls()
        for m, sd in d.get("sketches", {}).items():
            if m in c.sketches:
                c.sketches[m] = LogSketch.from_dict(sd)
        for m, hd in d.get("hists", {}).items():
            if m in c.hists:
                c.hists[m] = BucketHistogram.from_dict(BOUNDS[m], hd)
        for m, sd in d.get("fine", {}).items():
            if m in c.fine:
                c.fine[m] = LogSketch.from_dict(sd)
        c.outcomes = Counter({str(k): int(v) for k, v in d.get("outcomes", {}).items()})
        c.good = int(d.get("good", 0))
        c.prompt_tokens = int(d.get("prompt_tokens", 0))
        c.output_tokens = int(d.get("output_tokens", 0))
        c.reasoning_tokens = int(d.get("reasoning_tokens", 0))
        c.prompts = int(d.get("prompts", 0))
        c.mismatch = [int(x) for x in d.get("mismatch", (0, 0))]
        return (d["user_class"], d["stage"], d.get("version")), c


@dataclass
class Slot:
    """One wall-clock slot: sketches of the window metrics plus request/error/token counts."""

    sketches: dict[str, LogSketch] = field(default_factory=lambda: {m: LogSketch(SLOT_ALPHA) for m in WINDOW_METRICS})
    requests: int = 0
    errors: int = 0
    output_tokens: int = 0
    sent: int = 0
    """Requests sent in the slot (by their t0; kept in the per-version slots: the shares before/after a fallback)."""

    def merge(self, other: Slot) -> None:
        for m in WINDOW_METRICS:
            self.sketches[m].merge(other.sketches[m])
        self.requests += other.requests
        self.errors += other.errors
        self.output_tokens += other.output_tokens
        self.sent += other.sent

    def to_dict(self, index: int) -> dict:
        return {
            "i": index,
            "sketches": {m: s.to_dict() for m, s in self.sketches.items() if s.count},
            "requests": self.requests,
            "errors": self.errors,
            "output_tokens": self.output_tokens,
            "sent": self.sent,
        }

    @classmethod
    def from_dict(cls, d: dict) -> tuple[int, Slot]:
        s = cls()
        for m, sd in d.get("sketches", {}).items():
            if m in s.sketches:
                s.sketches[m] = LogSketch.from_dict(sd)
        s.requests, s.errors, s.output_tokens = int(d["requests"]), int(d["errors"]), int(d["output_tokens"])
        s.sent = int(d.get("sent", 0))
        return int(d["i"]), s


@dataclass
class TurnStats:
    """One turn index of the conversations (``--turns``): requests, ok requests' TTFT, their prompt tokens."""

    requests: int = 0
    ok: int = 0
    prompt_tokens: int = 0
    """Prompt tokens of the ok requests (the server's count when it sent usage)."""
    ttft: LogSketch = field(default_factory=LogSketch)

    def to_dict(self) -> dict:
        return {"requests": self.requests, "ok": self.ok, "prompt_tokens": self.prompt_tokens,
                "ttft": self.ttft.to_dict()}

    def merge(self, d: dict | TurnStats) -> None:
        if isinstance(d, TurnStats):
            d = d.to_dict()
        self.requests += int(d["requests"])
        self.ok += int(d["ok"])
        self.prompt_tokens += int(d["prompt_tokens"])
        self.ttft.merge(LogSketch.from_dict(d["ttft"]))


@dataclass
class KvFill:
    """Client-side KV block fill samples of one stage: sum of per-sample ratios and their number."""

    ratio_sum: float = 0.0
    samples: int = 0
    sq_sum: float = 0.0
    """Sum of the squared ratios (the variance beside the mean)."""


class Recorder:
    """Mergeable per-process (or merged, on the master) telemetry state."""

    def __init__(self, slos: SloSet | None = None, slot_s: float = 1.0) -> None:
        self.slos = slos or SloSet()
        self.slot_s = float(slot_s)
        self._wall_offset = time.time() - time.perf_counter()
        self.kv_block = KV_BLOCK
        """Tokens per KV block of the client block fill: the server's block_size when it reports one."""
        self.kv_block_source = "fallback"
        self.reset()

    def reset(self) -> None:
        self.cells: dict[Key, Cell] = {}
        self.slots: dict[int, Slot] = {}
        self.version_slots: dict[tuple[str, int], Slot] = {}
        """Per (route version, slot): requests, errors and sent by t0, and the one-value-per-request windowed
        metrics (TTFT, E2E, ...): what a fallback rule judges (telemetry/control/routing.py)."""
        self.token_sources: Counter = Counter()
        self.kv_fill: dict[str, KvFill] = {}
        self.turns: dict[tuple[str, int], TurnStats] = {}
        """Per (stage, turn index) of the conversations (``--turns``); empty without conversations."""
        self.kv_last: tuple[int, int] | None = None
        """(used slots, allocated slots) of the latest in-flight snapshot."""

    @property
    def mismatch_abs(self) -> int:
        """Sum over requests with usage of |client prompt count - server prompt count| (every cell's)."""
        return sum(c.mismatch[0] for c in self.cells.values())

    @property
    def mismatch_server(self) -> int:
        """Sum of the server's prompt counts over the same requests."""
        return sum(c.mismatch[1] for c in self.cells.values())

    # ---- ingestion -------------------------------------------------------------------------------
    def cell(self, key: Key) -> Cell:
        c = self.cells.get(key)
        if c is None:
            c = self.cells[key] = Cell()
        return c

    def record(self, r: GenerationResult) -> None:
        """Fold one request result in (vectorized over its chunks; no loop per token)."""
        c = self.cell((r.meta.user_class, r.meta.stage, r.meta.version))
        outcome = "ok" if r.ok else (r.error_kind or "unknown")
        c.outcomes[outcome] += 1
        c.prompt_tokens += int(r.prompt_tokens)
        c.output_tokens += int(r.output_tokens)
        c.reasoning_tokens += r.reasoning_tokens
        c.prompts += int(r.meta.batch_size)
        self.token_sources[r.token_source] += 1
        if r.token_source == "usage" and r.prompt_tokens_client is not None and r.prompt_tokens > 0:
            c.mismatch[0] += abs(int(r.prompt_tokens_client) - int(r.prompt_tokens))
            c.mismatch[1] += int(r.prompt_tokens)

        if r.meta.turn is not None:
            self._turn(r)
        slot = self._slot(self._wall(r.t_end))
        slot.requests += 1
        slot.output_tokens += int(r.output_tokens)
        vend = self._version(r) if r.meta.version is not None else None  # the version's end slot; None: ended
        if not r.ok:
            slot.errors += 1
            return
        if not self.slos or self.slos.request_meets(r):
            c.good += 1
        sk, hs, fine = c.sketches, c.hists, c.fine
        for key, take, hist, windowed, at in (_VALUES if r.server is not None else _CLIENT_VALUES):
            v = take(r)
            if v is None:
                continue
            sk[key].add(v)
            if key in fine:
                fine[key].add(v)
            if hist:
                hs[key].add(v)
            if windowed:
                (slot if at is None else self._slot(self._wall(at(r)))).sketches[key].add(v)
                if vend is not None:
                    (vend if at is None else self._vslot(r.meta.version, self._wall(at(r)))).sketches[key].add(v)
        if len(r.chunk_times) < 2:
            return
        prev = binned = None  # a metric whose samples are the previous one's (ITL and inter-chunk gaps, when every
        for key, take, hist, windowed, at in _SAMPLES:  # chunk carries one token) reuses its cell binning
            v = take(r)
            if v.size == 0:
                continue
            if hist:
                hs[key].add_many(v)
            if v is prev and binned is not None and not windowed:
                sk[key].add_binned(*binned)
                continue
            prev, binned = v, None
            if not windowed:
                sk[key].add_many(v)
                continue
            vmin, vmax = float(v.min()), float(v.max())
            if vmin < 0.0 or vmax <= MIN_VALUE:  # clock oddity, or nothing but zeros: the generic path
                sk[key].add_many(v)
                for seg_slot, seg in self._segments(at(r, v), v):
                    seg_slot.sketches[key].add_many(seg)
            else:
                binned = self._add_windowed(key, sk[key], v, at(r, v), vmin, vmax)

    def _version(self, r: GenerationResult) -> Slot | None:
        """The per-version slots: sent at t0, requests and errors at the end; returns the end slot of an ok request
        (``record`` adds its windowed values there, or at the metric's time), None for a failed one."""
        self._vslot(r.meta.version, self._wall(r.t0)).sent += 1
        end = self._vslot(r.meta.version, self._wall(r.t_end))
        end.requests += 1
        if not r.ok:
            end.errors += 1
            return None
        return end

    def _vslot(self, version: str, wall_t: float) -> Slot:
        key = (version, math.floor(wall_t / self.slot_s))
        s = self.version_slots.get(key)
        if s is None:
            s = self.version_slots[key] = Slot()
        return s

    def _turn(self, r: GenerationResult) -> None:
        t = self.turns.get((r.meta.stage, r.meta.turn))
        if t is None:
            t = self.turns[(r.meta.stage, r.meta.turn)] = TurnStats()
        t.requests += 1
        if r.ok:
            t.ok += 1
            t.prompt_tokens += int(r.prompt_tokens)
            if (ttft := r.ttft_s) is not None:
                t.ttft.add(ttft)

    def _add_windowed(self, key: str, sketch: LogSketch, values: np.ndarray, perf_times: np.ndarray, vmin: float,
                      vmax: float) -> tuple:
        """Samples of metric ``key`` (all >= 0, some > MIN_VALUE, ``vmin``/``vmax`` their extremes; ``perf_times``
        sorted): take the logs once; bin for the cell's sketch and, split by time, for the slots' sketches. Zeros —
        chunks that arrived in one read share its stamp, so a busy client's ITL holds some — are counted as the
        sketches count them (``zero``). Returns the cell sketch's :meth:`~LogSketch.add_binned` arguments."""
        n, total = int(values.size), float(values.sum())
        positive = None if vmin > MIN_VALUE else values > MIN_VALUE
        logs = np.log(values if positive is None else values[positive])
        zero = n - int(logs.size)
        idx, lo, hi = sketch.index_range(logs)
        binned = (lo, np.bincount(idx - lo, minlength=hi - lo + 1), n, total, vmin, vmax, zero)
        sketch.add_binned(*binned)
        slot_idx = np.floor((perf_times + self._wall_offset) / self.slot_s).astype(np.int64)
        first, last = int(slot_idx[0]), int(slot_idx[-1])  # times are sorted
        probe = self._slot_at(first).sketches[key]
        idx, lo, hi = probe.index_range(logs)
        width = hi - lo + 1
        if first == last:
            probe.add_binned(lo, np.bincount(idx - lo, minlength=width), n, total, vmin, vmax, zero)
            return binned
        rows = last - first + 1
        at = slot_idx if positive is None else slot_idx[positive]
        grid = np.bincount((at - first) * width + (idx - lo), minlength=rows * width).reshape(rows, width)
        zeros = None if positive is None else np.bincount(slot_idx[~positive] - first, minlength=rows)
        starts = np.searchsorted(slot_idx, np.arange(first, last + 1), side="left")
        sizes = np.diff(np.append(starts, values.size))
        present = np.flatnonzero(sizes)
        sums = np.add.reduceat(values, starts[present])
        mins = np.minimum.reduceat(values, starts[present])
        maxs = np.maximum.reduceat(values, starts[present])
        for j, row in enumerate(present):
            self._slot_at(first + int(row)).sketches[key].add_binned(
                lo, grid[row], int(sizes[row]), float(sums[j]), float(mins[j]), float(maxs[j]),
                0 if zeros is None else int(zeros[row]))
        return binned

    def _segments(self, perf_times: np.ndarray, values: np.ndarray):
        idx = np.floor((perf_times + self._wall_offset) / self.slot_s).astype(np.int64)
        cuts = np.flatnonzero(np.diff(idx)) + 1
        for seg_idx, seg in zip(np.split(idx, cuts), np.split(values, cuts), strict=True):
            yield self._slot_at(int(seg_idx[0])), seg

    def _wall(self, perf_t: float) -> float:
        return perf_t + self._wall_offset

    def _slot(self, wall_t: float) -> Slot:
        return self._slot_at(math.floor(wall_t / self.slot_s))

    def _slot_at(self, i: int) -> Slot:
        s = self.slots.get(i)
        if s is None:
            s = self.slots[i] = Slot()
        return s

    def record_kv_fill(self, stage: str, inflight: list[tuple[int, int]]) -> None:
        """One sample of the in-flight requests' (prompt, generated) tokens: used / allocated slots."""
        lens = np.asarray([p + o for p, o in inflight], dtype=np.int64)
        used = int(lens.sum()) if lens.size else 0
        block = self.kv_block
        allocated = int((np.ceil(lens / block) * block).sum()) if lens.size else 0
        self.kv_last = (used, allocated)
        if allocated > 0:
            f = self.kv_fill.setdefault(stage, KvFill())
            r = used / allocated
            f.ratio_sum += r
            f.sq_sum += r * r
            f.samples += 1

    # ---- shipping and merging ---------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "v": STATE_VERSION,
            "slot_s": self.slot_s,
            "cells": [c.to_dict(k) for k, c in self.cells.items()],
            "slots": [s.to_dict(i) for i, s in self.slots.items()],
            "version_slots": [[v, s.to_dict(i)] for (v, i), s in self.version_slots.items()],
            "token_sources": dict(self.token_sources),
            "kv_fill": {st: [f.ratio_sum, f.samples, f.sq_sum] for st, f in self.kv_fill.items()},
            "kv_block": [self.kv_block, self.kv_block_source],
            "kv_last": list(self.kv_last) if self.kv_last is not None else None,
            "turns": [[st, i, t.to_dict()] for (st, i), t in self.turns.items()],
        }

    def take(self) -> dict:
        """The state as plain data, then reset (a worker's report)."""
        d = self.to_dict()
        self.reset()
        return d

    def merge(self, d: dict) -> None:
        """Add a state produced by :meth:`to_dict` / :meth:`take` (any process) into this one."""
        if d.get("v") != STATE_VERSION:
            raise ValueError(f"telemetry state version {d.get('v')!r} is not {STATE_VERSION}")
        if float(d["slot_s"]) != self.slot_s:
            raise ValueError(f"slot width {d['slot_s']} differs from {self.slot_s}")
        for cd in d["cells"]:
            key, c = Cell.from_dict(cd)
            self.cell(key).merge(c)
        for sd in d["slots"]:
            i, s = Slot.from_dict(sd)
            if i in self.slots:
                self.slots[i].merge(s)
            else:
                self.slots[i] = s
        for v, sd in d.get("version_slots", ()):
            i, s = Slot.from_dict(sd)
            if (str(v), i) in self.version_slots:
                self.version_slots[(str(v), i)].merge(s)
            else:
                self.version_slots[(str(v), i)] = s
        self.token_sources.update({str(k): int(v) for k, v in d["token_sources"].items()})
        for st, vals in d["kv_fill"].items():
            f = self.kv_fill.setdefault(st, KvFill())
            f.ratio_sum += float(vals[0])
            f.samples += int(vals[1])
            f.sq_sum += float(vals[2]) if len(vals) > 2 else 0.0
        if "kv_block" in d and (d["kv_block"][1] == "server" or self.kv_block_source != "server"):
            self.kv_block, self.kv_block_source = int(d["kv_block"][0]), str(d["kv_block"][1])
        for st, i, td in d.get("turns", ()):
            self.turns.setdefault((str(st), int(i)), TurnStats()).merge(td)

    # ---- queries (used on the merged store) --------------------------------------------------------
    def select(self, **match) -> list[Cell]:
        """Cells whose key matches, e.g. ``select(stage="users=8")``; no arguments = all cells."""
        fields = ("user_class", "stage", "version")
        return [c for k, c in self.cells.items() if all(k[fields.index(f)] == v for f, v in match.items())]

    @staticmethod
    def merged_sketch(cells: list[Cell], metric: str) -> LogSketch:
        s = LogSketch()
        for c in cells:
            s.merge(c.sketches[metric])
        return s

    @staticmethod
    def merged_fine(cells: list[Cell], metric: str) -> LogSketch:
        """The distribution sketch (FINE_ALPHA) of a FINE_METRICS metric over ``cells``."""
        s = LogSketch(FINE_ALPHA)
        for c in cells:
            s.merge(c.fine[metric])
        return s

    @staticmethod
    def merged_hist(cells: list[Cell], metric: str) -> BucketHistogram:
        h = BucketHistogram(BOUNDS[metric])
        for c in cells:
            h.merge(c.hists[metric])
        return h
