"""The server's in-band record of a request: vLLM's per-request ``metrics`` (``--enable-per-request-metrics``), its
``speculative_decoding`` part (``--per-request-spec-decode-metrics summary|detailed``) and
``usage.prompt_tokens_details.cached_tokens`` (``--enable-prompt-tokens-details``), read from the last streamed
chunk (the usage chunk) or from a whole answer.

    server_record({"usage": {...}, "metrics": {...}})   # ServerRecord, or None when the object says nothing

What the server sends that is not a number of the right kind is left out (None), never an error: the record is
a bonus, the request's own result stands without it.
"""

from __future__ import annotations

from users.result import ServerRecord


def _num(obj: dict, key: str, scale: float = 1.0) -> float | None:
    v = obj.get(key)
    return float(v) * scale if isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 else None


def _count(obj: dict, key: str) -> int | None:
    v = obj.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _per_position(hist: object) -> tuple[int, ...]:
    """Steps accepted at least up to each draft position, from vLLM's dense histogram (index j: the steps that
    accepted exactly j draft tokens)."""
    if not isinstance(hist, list) or not all(isinstance(h, int) and h >= 0 for h in hist):
        return ()
    return tuple(sum(hist[j] for j in range(i + 1, len(hist))) for i in range(len(hist) - 1))


def server_record(obj: dict | None) -> ServerRecord | None:
    """The record an answer's last chunk (or whole body) carries; None when it has neither ``metrics`` nor
    ``cached_tokens``."""
    if not isinstance(obj, dict):
        return None
    metrics = obj.get("metrics")
    usage = obj.get("usage")
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    cached = _count(details, "cached_tokens") if isinstance(details, dict) else None
    if not isinstance(metrics, dict):
        return ServerRecord(cached_tokens=cached) if cached is not None else None
    spec = metrics.get("speculative_decoding")
    spec = spec if isinstance(spec, dict) else {}
    ms = 0.001
    return ServerRecord(
        ttft_s=_num(metrics, "time_to_first_token_ms", ms), queue_s=_num(metrics, "queue_time_ms", ms),
        generation_s=_num(metrics, "generation_time_ms", ms), mean_itl_s=_num(metrics, "mean_itl_ms", ms),
        tokens_per_second=_num(metrics, "tokens_per_second"), cached_tokens=cached,
        spec_steps=_count(spec, "num_spec_steps"), spec_drafted=_count(spec, "num_draft_tokens"),
        spec_accepted=_count(spec, "num_accepted_draft_tokens"),
        spec_accepted_per_position=_per_position(spec.get("acceptance_histogram")),
    )
