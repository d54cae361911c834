"""The test servers' fault vocabulary: one name, one meaning, whichever server serves it.

The simulator draws a fault per generation request with probability ``--fault-rate`` among ``--fault-kinds``
(:mod:`server.sim.faults`); the scripted server rotates ``--fault`` over every ``--fault-every``-th completion
request. What each kind does is the same in both:

- ``500``: an immediate HTTP 500 with vLLM's error body;
- ``429``: an immediate HTTP 429 with vLLM's error body;
- ``cut``: part-way, the connection is closed: no ``[DONE]``, no end of the chunked body (a non-streaming
  response: closed before its body);
- ``junk``: part-way, a ``data:`` line that is not JSON (:data:`JUNK`), then the rest of an otherwise complete
  stream (a non-streaming response: its body cut short);
- ``stall``: part-way, nothing more is sent; the connection is dropped after the stall time (the scripted
  server's ``--stall-s``, the simulator's :data:`server.sim.faults.STALL_SECONDS`) unless the client leaves first;
  ``hang`` is its other name (the simulator's first one);
- ``nodone``: the whole stream and its usage, but no ``data: [DONE]``.

    parse_faults("cut,junk", KINDS)     # ('cut', 'junk'); ValueError naming the accepted kinds otherwise
"""

from __future__ import annotations

KINDS = ("500", "429", "cut", "junk", "stall", "nodone")
"""Every fault kind, by its one name."""
ALIASES = {"hang": "stall"}
"""Other names a fault option accepts."""
IMMEDIATE = frozenset({"500", "429"})
"""The kinds answered at once, before any token."""
JUNK = b'data: {"id":"junk","choices":[{"index":0,"text":" trunc\n\n'
"""The ``junk`` fault's line: a ``data:`` event whose JSON breaks off."""


def parse_faults(text: str, served: tuple[str, ...] = KINDS) -> tuple[str, ...]:
    """A comma list of fault kinds among ``served`` (aliases resolved, order kept); ValueError naming the accepted
    kinds when one is unknown or the list is empty."""
    named = [k.strip() for k in text.split(",") if k.strip()]
    kinds = tuple(ALIASES.get(k, k) for k in named)
    bad = [n for n, k in zip(named, kinds, strict=True) if k not in served]
    if bad or not kinds:
        raise ValueError(f"unknown fault kind(s) {bad or [text]}: use a comma list of {','.join(served)}")
    return kinds
