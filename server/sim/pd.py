"""Disaggregated prefill/decode: this simulator as the decode instance (and the proxy in front of it) of a pair.

With ``--kv-transfer-from URL`` every generation request is first sent to the prefill instance at URL (another
simulator, or any OpenAI server: a ``max_tokens=1`` completion of the same prompt ids, as vLLM's disaggregation
proxy does), then waits here while its KV cache "arrives" — ``--kv-transfer-delay`` seconds, counted in
``vllm:num_requests_waiting_by_reason{reason="deferred"}`` — and then runs on this engine, whose prefill costs
nothing (the KV came over the wire). Exported as vLLM's NIXL connector does: the measured wait in
``vllm:nixl_xfer_time_seconds``, the prompt's KV size in ``vllm:nixl_bytes_transferred``, failed prefill calls in
``vllm:nixl_num_failed_transfers``. The request's arrival is stamped when it reaches this instance, so the decode
side's TTFT and queue time include the transfer, as vLLM's do.

    python -m server.sim --port 8100                                          # the prefill instance
    python -m server.sim --port 8200 --kv-transfer-from http://127.0.0.1:8100 --kv-transfer-delay 0.05
    locust ... --host http://127.0.0.1:8200 \
        --server-metrics-url prefill=http://127.0.0.1:8100/metrics,decode=http://127.0.0.1:8200/metrics
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from server.sim.metrics import Hist

log = logging.getLogger("server.sim")

KV_BYTES_PER_TOKEN = 70_272
"""Bytes of KV cache per token moved from prefill to decode (DeepSeek-V3's MLA: 61 layers x 576 x 2 bytes)."""
XFER_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.5, 0.75, 1.0, 2.0, 5.0)
BYTES_BUCKETS = (1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10)
PREFILL_TIMEOUT_S = 120.0


@dataclass
class KvTransfer:
    """Where prefill runs and how long a request's KV takes to arrive; the transfer's counters for /metrics."""

    prefill_url: str
    delay_s: float
    model: str

    def __post_init__(self) -> None:
        self.deferred = 0
        self.xfer = Hist(XFER_BUCKETS)
        self.bytes = Hist(BYTES_BUCKETS)
        self.failed = 0

    async def _prefill(self, ids: list[int]) -> None:
        """One ``max_tokens=1`` completion on the prefill instance (raises on a failure)."""
        u = urlsplit(self.prefill_url)
        body = json.dumps({"model": self.model, "prompt": ids, "max_tokens": 1, "stream": False}).encode()
        reader, writer = await asyncio.open_connection(u.hostname, u.port or 80)
        try:
            writer.write(f"POST /v1/completions HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
            status = await reader.readline()
            await reader.read()
        finally:
            writer.close()
        if b" 200 " not in status:
            raise OSError(f"prefill instance answered {status.decode(errors='replace').strip()!r}")

    async def run(self, ids: list[int], submit) -> None:
        """Prefill there, wait out the transfer here, then ``submit()`` to this engine (not when aborted since)."""
        try:
            await asyncio.wait_for(self._prefill(ids), PREFILL_TIMEOUT_S)
        except (TimeoutError, OSError) as e:
            self.failed += 1
            log.warning("prefill on %s failed (%s): decoding with a local prefill", self.prefill_url, e)
            submit()
            return
        self.deferred += 1
        t0 = time.perf_counter()
        try:
            await asyncio.sleep(self.delay_s)
        finally:
            self.deferred -= 1
        self.xfer.observe(time.perf_counter() - t0)
        self.bytes.observe(len(ids) * KV_BYTES_PER_TOKEN)
        submit()
