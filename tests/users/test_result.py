"""GenerationResult's measurements (the README's "What the figures mean"), here TTST: time to second token."""

from __future__ import annotations

import numpy as np
import pytest

from users.result import GenerationResult, RequestMeta


def result(times: list[float], tokens: list[int], t0: float = 10.0, ok: bool = True) -> GenerationResult:
    return GenerationResult(
        RequestMeta(user_class="U", name="n"), ok=ok, error_kind=None if ok else "stream_cut", error_message=None,
        t0=t0, t_sent=t0, t_end=(times[-1] if times else t0) + 0.001, chunk_times=np.asarray(times, dtype=np.float64),
        chunk_tokens=np.asarray(tokens, dtype=np.int64), output_tokens=int(sum(tokens)),
    )


def test_ttst_is_the_gap_between_the_first_two_token_bearing_chunks():
    r = result([10.25, 10.31, 10.33, 10.36], [1, 1, 1, 1])
    assert r.ttst_s == pytest.approx(0.06)
    assert r.ttft_s == pytest.approx(0.25)  # TTST does not start at t0


def test_ttst_with_two_chunks_only():
    assert result([10.1, 10.5], [1, 1]).ttst_s == pytest.approx(0.4)


def test_one_chunk_or_none_has_no_ttst():
    assert result([10.2], [1]).ttst_s is None
    assert result([10.2], [16]).ttst_s is None  # one chunk carrying many tokens still has no second response
    assert result([], []).ttst_s is None


def test_multi_token_chunks_count_responses_not_tokens():
    # the first chunk carries 4 tokens and the second 3: TTST is the gap between the two chunks, not split per token
    r = result([10.2, 10.29, 10.3], [4, 3, 1])
    assert r.ttst_s == pytest.approx(0.09)
    assert r.itl_samples()[:3] == pytest.approx([0.03, 0.03, 0.03])  # ITL does split it: 3 samples of g/3
