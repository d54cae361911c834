"""Fault injection: with probability ``rate`` a generation request fails in one of the chosen ways.

Kinds (``--fault-kinds``, comma separated):

- ``500``: an immediate HTTP 500 with vLLM's error body;
- ``429``: an immediate HTTP 429 (with ``retry-after``);
- ``cut``: the stream (or the response) is closed part-way, without ``[DONE]`` or the final chunk;
- ``junk``: a malformed ``data:`` line part-way through an otherwise complete stream (a non-streaming
  response body is cut short instead);
- ``hang``: after a few tokens nothing more is sent; the connection stays open until the client leaves.

    faults = Faults(rate=0.1, kinds=("cut", "junk"), rng=np.random.default_rng(0))
    plan = faults.decide(output_tokens=256)    # None, or Fault(kind="cut", at=117)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KINDS = ("500", "429", "cut", "junk", "hang")
IMMEDIATE = {"500", "429"}
HANG_SECONDS = 300.0  # real seconds a hung response keeps its connection open


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    at: int
    """Output-token count after which a mid-stream fault happens (unused for immediate kinds)."""


def parse_kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise ValueError(f"unknown fault kind(s) {bad or [text]}: use a comma list of {','.join(KINDS)}")
    return kinds


class Faults:
    def __init__(self, rate: float, kinds: tuple[str, ...], rng: np.random.Generator):
        self.rate = rate
        self.kinds = kinds
        self.rng = rng
        self.injected = dict.fromkeys(KINDS, 0)

    def decide(self, output_tokens: int) -> Fault | None:
        if self.rate <= 0 or self.rng.random() >= self.rate:
            return None
        kind = self.kinds[int(self.rng.integers(len(self.kinds)))]
        at = int(self.rng.integers(1, output_tokens)) if output_tokens > 1 else 1
        self.injected[kind] += 1
        return Fault(kind, at)
