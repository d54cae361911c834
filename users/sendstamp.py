"""When a request was written: the moment its pooled socket is handed out, just before the write.

geventhttpclient checks a pooled keep-alive socket with a zero-timeout ``select()``, and gevent's
``select`` yields to the hub there. When many streams end together (users started in one spawn batch),
a request stamped before ``HTTPClient.request`` waits in that yield behind its neighbours' work — up to
~3 ms at p99 with 64 streams on 2 cores — time the server never saw, counted as TTFT. Between
``get_socket`` returning and the request's ``sendall`` nothing yields, so the stamp taken as the socket is
handed out is "just before the request is written" (t0 in the README's definitions).

    install(pool)                       # once per geventhttpclient ConnectionPool
    t_call = time.perf_counter(); resp = http.request(...)
    t_sent = written_at(pool, t_call)   # t_call when no socket was handed out (connect failed)
"""

from __future__ import annotations

import time

import gevent


def install(pool) -> None:
    """Wrap ``pool.get_socket`` (this instance only) to note, per greenlet, when it handed a socket out."""
    if getattr(pool, "_llm_taken", None) is not None:
        return
    taken: dict = {}
    take = pool.get_socket
    perf, current = time.perf_counter, gevent.getcurrent

    def get_socket():
        sock = take()
        taken[current()] = perf()
        return sock

    pool.get_socket = get_socket
    pool._llm_taken = taken


def written_at(pool, fallback: float) -> float:
    """The time this greenlet's last socket was handed out, if that was at or after ``fallback``."""
    taken = getattr(pool, "_llm_taken", None)
    t = None if taken is None else taken.pop(gevent.getcurrent(), None)
    return t if t is not None and t >= fallback else fallback
