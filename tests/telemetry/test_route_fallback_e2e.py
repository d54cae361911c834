"""Route fallback with real processes: two simulators (one counting with deepseek-v2, one with deepseek-v3,
different KV pools), a headless Locust master and one worker behind ``--route-table`` + ``--route-tokenizers``, and
a fallback rule that acts once the beta simulator is slowed (``--batch-cap-at +16:1``: 16 s after its first request)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from contextlib import ExitStack
from datetime import datetime

import jsonschema
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support import LOCUST, PY, ROOT, Proc, free_port, wait_http
from workload.tokenizers import tokenizer_hash

pytestmark = pytest.mark.slow

BLOCKS = {"v1": 300, "beta": 1200}
TOKENIZERS = {"v1": "deepseek-v2", "beta": "deepseek-v3"}


def _metrics(url: str) -> dict[str, list]:
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def _header_counts(url: str) -> dict[tuple[str, str], float]:
    return {(s.labels["header"], s.labels["value"]): s.value
            for s in _metrics(url).get("sim:tokenizer_header_requests", []) if s.name.endswith("_total")}


class Poller(threading.Thread):
    """Polls each simulator's own /metrics (KV usage) while the run goes on: the truth the summary is held to."""

    def __init__(self, urls: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.urls, self.kv = urls, {v: [] for v in urls}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for v, url in self.urls.items():
                try:
                    kv = _metrics(url)["vllm:kv_cache_usage_perc"][0].value
                except (OSError, KeyError, IndexError):
                    continue
                self.kv[v].append((time.time(), kv))
            time.sleep(0.5)


def test_route_tokenizers_per_version_server_figures_and_a_fallback_that_acts(tmp_path) -> None:
    summary, requests = tmp_path / "s.json", tmp_path / "r.jsonl"
    with ExitStack() as stack:
        hosts = {}
        for v in ("v1", "beta"):
            port = free_port()
            slow = ["--batch-cap-at", "+16:1"] if v == "beta" else []  # 16 s after its first request
            sim = stack.enter_context(Proc(
                [PY, "-m", "server.sim", "--port", str(port), "--served-model-name", "m", "--tokenizer", TOKENIZERS[v],
                 "--num-gpu-blocks", str(BLOCKS[v]), *slow], name=f"sim-{v}"))
            hosts[v] = f"http://127.0.0.1:{port}"
            wait_http(f"{hosts[v]}/health", proc=sim)
        poller = Poller({v: f"{h}/metrics" for v, h in hosts.items()})
        poller.start()
        mport = free_port()
        loc = stack.enter_context(Proc(
            [LOCUST, "-f", "locustfile.py", "--headless", "--master", "--expect-workers", "1", "--master-bind-host",
             "127.0.0.1", "--master-bind-port", str(mport), "-u", "8", "-r", "8", "-t", "32s", "--host", hosts["v1"],
             "--input-len", "uniform:32:128", "--output-len", "fixed:32", "--model", "m",
             "--route-table", f"v1={hosts['v1']}@0-49,beta={hosts['beta']}@50-99",
             "--route-tokenizers", ",".join(f"{v}={t}" for v, t in TOKENIZERS.items()),
             "--route-fallback", "beta->v1 when ttft_p99>+100% or error_rate>1% for 2 windows of 3s",
             "--server-metrics-interval", "1", "--prometheus-port", "0", "--llm-summary-json", str(summary),
             "--llm-requests-jsonl", str(requests), "StreamingChatUser"], name="master"))
        worker = stack.enter_context(Proc(
            [LOCUST, "-f", "locustfile.py", "--worker", "--master-host", "127.0.0.1", "--master-port", str(mport),
             "StreamingChatUser"], name="worker"))
        rc = loc.wait(90)
        poller.done.set()
        poller.join(5)
        worker.wait(30)
        out, worker_out = loc.output(), worker.output()
        seen = {v: _header_counts(f"{h}/metrics") for v, h in hosts.items()}
    assert rc == 0 and "Traceback" not in out, out[-4000:]
    s = json.loads(summary.read_text())
    run_start, run_end = (datetime.fromisoformat(s["run"][k].replace("Z", "+00:00")).timestamp()
                          for k in ("started_utc", "ended_utc"))
    jsonschema.Draft202012Validator(json.loads((ROOT / "docs" / "summary.schema.json").read_text())).validate(s)
    versions = s["versions"]
    assert set(versions) >= {"v1", "beta"}, (s["requests"], versions.keys(), out[-3000:])

    # each version's prompts are cut and counted with its own tokenizer: the server agrees on every prompt
    for v in ("v1", "beta"):
        assert versions[v]["requests"] > 0
        assert versions[v]["prompt_mismatch_ratio"] == 0.0, (v, versions[v])
        assert versions[v]["tokenizer"]["name"] == TOKENIZERS[v]
        assert versions[v]["tokenizer"]["hash"] == tokenizer_hash(TOKENIZERS[v])
    assert versions["v1"]["tokenizer"]["compat_level"] == "full"
    assert versions["beta"]["tokenizer"]["compat_level"] not in ("full", "backward")  # V2 -> V3 moves boundaries

    # each simulator saw only its own version's headers, once per request it was sent
    for v in ("v1", "beta"):
        hashes = {val: n for (h, val), n in seen[v].items() if h == "X-Tokenizer-Hash"}
        assert set(hashes) == {tokenizer_hash(TOKENIZERS[v])}, (v, seen[v])
        names = {val for (h, val), _n in seen[v].items() if h == "X-Tokenizer-Version"}
        assert names == {v}
        levels = {val for (h, val), _n in seen[v].items() if h == "X-Compat-Level"}
        assert levels == {versions[v]["tokenizer"]["compat_level"]}
    for v in ("v1", "beta"):  # one count per request received; a request still in flight at quit is not recorded
        received = sum(n for (h, _), n in seen[v].items() if h == "X-Tokenizer-Hash")
        assert versions[v]["requests"] <= received <= versions[v]["requests"] + 8, (v, received)  # -u 8

    # each version's server figures come from its own backend's /metrics
    for v in ("v1", "beta"):
        server = versions[v]["server"]
        assert server["metrics_url"] == f"{hosts[v]}/metrics" and server["scrapes"] > 5
        assert server["scrape_failures"] == 0
        # the polls inside the run's own span (the summary scrapes only then): idle polls before and after would
        # dilute the truth. Two samplers of one process at different instants: within 20 %
        polled = [x for t, x in poller.kv[v] if run_start <= t <= run_end]
        assert len(polled) >= 5 and server["kv_cache_usage"]["max"] is not None
        truth = sum(polled) / len(polled)
        assert abs(server["kv_cache_usage"]["mean"] - truth) <= 0.2 * max(truth, 1e-3), (v, server, truth)
    # a 4x smaller pool under at least the same load: v1's usage is the larger, in the summary and on the sims
    assert versions["v1"]["server"]["kv_cache_usage"]["max"] > 2 * versions["beta"]["server"]["kv_cache_usage"]["max"]
    assert max(x for _, x in poller.kv["v1"]) > 2 * max(x for _, x in poller.kv["beta"])

    # the fallback fired once beta slowed, was switched in a measured time, and beta got nothing afterwards
    fb = s["route_fallback"]
    assert fb["fired"] and fb["from"] == "beta" and fb["to"] == "v1", fb
    assert fb["switched_at_s"] > 15 and fb["switch_after_breach_s"] >= 0  # beta slows down 16 s after its first request
    assert "--route-fallback: beta -> v1" in out  # decided on the master, applied on the worker (a message)
    assert "route fallback beta -> v1 applied" in worker_out and "Traceback" not in worker_out
    assert fb["before"]["beta"]["sent"] > 0
    assert fb["after"]["v1"]["sent"] > 0 and fb["after"].get("beta", {"sent": 0})["sent"] == 0
    lines = [json.loads(x) for x in requests.read_text().splitlines() if x.strip()]
    after = [r for r in lines if r["start_unix_s"] > fb["switched_at_unix"] + 0.05]
    assert after and not [r for r in after if r["version"] == "beta"]
    print(f"\nMUST-SHOW mismatch={ {v: versions[v]['prompt_mismatch_ratio'] for v in versions} } "
          f"hashes={ {v: {k[1][:12]: n for k, n in seen[v].items() if k[0] == 'X-Tokenizer-Hash'} for v in seen} } "
          f"kv_mean={ {v: round(versions[v]['server']['kv_cache_usage']['mean'], 4) for v in versions} } "
          f"polled_kv_mean={ {v: round(sum(x for _, x in p) / len(p), 4) for v, p in poller.kv.items()} } "
          f"switched_at_s={fb['switched_at_s']:.1f} switch_after_breach_s={fb['switch_after_breach_s']:.1f} "
          f"after={fb['after']} before={fb['before']}")
