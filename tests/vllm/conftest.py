"""Fixtures for the real-engine tests (all marked ``vllm``).

Outside ``make test-vllm`` / ``make test`` the tests skip when the engine venv or model is missing;
those targets set ``REQUIRE_VLLM=1``, which turns that skip into a failure (tests/requires.py), so CI can never pass
with the real-engine tests silently skipped.

The engine pool lives for this package only: the last server stops before the rest of the suite runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.requires import VLLM, require
from tests.vllm.engine import MODEL_DIR, EnginePool, Server, missing_reason


def _require_engine() -> None:
    reason = missing_reason()
    require(reason and f"real vLLM engine unavailable: {reason}", VLLM)


@pytest.fixture(scope="package")
def model_dir() -> Path:
    """The built tiny model folder (.cache/tiny-deepseek)."""
    _require_engine()
    return MODEL_DIR


@pytest.fixture(scope="package")
def engine_pool(tmp_path_factory) -> EnginePool:
    _require_engine()
    pool = EnginePool(tmp_path_factory.mktemp("vllm"))
    yield pool
    pool.shut()
    starts = ", ".join(f"{kv}: {s:.1f} s" for kv, s in pool.starts)
    print(f"\nvLLM server starts (KV pool: seconds to healthy): {starts}")


# One KV size and one flag set (engine.ENGINE_FLAGS, the OTLP endpoint) for every test: a server start costs
# 35-100 s of the CI budget, so the engine starts once for the package. The light tests
# (4 streams x 96 tokens = 9% of 4,096 tokens) never come near the pool's end, which they assert
# (no preemption); only the pressure test fills it. EnginePool serves other sizes on demand.
SHARED_KV = "8M"


@pytest.fixture
def vllm_server(engine_pool: EnginePool) -> Server:
    """The tiny model served with an 8 MB KV pool (4,096 tokens), shared by the real-engine tests."""
    return engine_pool.serve(SHARED_KV)


@pytest.fixture
def vllm_small_kv(engine_pool: EnginePool) -> Server:
    """The same server, named for intent: an 8 MB KV pool that 32 streams of 192 tokens overfill."""
    return engine_pool.serve("8M")
