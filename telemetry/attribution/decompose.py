"""Where the first token's time went: client TTFT against the server's TTFT, queue and prefill time,
and client ITL against the server's ITL (first-token path vs decode path).

Server quantities are Q objects read from vLLM's histograms over the same time span as the client
figures. Quantiles do not add up, means do: the breakdown in words uses means —

    client TTFT = server queue + server prefill + other server time + network & client

where "other server time" = server TTFT − queue − prefill (tokenization, scheduling, detokenizing the
first token) and "network & client" = client TTFT − server TTFT. Both remainders are stated, never
hidden. The server's histograms count every request it served in the span, not only this client's.

When the server exports vLLM's KV-transfer histogram (``vllm:nixl_xfer_time_seconds``, disaggregated
prefill/decode), the transfer is a part of its own (``kv_transfer_ms``). With a prefill/decode pair (targets
named ``prefill=`` and ``decode=``) the request crosses two servers: queue, prefill and server TTFT are the
prefill side's, and the decode side's TTFT (``decode_ttft_server_ms``, from its arrival there: the KV transfer,
then its first step) follows —

    client TTFT = queue + prefill + other server + KV transfer + decode first step + network & client

The client's own tokenizer layer comes before all of that: the time a user spent building the request (drawing the
lengths, synthesizing and tokenizing the prompt, serializing the body) on the users' event loop, before t0 — so
outside client TTFT, but in what a caller waits for. It is shown next to the parts (``prompt_build_client_ms``) and
in the sentence; a slower tokenizer shows up here, not in any server figure.

    d = decompose(client_ttft_q, client_itl_q, {"ttft": h_ttft, "queue": h_q, "prefill": h_p, "itl": h_itl})
    d["ttft_server_ms"]["p99"], d["remainder_ms"]["network_client"], d["statement"]
"""

from __future__ import annotations

from collections.abc import Mapping

from telemetry.attribution.histogram import CumulativeHistogram

# decomposition key -> server histogram short name
SERVER_PARTS = {
    "ttft_server_ms": "ttft",
    "queue_ms": "queue",
    "prefill_ms": "prefill",
    "decode_ms": "decode",
    "decode_itl_server_ms": "itl",
    "kv_transfer_ms": "kv_transfer",
}


def _mean(q: Mapping | None) -> float | None:
    return None if not q or q.get("count", 0) == 0 else q.get("mean")


def _sub(a: float | None, *bs: float | None) -> float | None:
    if a is None or any(b is None for b in bs):
        return None
    return a - sum(bs)  # type: ignore[arg-type]


def _fmt(v: float | None) -> str:
    return "?" if v is None else str(round(v))  # round(): no "-0" for a tiny negative remainder


def decompose(
    ttft_client: Mapping | None,
    itl_client: Mapping | None,
    server: Mapping[str, CumulativeHistogram],
    prompt_build: Mapping | None = None,
    decode_ttft: CumulativeHistogram | None = None,
) -> dict:
    """The ``decomposition`` section: Q objects (None where unknown), the mean remainders and a sentence;
    ``decode_ttft``: a prefill/decode pair's decode-side TTFT histogram (None for one server); ``prompt_build``
    is the client's request-building Q (the tokenizer layer, before t0)."""
    out: dict = {"ttft_client_ms": dict(ttft_client) if ttft_client else None}
    out["prompt_build_client_ms"] = dict(prompt_build) if _mean(prompt_build) is not None else None
    for key, hist in SERVER_PARTS.items():
        h = server.get(hist)
        out[key] = h.to_q() if h is not None and h.count > 0 else None
    out["itl_client_ms"] = dict(itl_client) if itl_client else None
    out["decode_ttft_server_ms"] = decode_ttft.to_q() if decode_ttft is not None and decode_ttft.count > 0 else None

    c, s = _mean(out["ttft_client_ms"]), _mean(out["ttft_server_ms"])
    queue, prefill = _mean(out["queue_ms"]), _mean(out["prefill_ms"])
    kv, dttft = _mean(out["kv_transfer_ms"]), _mean(out["decode_ttft_server_ms"])
    first_step = None
    if dttft is not None:  # a pair: the decode side's TTFT is the transfer, then its first step
        first_step = max(dttft - (kv or 0.0), 0.0)
        network = _sub(c, s, dttft)
        other = _sub(s, queue, prefill)
    else:  # one server: a transfer it waited for is inside its TTFT
        network = _sub(c, s)
        other = _sub(s, queue, prefill, kv or 0.0)
    # A mean remainder below zero is no time spent anywhere: the server's histograms count requests the client's
    # figures do not (other clients, requests cut at the span's edges). It reads 0, and the excess is stated.
    excess = {k: -v for k, v in (("network_client", network), ("server_other", other)) if v is not None and v < 0}
    network = max(network, 0.0) if network is not None else None
    other = max(other, 0.0) if other is not None else None
    out["remainder_ms"] = {"network_client": network, "server_other": other}
    if first_step is not None:
        out["remainder_ms"]["decode_first_step"] = first_step
    if excess:
        out["remainder_ms"]["excess_ms"] = excess

    if c is None:
        statement = "no client TTFT"
    elif s is None:
        statement = f"client TTFT mean {_fmt(c)} ms; no server histograms to split it"
    else:
        kv_part = f" + KV transfer {_fmt(kv)}" if kv is not None else ""
        decode_part = f" + decode first step {_fmt(first_step)}" if first_step is not None else ""
        statement = (
            f"client TTFT mean {_fmt(c)} ms = server queue {_fmt(queue)} + prefill {_fmt(prefill)}"
            f" + other server {_fmt(other)}{kv_part}{decode_part} + network & client {_fmt(network)} ms"
        )
        shown = {k: v for k, v in excess.items() if round(v) >= 1}  # below the statement's 1 ms: excess_ms only
        if shown:
            statement += " (the server's means exceed the client's by " + ", ".join(
                f"{_fmt(v)} ms in {k.replace('_', ' & ' if k == 'network_client' else ' ')}" for k, v in shown.items()
            ) + ": its histograms count requests this client's figures do not; read as 0)"
    build = _mean(out["prompt_build_client_ms"])
    if build is not None:
        p99 = out["prompt_build_client_ms"].get("p99")
        statement += (f"; before t0 the client built each request (prompt synthesis + tokenizer + body, on the users' "
                      f"event loop, outside TTFT) in mean {build:.2f} ms" + (f", p99 {p99:.2f} ms" if p99 else ""))
    ic, iserv = _mean(out["itl_client_ms"]), _mean(out["decode_itl_server_ms"])
    if ic is not None and iserv is not None:
        statement += f"; ITL mean client {ic:.1f} ms vs server {iserv:.1f} ms"
    out["statement"] = statement
    return out
