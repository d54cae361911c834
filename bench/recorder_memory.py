"""Memory and CPU cost of the telemetry recorder: push 10 M output tokens' worth of results through it.

    python -m bench.recorder_memory [--tokens 10000000] [--per-request 256] [--span-s 0]

Results carry ``--per-request`` tokens (lognormal ITL around 20 ms, 1 token per chunk, 5 % with
3-token chunks), spread over 4 stages and 2 user classes. ``--span-s`` spreads their end times over
that many seconds of wall clock (the 1-s window slots grow with run length; 0 = as fast as it goes).
Prints RSS growth (the design asks < 20 MB for 10 M tokens) and the ingest cost per result/token.
The recorder is never reset here: a worker resets every report, so this is the worst case.
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np

from telemetry.measure.recorder import Recorder
from users.result import GenerationResult, RequestMeta
from workload.argtypes import non_negative_seconds, positive_int, seed


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    import os

    return pages * os.sysconf("SC_PAGE_SIZE")


def make(rng: np.random.Generator, i: int, tokens: int, end: float) -> GenerationResult:
    chunk_tokens = np.ones(tokens, dtype=np.int64)
    if i % 20 == 0:  # some speculative-decoding style multi-token chunks
        chunk_tokens = np.full(max(1, tokens // 3), 3, dtype=np.int64)
    gaps = rng.lognormal(np.log(0.02), 0.4, chunk_tokens.size - 1) * chunk_tokens[1:]
    ttft = float(rng.lognormal(np.log(0.3), 0.5))
    rel = np.concatenate(([ttft], ttft + np.cumsum(gaps)))
    t0 = end - rel[-1] - 0.001
    return GenerationResult(
        RequestMeta(stage=f"stage{i % 4}", user_class=("StreamingChatUser", "StreamingCompletionUser")[i % 2],
                    name="bench"),
        ok=i % 97 != 0, error_kind=None if i % 97 else "timeout", error_message=None, t0=t0, t_sent=t0,
        t_end=end, chunk_times=t0 + rel, chunk_tokens=chunk_tokens, output_tokens=int(chunk_tokens.sum()),
        prompt_tokens=512, prompt_tokens_client=512,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=positive_int, default=10_000_000)
    p.add_argument("--per-request", type=positive_int, default=256)
    p.add_argument("--span-s", type=non_negative_seconds, default=0.0, help="spread end times over this many seconds")
    p.add_argument("--seed", type=seed, default=0)
    args = p.parse_args()

    rng = np.random.default_rng(args.seed)
    n = args.tokens // args.per_request
    rec = Recorder()
    for i in range(200):  # warm up numpy, allocator and every cell/slot once
        rec.record(make(rng, i, args.per_request, time.perf_counter()))
    rec.reset()
    gc.collect()
    before = rss_bytes()
    start = time.perf_counter()
    spent = 0.0
    tokens = 0
    for i in range(n):
        end = time.perf_counter() - (args.span_s * (1 - i / n) if args.span_s else 0.0)
        r = make(rng, i, args.per_request, end)
        t = time.perf_counter()
        rec.record(r)
        spent += time.perf_counter() - t
        tokens += r.output_tokens
    wall = time.perf_counter() - start
    gc.collect()
    growth = rss_bytes() - before
    state_bytes = len(__import__("msgpack").packb(rec.to_dict()))
    print(f"results {n:,}  output tokens {tokens:,}  cells {len(rec.cells)}  slots {len(rec.slots)}"
          f"  (span {args.span_s:g} s)")
    print(f"RSS growth {growth / 2**20:.2f} MB (limit 20 MB)  state as msgpack {state_bytes / 2**10:.0f} KiB")
    print(f"ingest {spent / n * 1e6:.1f} us/result, {spent / tokens * 1e9:.0f} ns/token "
          f"(bench wall {wall:.1f} s incl. building results)")


if __name__ == "__main__":
    main()
