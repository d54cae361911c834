"""Build time of long synthetic prompts (issue #15's long-context class): 32K to 128K tokens, chat template
included, with the client's count checked against the prompt encoded whole.

    .venv/bin/python -m bench.long_prompt [--tokenizer deepseek-v2] [--lengths 32768,65536,131072] [--rounds 20]

Prints, per length: the first build (it also encodes the cached pieces once), then the median and max of
``--rounds`` builds — the time a user's greenlet holds the event loop to build one prompt — and the time the
same prompt takes to encode whole (what verifying it by re-encoding would cost); then the same for a trace line
(``--trace``) of that length built from its hash ids' 512-token blocks (workload/trace.py).
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

import numpy as np

from workload.argtypes import positive_int
from workload.prompts import SyntheticPrompts, TokenCounter
from workload.tokenizers import chat_renderer, load_tokenizer
from workload.trace import BLOCK_TOKENS, BlockPrompts, TraceRecord


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="deepseek-v2")
    ap.add_argument("--lengths", default="32768,65536,131072")
    ap.add_argument("--rounds", type=positive_int, default=20)
    a = ap.parse_args(argv)
    tok = load_tokenizer(a.tokenizer)
    render = chat_renderer(a.tokenizer)  # its own chat template, as vLLM renders it
    count = TokenCounter(tok, chat=True, render=render)
    rng = np.random.default_rng(0)
    print(f"tokenizer {a.tokenizer}, chat template, {a.rounds} rounds")
    for n in (int(x) for x in a.lengths.split(",")):
        src = SyntheticPrompts(tok, chat=True, render=render)
        first, first_s, p, times = _timed(partial(src.build, rng, n), a.rounds)
        t = time.perf_counter()
        whole = count(p.text)
        encode_s = time.perf_counter() - t
        assert first.tokens == p.tokens == whole == n, (first.tokens, p.tokens, whole, n)
        print(f"{n:>7} tokens: first build {first_s * 1000:7.1f} ms (pieces encoded once), then median "
              f"{statistics.median(times) * 1000:6.2f} ms, max {max(times) * 1000:6.2f} ms; encoding it whole "
              f"{encode_s * 1000:7.1f} ms; count {p.tokens} = the prompt encoded whole")
        blocks = BlockPrompts(tok, chat=True, verify_first=0, render=render)
        line = TraceRecord(1, 0.0, n, 1, tuple(range(-(-n // BLOCK_TOKENS))))
        _first, first_s, q, times = _timed(partial(blocks.build, line, rng), a.rounds)
        assert q.tokens == count(q.text) == n, (q.tokens, n)
        print(f"{n:>7} tokens, trace line of {len(line.hash_ids)} hash-id blocks: first build {first_s * 1000:7.1f} ms "
              f"(blocks drawn), then median {statistics.median(times) * 1000:6.2f} ms, max {max(times) * 1000:6.2f} "
              f"ms; count {q.tokens} = the prompt encoded whole")


def _timed(build, rounds: int):
    """(first result, its seconds, last result, seconds of each later round): the first build fills the caches."""
    t = time.perf_counter()
    first = build()
    first_s = time.perf_counter() - t
    times, last = [], first
    for _ in range(rounds):
        t = time.perf_counter()
        last = build()
        times.append(time.perf_counter() - t)
    return first, first_s, last, times

if __name__ == "__main__":
    main()
