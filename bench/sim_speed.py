"""How many streamed output tokens per second the simulator sustains on one CPU core.

Starts ``python -m server.sim`` pinned to one core with a huge ``--time-scale`` (step times vanish, so
the server is CPU-bound), then a fast raw-socket client in another process (pinned to another core
when there is one) keeps ``--streams`` completions streaming and counts token events over a window.
Prints the figure, the share of its core the server used over the window (below 1.0 on a busy
machine, where other processes take the rest of that core), and tokens per server CPU-second.

    python -m bench.sim_speed                       # defaults: 64 streams, 10 s
    python -m bench.sim_speed --streams 128 --duration 20 --tokens-per-chunk 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

from workload.argtypes import non_negative_seconds, positive_int, seconds

ROOT = Path(__file__).resolve().parent.parent
PATTERN = b'"finish_reason"'  # once per token event, never in the usage event


class _Stream(asyncio.Protocol):
    """One keep-alive connection that streams completions back to back and counts token events."""

    def __init__(self, request: bytes, counter: list[int]):
        self.request, self.counter, self.tail = request, counter, b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        buf = self.tail + data
        self.counter[0] += buf.count(PATTERN)
        done = b"data: [DONE]" in buf
        self.tail = b"" if done else buf[-(len(PATTERN) - 1) :]  # too short to hold a whole pattern
        if done:
            self.transport.write(self.request)


def _client(
    port: int, streams: int, max_tokens: int, warmup: float, duration: float, core: int | None, out: mp.Queue
) -> None:
    if core is not None:
        os.sched_setaffinity(0, {core})

    async def main() -> float:
        body = json.dumps(
            {"prompt": list(range(1000, 1008)), "max_tokens": max_tokens, "ignore_eos": True, "stream": True}
        ).encode()
        request = (
            b"POST /v1/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%b" % (len(body), body)
        )
        counter = [0]
        loop = asyncio.get_running_loop()
        conns = [
            await loop.create_connection(lambda: _Stream(request, counter), "127.0.0.1", port) for _ in range(streams)
        ]
        await asyncio.sleep(warmup)
        n0, t0, c0 = counter[0], time.perf_counter(), time.process_time()
        await asyncio.sleep(duration)
        n1, t1, c1 = counter[0], time.perf_counter(), time.process_time()
        for tr, _p in conns:
            tr.close()
        return (n1 - n0) / (t1 - t0), (c1 - c0) / (t1 - t0)

    out.put(asyncio.run(main()))


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.sim_speed", description=__doc__.splitlines()[0])
    p.add_argument("--streams", type=positive_int, default=64)
    p.add_argument("--duration", type=seconds, default=10.0)
    p.add_argument("--warmup", type=non_negative_seconds, default=2.0)
    p.add_argument("--max-tokens", type=positive_int, default=1500)
    p.add_argument("--tokens-per-chunk", type=positive_int, default=1)
    a = p.parse_args(argv)
    cores = sorted(os.sched_getaffinity(0))
    server_core, client_core = cores[0], (cores[1] if len(cores) > 1 else None)
    argv_srv = [
        sys.executable,
        "-m",
        "server.sim",
        "--port",
        "0",
        "--profile",
        "cpu-tiny",
        "--time-scale",
        "1e6",
        "--max-num-seqs",
        "1024",
        "--max-num-batched-tokens",
        "65536",
        "--num-gpu-blocks",
        "200000",
        "--max-model-len",
        "4096",
        "--tokens-per-chunk",
        str(a.tokens_per_chunk),
    ]
    srv = subprocess.Popen(
        argv_srv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {server_core}),
    )
    try:
        line = srv.stdout.readline()
        if "listening on" not in line:
            raise SystemExit(f"simulator did not start: {line!r}")
        port = int(line.split("http://", 1)[1].split()[0].rsplit(":", 1)[1])
        q: mp.Queue = mp.Queue()
        client = mp.Process(target=_client, args=(port, a.streams, a.max_tokens, a.warmup, a.duration, client_core, q))
        client.start()
        time.sleep(a.warmup)
        cpu0, w0 = _cpu_seconds(srv.pid), time.perf_counter()
        rate, client_cpu = q.get(timeout=a.warmup + a.duration + 60)
        cpu = (_cpu_seconds(srv.pid) - cpu0) / (time.perf_counter() - w0)
        client.join(10)
    finally:
        srv.terminate()
        srv.wait(10)
    print(
        f"sim_speed: {rate:,.0f} streamed output tokens/s with the server pinned to one core "
        f"(it used {cpu:.2f} of that core; client {client_cpu:.2f} core; {a.streams} streams, "
        f"tokens-per-chunk {a.tokens_per_chunk})"
    )
    if cpu > 0:
        print(f"sim_speed: {rate / cpu:,.0f} streamed output tokens per server CPU-second")


if __name__ == "__main__":
    main()
