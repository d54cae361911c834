"""KV pressure is real: 32 streams of 128 in / 64 out on a pool of 64 blocks fill it, queue, preempt, and finish."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tests.server.sim.helpers import get, metric_value, running_sim, stream

pytestmark = pytest.mark.slow  # every test here starts a real process


def test_small_pool_fills_queues_preempts_and_every_request_completes_exactly():
    with running_sim("--num-gpu-blocks", "64", "--time-scale", "4", "--max-num-batched-tokens", "2048",
                     profile="deepseek-v2-lite-a100") as proc:
        port = proc.port
        samples: list[tuple[float, float, float]] = []
        stop = threading.Event()

        def scrape():
            while not stop.is_set():
                text = get(port, "/metrics")[1].decode()
                samples.append((metric_value(text, "vllm:kv_cache_usage_perc"),
                                metric_value(text, "vllm:num_requests_waiting"),
                                metric_value(text, "vllm:num_preemptions_total")))
                time.sleep(0.005)

        rng = np.random.default_rng(1)

        def one(i: int):
            prompt = rng.integers(1000, 30000, size=128).tolist()
            events, done = stream(port, "/v1/completions", {"prompt": prompt, "max_tokens": 64, "ignore_eos": True,
                                                            "stream_options": {"include_usage": True}})
            tokens = sum(1 for e in events if e["choices"] and e["choices"][0]["text"])
            return done, tokens, events[-1]["usage"]["completion_tokens"]

        scraper = threading.Thread(target=scrape, daemon=True)
        scraper.start()
        with ThreadPoolExecutor(32) as pool:
            results = list(pool.map(one, range(64)))  # two waves of 32 concurrent streams
        stop.set()
        scraper.join(5)
        final = get(port, "/metrics")[1].decode()
    assert all(r == (True, 64, 64) for r in results), results
    usage = [s[0] for s in samples]
    assert max(usage) == 1.0, max(usage)
    assert max(s[1] for s in samples) > 0
    assert len({s[2] for s in samples}) >= 3  # the preemption counter grew during the run, several times
    assert metric_value(final, "vllm:num_preemptions_total") >= 5
    assert metric_value(final, "vllm:request_success_total", {"finished_reason": "length"}) == 64
    assert metric_value(final, "vllm:kv_cache_usage_perc") == 0.0
