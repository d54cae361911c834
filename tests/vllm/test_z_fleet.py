"""The real CPU engine as a fleet: ``vllm serve --data-parallel-size 2`` (two engine cores behind one API server,
every series labelled ``engine``) seen one engine at a time. Marked ``long`` (``make test-long``): two engine cores on
a 2-core box take about 3.5 minutes of the suite; ``make test`` holds the simulator's fleet to this engine's /metrics
instead (tests/contract/test_fleet_contract.py, its recording from scripts/capture_fleet_metrics.py) and runs the
fleet's accounting on it (tests/telemetry/test_fleet_e2e.py). Named last in the package: the pool restarts the
server for these flags, so the shared server of the other tests starts once, before it.

- two entries in ``server.engines``, their finished requests adding up to the client's completed requests;
- the fleet's KV blocks are both engines' pools (each its own ``vllm:cache_config_info``), not one of them.
"""

from __future__ import annotations

import pytest

from tests.vllm.conftest import SHARED_KV
from tests.vllm.locust_run import run_local

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.long]


def test_two_data_parallel_engines_are_two_entries_that_add_up(engine_pool, tmp_path):
    server = engine_pool.serve(SHARED_KV, ("--data-parallel-size", "2"))
    run = run_local(server.url, tmp_path, "StreamingChatUser", users=4, seconds=5,
                    extra=["--input-len", "fixed:32", "--output-len", "fixed:16", "--model", "tiny"])
    s = run.summary
    ok = s["requests"]["ok"]
    assert s["requests"]["failed"] == 0 and ok >= 4, run.output[-3000:]
    engines = s["server"]["engines"]
    assert [e["engine"] for e in engines] == ["0", "1"], engines
    finished = [e["requests_finished"] for e in engines]
    assert sum(finished) == ok, (finished, ok)
    assert min(finished) > 0  # four streams were dealt to both engines
    blocks = [e["num_gpu_blocks"] for e in engines]
    assert all(b and b > 0 for b in blocks)
    assert s["server"]["kv_blocks_total"] == sum(blocks) and s["server"]["engine_count"] == 2
    assert s["server"]["requests_succeeded"] == ok
    print(f"\nvLLM --data-parallel-size 2: {ok} requests completed by the client; engines finished {finished} "
          f"(sum {sum(finished)}); KV blocks {blocks} -> total {s['server']['kv_blocks_total']}")
