"""Fixtures for the real-engine tests (all marked ``vllm``).

Outside ``make test-vllm`` / ``make test`` the tests skip when the engine venv or model is missing;
those targets set ``REQUIRE_VLLM=1``, which turns that skip into a failure, so CI can never pass
with the real-engine tests silently skipped.

The engine pool lives for this package only: the last server stops before the rest of the suite runs.
"""

from __future__ import annotations

import os

import pytest

from tests.vllm.engine import EnginePool, Server, missing_reason


@pytest.fixture(scope="package")
def engine_pool(tmp_path_factory) -> EnginePool:
    reason = missing_reason()
    if reason is not None:
        if os.environ.get("REQUIRE_VLLM") == "1":
            pytest.fail(f"REQUIRE_VLLM=1 but the real engine is unavailable: {reason}", pytrace=False)
        pytest.skip(f"real vLLM engine unavailable: {reason}")
    pool = EnginePool(tmp_path_factory.mktemp("vllm"))
    yield pool
    pool.close()
    starts = ", ".join(f"{kv}: {s:.1f} s" for kv, s in pool.starts)
    print(f"\nvLLM server starts (KV pool: seconds to healthy): {starts}")


@pytest.fixture
def vllm_server(engine_pool: EnginePool) -> Server:
    """The tiny model served with a 64 MB KV pool (32k tokens: no pressure)."""
    return engine_pool.serve("64M")


@pytest.fixture
def vllm_small_kv(engine_pool: EnginePool) -> Server:
    """The tiny model served with an 8 MB KV pool (4,096 tokens: 32 streams fill it)."""
    return engine_pool.serve("8M")
