"""Time and allocation of encode calls, measured side by side for several tokenizers.

A *pass* is a fixed list of calls (one ``encode`` per text, or one ``encode_batch``). :func:`time_passes`
times the passes of several tokenizers on the same cell interleaved: each of ``repeats`` rounds runs every
tokenizer's pass back to back for at least ``seconds / repeats`` (the order flips every round, so a drift of
the machine's speed hits all of them alike) and the result is the median of the rounds' ns per pass, from
``time.perf_counter_ns`` — and the process's CPU time beside it (``time.process_time_ns``: on a shared
machine, time spent waiting for a core is not counted). :func:`allocation` reads what tracemalloc sees of one call.

    timings = time_passes({"old": lambda: tok_a.encode(text), "new": lambda: tok_b.encode(text)}, 0.2, 5)
    timings["new"].ns / timings["old"].ns        # the slowdown ratio on this cell
    retained, peak = allocation(lambda: tok_a.encode(text))   # needs tracemalloc tracing

tracemalloc traces Python's allocators only: the Rust ``tokenizers`` library allocates with its own
allocator, so the token vectors and caches inside an ``Encoding`` are invisible to it (:data:`TRACEMALLOC_NOTE`).
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

TRACEMALLOC_NOTE = (
    "tracemalloc sees Python-side allocations only (the Encoding wrappers, lists and strings crossing into "
    "Python); the Rust tokenizers library's own heap (token ids, offsets and strings inside each Encoding, "
    "its BPE caches, encode_batch's buffers) is invisible to tracemalloc"
)


@dataclass(frozen=True)
class Timing:
    ns: float
    """Median over the rounds of wall-clock ns per pass (``time.perf_counter_ns``)."""
    cpu_ns: float
    """Median over the rounds of this process's CPU ns per pass (``time.process_time_ns``, all its threads)."""
    rounds: list[float]
    """Wall-clock ns per pass of each round, in order."""
    passes: int
    """Passes timed in all rounds together."""


def time_passes(passes: dict[str, Callable[[], object]], seconds: float, repeats: int,
                warm_up: bool = True) -> dict[str, Timing]:
    """Time each pass in ``repeats`` interleaved rounds of ``>= seconds/repeats`` each.

    ``warm_up`` runs each pass once untimed first; pass False when the caller has just run the same work.
    """
    if warm_up:
        for run in passes.values():
            run()
    per_round = seconds * 1e9 / repeats
    wall: dict[str, list[float]] = {name: [] for name in passes}
    cpu: dict[str, list[float]] = {name: [] for name in passes}
    counts = dict.fromkeys(passes, 0)
    names = list(passes)
    clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            run, n = passes[name], 0
            cpu_start, start = cpu_clock(), clock()
            while True:
                run()
                n += 1
                elapsed = clock() - start
                if elapsed >= per_round:
                    break
            cpu[name].append((cpu_clock() - cpu_start) / n)
            wall[name].append(elapsed / n)
            counts[name] += n
    return {
        name: Timing(statistics.median(wall[name]), statistics.median(cpu[name]), wall[name], counts[name])
        for name in passes
    }


def allocation(call: Callable[[], object]) -> tuple[int, int]:
    """Bytes tracemalloc sees ``call`` leave allocated (its result, kept until measured) and its peak above the start.

    Tracing must be on (``tracemalloc.start()``).
    """
    if not tracemalloc.is_tracing():
        raise RuntimeError("tracemalloc is not tracing")
    before = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    result = call()
    current, peak = tracemalloc.get_traced_memory()
    del result
    return max(current - before, 0), max(peak - before, 0)
