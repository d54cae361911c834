"""The simulator's fault injection: with probability ``rate`` a generation request fails in one of the chosen
ways. The kinds and what each does are the test servers' one vocabulary (:mod:`server.core.faults`); here, when.

``--fault-kinds`` (comma separated) chooses among them; by default every kind but ``nodone``. A ``stall``
(``hang``) keeps its connection open :data:`STALL_SECONDS` real seconds unless the client leaves first.

    faults = Faults(rate=0.1, kinds=("cut", "junk"), rng=np.random.default_rng(0))
    plan = faults.decide(output_tokens=256)    # None, or Fault(kind="cut", at=117)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from server.core.faults import KINDS

DEFAULT_KINDS = ("500", "429", "cut", "junk", "stall")
"""--fault-kinds: what the simulator draws among unless told (the draws, kind by index, depend on this order)."""
STALL_SECONDS = 300.0
"""Real seconds a stalled response keeps its connection open."""


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    at: int
    """Output-token count after which a mid-stream fault happens (unused for immediate kinds)."""


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
