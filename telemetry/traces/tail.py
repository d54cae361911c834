"""The summary's ``traces`` section: join counters, per-request checks, the slowest requests with their server
breakdown, and the tail's composition from joined requests — each joined with its server span or, with no collector,
with the server's in-band record (``source``: ``spans``, ``in_band`` or ``spans+in_band``; a row's ``source``).

Composition of the slowest 1 % by TTFT (client TTFT at or above its p99 over the joined ok requests):

    client TTFT = queue + prefill + other server (server TTFT - queue - prefill)
                  + network & client (client TTFT - server TTFT)

summed over the tail requests, each part's share of the summed client TTFT; by E2E the same with decode and
server E2E. A part below zero for one request (clocks of two processes) counts as zero and is counted in
``negative_parts`` — a share is never negative.

    section = traces_section(join)          # dict for summary["traces"]
"""

from __future__ import annotations

import numpy as np

from telemetry.traces.join import Joined, TraceJoin

SLOWEST = 10
TAIL_Q = 0.99
PART_LABELS = {
    "queue": "queue",
    "prefill": "prefill",
    "decode": "decode",
    "server_other": "other server time",
    "network_client": "network & client",
}


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v * 1000.0, 3)


def _sub(a: float | None, *bs: float | None) -> float | None:
    if a is None or any(b is None for b in bs):
        return None
    return a - sum(bs)  # type: ignore[arg-type]


def row(j: Joined) -> dict:
    c = j.client
    return {
        "request_id": c.request_id, "server_request_id": j.server_request_id, "stage": c.stage,
        "user_class": c.user_class,
        "client_ttft_ms": _ms(c.ttft_s), "client_e2e_ms": _ms(c.e2e_s), "client_ttfa_ms": _ms(c.ttfa_s),
        "server_ttft_ms": _ms(j.server_ttft_s), "server_e2e_ms": _ms(j.server_e2e_s), "queue_ms": _ms(j.queue_s),
        "prefill_ms": _ms(j.prefill_s), "decode_ms": _ms(j.decode_s), "inference_ms": _ms(j.inference_s),
        "remainder_ttft_ms": _ms(_sub(c.ttft_s, j.server_ttft_s)),
        "remainder_e2e_ms": _ms(_sub(c.e2e_s, j.server_e2e_s)),
        "source": j.source,
    }


def _parts(j: Joined, by: str) -> dict[str, float | None]:
    c = j.client
    if by == "ttft":
        return {"queue": j.queue_s, "prefill": j.prefill_s,
                "server_other": _sub(j.server_ttft_s, j.queue_s, j.prefill_s),
                "network_client": _sub(c.ttft_s, j.server_ttft_s)}
    return {"queue": j.queue_s, "prefill": j.prefill_s, "decode": j.decode_s,
            "server_other": _sub(j.server_e2e_s, j.queue_s, j.prefill_s, j.decode_s),
            "network_client": _sub(c.e2e_s, j.server_e2e_s)}


def _client(j: Joined, by: str) -> float | None:
    return {"ttft": j.client.ttft_s, "e2e": j.client.e2e_s, "ttfa": j.client.ttfa_s}[by]


def composition(joined: list[Joined], by: str, q: float = TAIL_Q) -> dict | None:
    """The slowest ``1 - q`` of the joined ok requests by ``by`` (ttft/e2e): threshold, count, shares."""
    rows = [(v, j) for j in joined if (v := _client(j, by)) is not None]
    if not rows:
        return None
    values = np.array([v for v, _ in rows])
    threshold = float(np.quantile(values, q, method="higher"))
    tail = [j for v, j in rows if v >= threshold]
    total = sum(_client(j, by) for j in tail)  # type: ignore[misc]
    sums: dict[str, float] = {}
    negative = 0
    for j in tail:
        for name, v in _parts(j, by).items():
            if v is None:
                continue
            if v < 0:
                negative += 1
                v = 0.0
            sums[name] = sums.get(name, 0.0) + v
    shares = {name: (s / total if total > 0 else 0.0) for name, s in sums.items()}
    dominant = max(shares, key=shares.get) if shares else None  # type: ignore[arg-type]
    pct = round((1 - q) * 100, 3)
    named = ", ".join(f"{shares[n] * 100:.0f} % {PART_LABELS[n]}" for n in sorted(shares, key=shares.get, reverse=True))
    statement = (f"of the {pct:g} % slowest {by.upper()}s ({len(tail)} requests, >= {threshold * 1000:.0f} ms, "
                 f"mean {total / len(tail) * 1000:.0f} ms): {named}")
    return {
        "quantile": q, "threshold_ms": _ms(threshold), "requests": len(tail), "mean_ms": _ms(total / len(tail)),
        "shares": {n: round(v, 4) for n, v in shares.items()},
        "parts_mean_ms": {n: _ms(s / len(tail)) for n, s in sums.items()},
        "dominant": dominant, "negative_parts": negative, "statement": statement,
    }


def _reasoning(joined: list[Joined]) -> bool:
    return any(j.client.ttfa_s is not None and j.client.ttfa_s != j.client.ttft_s for j in joined)


def traces_section(join: TraceJoin, receiving: bool = True) -> dict:
    ok = [j for j in join.joined if j.client.ok]
    over_ttft = sum(1 for j in ok if j.server_ttft_s is not None and j.client.ttft_s is not None
                    and j.server_ttft_s > j.client.ttft_s)
    over_e2e = sum(1 for j in ok if j.server_e2e_s is not None and j.server_e2e_s > j.client.e2e_s)
    rem_ttft = [r for j in ok if (r := _sub(j.client.ttft_s, j.server_ttft_s)) is not None]
    rem_e2e = [r for j in ok if (r := _sub(j.client.e2e_s, j.server_e2e_s)) is not None]
    out: dict = {"receiving": receiving, **join.counts()}
    by_span = sum(1 for j in join.joined if j.spans)
    by_band = len(join.joined) - by_span
    out["source"] = "spans+in_band" if by_span and by_band else "in_band" if by_band else "spans"
    out["server_ttft_over_client"] = over_ttft
    out["server_e2e_over_client"] = over_e2e
    out["remainder_min_ms"] = {"ttft": _ms(min(rem_ttft)) if rem_ttft else None,
                               "e2e": _ms(min(rem_e2e)) if rem_e2e else None}
    bys = ["ttft", "e2e"] + (["ttfa"] if _reasoning(ok) else [])
    out["slowest"] = {
        by: [row(j) for j in sorted((j for j in ok if _client(j, by) is not None), key=lambda j: -_client(j, by))][
            :SLOWEST]
        for by in bys
    }
    out["tail"] = {by: composition(ok, by) for by in ("ttft", "e2e")}
    return out
