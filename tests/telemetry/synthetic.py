"""Synthetic GenerationResults with known timing, for telemetry tests (no server needed).

r = make_result(ttft=0.1, itl=0.02, tokens=64)                      # ends now
r = make_result(ttft=0.1, itl=np.array([...]), chunk_tokens=[...])  # explicit gaps
"""

from __future__ import annotations

import time

import numpy as np

from users.result import GenerationResult, RequestMeta, ServerRecord


def make_result(
    ttft: float = 0.1,
    itl: float | np.ndarray = 0.02,
    tokens: int = 32,
    chunk_tokens: list[int] | np.ndarray | None = None,
    ok: bool = True,
    error_kind: str | None = None,
    user_class: str = "SynthUser",
    stage: str = "main",
    version: str | None = None,
    prompt_tokens: int = 100,
    prompt_tokens_client: int | None = None,
    token_source: str = "usage",
    queue: float = 0.0,
    tail: float = 0.001,
    end: float | None = None,
    prompt_build: float | None = 0.0005,
    reasoning_chunks: int = 0,
    server: ServerRecord | None = None,
) -> GenerationResult:
    """A request whose first token came ``ttft`` after t0 and whose chunks came ``itl`` apart; with
    ``reasoning_chunks`` its first that many chunks are reasoning (R1), the answer starts at the next."""
    if chunk_tokens is None:
        chunk_tokens = np.ones(tokens, dtype=np.int64)
    chunk_tokens = np.asarray(chunk_tokens, dtype=np.int64)
    n = chunk_tokens.size
    gaps = np.broadcast_to(np.asarray(itl, dtype=np.float64), (max(n - 1, 0),)) * chunk_tokens[1:]
    rel = np.concatenate(([ttft], ttft + np.cumsum(gaps))) if n else np.zeros(0)
    e2e = (rel[-1] if n else ttft) + tail
    t_end = time.perf_counter() if end is None else end
    t0 = t_end - e2e
    r = min(reasoning_chunks, n)
    answered = ok and r < n
    return GenerationResult(
        RequestMeta(stage=stage, version=version, user_class=user_class, name="POST /v1/chat/completions [stream]"),
        ok=ok,
        error_kind=error_kind, error_message=None if ok else error_kind, t0=t0, t_sent=t0 + queue, t_end=t_end,
        chunk_times=t0 + rel if ok else np.zeros(0), chunk_tokens=chunk_tokens if ok else np.zeros(0, np.int64),
        output_tokens=int(chunk_tokens.sum()) if ok else 0, prompt_tokens=prompt_tokens,
        token_source=token_source, prompt_tokens_client=prompt_tokens_client,
        wall_start=time.time() - e2e, prompt_build_s=prompt_build,
        t_reasoning=float(t0 + rel[0]) if ok and r else None, t_answer=float(t0 + rel[r]) if answered else None,
        reasoning_tokens=int(chunk_tokens[:r].sum()) if ok else 0, server=server,
    )


IN_BAND = ServerRecord(ttft_s=0.04, queue_s=0.01, generation_s=0.3, mean_itl_s=0.01, tokens_per_second=90.0,
                       cached_tokens=32, spec_steps=10, spec_drafted=30, spec_accepted=21,
                       spec_accepted_per_position=(9, 7, 5))
"""A server's in-band record with every field (``make_result(server=IN_BAND)``): 10 verify steps of 3 drafts."""
