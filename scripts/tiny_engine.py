"""The tiny test model served by the real vLLM CPU engine for as long as a capture script needs it.

    with tiny_engine("capture_server_env", "64M") as url:
        capture(url, out)

The engine is the suite's own (tests/vllm/engine.py, needs ``make vllm-env``); without it the script stops
with the reason and exit code 2.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def tiny_engine(who: str, kv_bytes: str, flags: tuple[str, ...] = ()) -> Iterator[str]:
    """Start the tiny model with ``flags``, yield its base URL, stop it (and its trace sink) on the way out."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.vllm.engine import EnginePool, missing_reason

    if (why := missing_reason()) is not None:
        print(f"{who}: cannot start the engine: {why}", file=sys.stderr)
        raise SystemExit(2)
    with tempfile.TemporaryDirectory(prefix=f"{who}-") as tmp:
        pool = EnginePool(Path(tmp))
        try:
            server = pool.serve(kv_bytes, flags)
            print(" ".join(("vLLM", *flags)), f"healthy in {server.start_s:.1f} s on {server.url}")
            yield server.url
        finally:
            pool.shut()
