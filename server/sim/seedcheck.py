"""The seed's scenario against a running server, with a small asyncio client: output tok/s and P99 TTFT.

N closed-loop users start together; each streams a completion (a prompt of exactly ``input_len``
token ids, ``max_tokens=output_len``, ``ignore_eos``) and sends the next one as soon as the stream
ends. Output tokens per second count the token-bearing chunks received during the run; TTFT is
from just before the request is written to the first chunk with text.

    python -m server.sim --port 8000 --profile deepseek-v2-lite-a100 &
    python -m server.sim.seedcheck --url http://127.0.0.1:8000 --users 16 --duration 60
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import asdict, dataclass

import aiohttp
import numpy as np


@dataclass(frozen=True)
class SeedResult:
    users: int
    duration_s: float
    requests: int
    output_tokens: int
    output_tok_s: float
    ttft_p50_ms: float
    ttft_p99_ms: float
    usage_mismatches: int
    errors: int


async def _user(session: aiohttp.ClientSession, url: str, model: str, rng: np.random.Generator, input_len: int,
                output_len: int, t_end: float, ttfts: list[float], counts: list[int], stats: dict) -> None:
    while time.perf_counter() < t_end:
        # a fresh random prompt each time, so no request hits the prefix cache (as in the seed's benchmark)
        body = {"model": model, "prompt": rng.integers(1000, 30000, size=input_len).tolist(),
                "max_tokens": output_len, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}
        t0 = time.perf_counter()
        first = None
        chunks = 0
        usage = None
        try:
            async with session.post(url, json=body) as resp:
                if resp.status != 200:
                    stats["errors"] += 1
                    await asyncio.sleep(0.05)
                    continue
                async for raw in resp.content:
                    line = raw.strip()
                    if not line.startswith(b"data: ") or line == b"data: [DONE]":
                        continue
                    event = json.loads(line[6:])
                    if event.get("usage"):
                        usage = event["usage"]["completion_tokens"]
                    if event["choices"] and event["choices"][0].get("text"):
                        now = time.perf_counter()
                        if first is None:
                            first = now
                            ttfts.append(now - t0)
                        if now <= t_end:
                            counts[0] += 1
                        chunks += 1
        except (TimeoutError, aiohttp.ClientError):
            stats["errors"] += 1
            continue
        stats["requests"] += 1
        if usage != chunks:
            stats["mismatch"] += 1


async def run(url: str, users: int = 16, input_len: int = 512, output_len: int = 256,
              duration_s: float = 60.0, seed: int = 0) -> SeedResult:
    base = url.rstrip("/")
    rng = np.random.default_rng(seed)
    conn = aiohttp.TCPConnector(limit=users + 4)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=None)) as session:
        async with session.get(f"{base}/v1/models") as r:
            model = (await r.json())["data"][0]["id"]
        ttfts: list[float] = []
        counts = [0]
        stats = {"requests": 0, "errors": 0, "mismatch": 0}
        t_start = time.perf_counter()
        t_end = t_start + duration_s
        await asyncio.gather(*(_user(session, f"{base}/v1/completions", model, rng, input_len, output_len, t_end,
                                     ttfts, counts, stats) for _ in range(users)))
    ms = np.asarray(ttfts) * 1000
    return SeedResult(users, duration_s, stats["requests"], counts[0], counts[0] / duration_s,
                      float(np.percentile(ms, 50)) if len(ms) else float("nan"),
                      float(np.percentile(ms, 99)) if len(ms) else float("nan"), stats["mismatch"], stats["errors"])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m server.sim.seedcheck", description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--users", type=int, default=16)
    p.add_argument("--input-len", type=int, default=512)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--duration", type=float, default=60.0)
    a = p.parse_args(argv)
    print(json.dumps(asdict(asyncio.run(run(a.url, a.users, a.input_len, a.output_len, a.duration))), indent=1))


if __name__ == "__main__":
    main()
