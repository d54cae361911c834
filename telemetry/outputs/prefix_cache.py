"""The server's prefix-cache hit rate against the share of prompt tokens the workload itself repeats.

A prefix-caching server (vLLM's default) answers a prompt it has seen from its cache: a repeat run with the same
texts, or another client's traffic, makes TTFT look several times better than the workload earns. The workload's
own repeats are known: the shared system prompt of ``--shared-prefix-len`` in every prompt, each conversation
turn's history (``--turns``: turn k's mean prompt beyond turn 1's), a trace's repeated hash-id blocks (``--trace``).
A hit rate more than :data:`PREFIX_CACHE_EXCESS` above that share is warned about (console and the summary's
``prefix_cache``). With ``--prompt-file`` the share is unknown (records repeat by draw): no warning.
"""

from __future__ import annotations

from workload.trace import load_trace

PREFIX_CACHE_EXCESS = 0.2
"""Warn when the server's hit rate is more than this (absolute) above the workload's own repeated share."""


def workload_share(options: object, prompt_tokens: int, prompts: int, turns: list[dict]) -> float | None:
    """The share of prompt tokens the workload itself repeats; None when it cannot be told (a prompt file)."""
    if getattr(options, "prompt_file", None):
        return None
    trace = getattr(options, "trace", None)
    if trace:
        try:
            return load_trace(str(trace)).repeated_share
        except (OSError, ValueError):
            return None
    if prompt_tokens <= 0:
        return 0.0
    shared = int(getattr(options, "shared_prefix_len", 0) or 0) * prompts
    first = turns[0]["prompt_tokens_mean"] if turns and turns[0]["prompt_tokens_mean"] is not None else None
    if first is not None:
        shared += sum(t["requests"] * max(0.0, (t["prompt_tokens_mean"] or 0.0) - first) for t in turns[1:])
    return min(1.0, shared / prompt_tokens)


def section(hit_rate: float | None, share: float | None) -> dict:
    """The summary's ``prefix_cache``: the hit rate, the share the workload explains, and a warning or None."""
    warning = None
    if hit_rate is not None and share is not None and hit_rate - share > PREFIX_CACHE_EXCESS:
        warning = (f"the server's prefix cache served {hit_rate:.0%} of the prompt tokens where the workload itself "
                   f"repeats {share:.0%}: prompts of an earlier run (--prompt-salt none) or of another client are "
                   "in its cache, and TTFT is flattered; rerun with a fresh --prompt-salt or reset the server's "
                   "prefix cache")
    return {"hit_rate": hit_rate, "workload_share": share, "warning": warning}
