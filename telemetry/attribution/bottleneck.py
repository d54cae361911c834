"""The run-level verdict ``attribution.bottleneck`` {cause, evidence, source}: what limits the run, even when the
whole run is saturated (then no window stands out against the median and the spike report is silent).

Rules, first match wins (each names its figures in ``evidence``):

0. ``engine_imbalance`` — one engine (a data-parallel rank or a replica) stayed off the rest of the fleet
   (:mod:`telemetry.attribution.imbalance`): the fleet's figures are a mean that hides it, so it comes first;
   the verdict names it in ``engine``.
1. ``kv_cache`` — the server's KV cache stays full: usage mean >= 0.8, or preemptions with usage max >= 0.95.
2. ``batching_collapse`` — the batching-failure verdict (batch size fell while TTFT p99 rose).
3. ``queueing`` / ``prefill`` / ``kv_transfer`` / ``client`` — the part of the client TTFT that dominates
   (>= 50 %): from the joined spans' tail composition when spans are present (``source: spans``), else from the
   histograms' mean split (``source: histograms``; ``kv_transfer``: a prefill/decode pair's KV transfer);
   ``client`` is the network & client remainder (the decomposition's, which counts both servers of a pair).
4. ``none`` — no limit reached.

    verdict(server=summary["server"], batching=att["batching_failure"], decomposition=att["decomposition"],
            tail=traces["tail"]["ttft"] or None)
"""

from __future__ import annotations

KV_MEAN_FULL = 0.8
KV_MAX_FULL = 0.95
DOMINANT_SHARE = 0.5
CAUSE_OF_PART = {"queue": "queueing", "prefill": "prefill", "kv_transfer": "kv_transfer", "network_client": "client"}


def _mean_shares(decomposition: dict | None) -> dict[str, float]:
    """Shares of the client TTFT mean in the histograms' split (parts below zero count as zero)."""
    d = decomposition or {}

    def mean(key: str) -> float | None:
        q = d.get(key)
        return q.get("mean") if isinstance(q, dict) and q.get("count", 1) else None

    client = mean("ttft_client_ms")
    server = mean("ttft_server_ms")
    if not client or client <= 0:
        return {}
    parts = {"queue": mean("queue_ms"), "prefill": mean("prefill_ms"), "kv_transfer": mean("kv_transfer_ms")}
    remainder = (d.get("remainder_ms") or {}).get("network_client")
    if remainder is not None:  # the decomposition's own (a prefill/decode pair: after both servers' parts)
        parts["network_client"] = remainder
    elif server is not None:
        parts["network_client"] = client - server
    return {k: max(v, 0.0) / client for k, v in parts.items() if v is not None}


def verdict(server: dict | None, batching: dict | None, decomposition: dict | None, tail: dict | None,
            imbalance: dict | None = None) -> dict:
    if imbalance:
        return {"cause": "engine_imbalance", "engine": imbalance["engine"], "evidence": imbalance["evidence"],
                "source": "server_metrics"}
    server = server or {}
    kv = server.get("kv_cache_usage") or {}
    kv_mean, kv_max = kv.get("mean"), kv.get("max")
    preempt = server.get("preemptions") or 0
    waiting = server.get("requests_waiting_max")
    if kv_mean is not None and (kv_mean >= KV_MEAN_FULL or (preempt > 0 and (kv_max or 0) >= KV_MAX_FULL)):
        ev = (f"KV cache usage mean {kv_mean:.2f} (max {kv_max:.2f}), {preempt} preemptions"
              + (f", up to {waiting} requests waiting" if waiting else "")
              + ": requests wait for KV blocks, the cache's capacity limits the run")
        return {"cause": "kv_cache", "evidence": ev, "source": "server_metrics"}
    if batching and batching.get("verdict"):
        base = batching.get("baseline") or {}
        ev = (f"batch size collapsed (baseline median {base.get('batch_size_median')}) from "
              f"{batching.get('failed_at_s')} s while the TTFT p99 rose; flagged windows "
              f"{batching.get('flagged_windows')}")
        return {"cause": "batching_collapse", "evidence": ev, "source": "server_metrics"}
    # the split itself is said once, by the decomposition's (or the tail's) statement: the evidence names its source
    if tail and tail.get("shares"):
        shares, source, how = tail["shares"], "spans", "the slowest requests' joined spans"
    else:
        shares, source, how = _mean_shares(decomposition), "histograms", "the mean split of the first token"
    ranked = sorted(((v, k) for k, v in shares.items() if k in CAUSE_OF_PART), reverse=True)
    if ranked and ranked[0][0] >= DOMINANT_SHARE:
        share, part = ranked[0]
        ev = f"{share * 100:.0f} % of the client TTFT is {part.replace('_', ' & ')} ({how})"
        return {"cause": CAUSE_OF_PART[part], "evidence": ev, "source": source}
    kv_txt = f"KV cache usage mean {kv_mean:.2f}, " if kv_mean is not None else ""
    return {"cause": "none", "evidence": f"{kv_txt}no part of the TTFT dominates ({how})", "source": source}
