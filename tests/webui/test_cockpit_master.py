"""The cockpit on the master of a distributed run (real processes: the simulator, a master with the web UI, one
worker): a run started through the web form's endpoint fills /llm/charts/data from the worker's merged reports,
and the downloads answer from the master (issue #19)."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

import pytest

from tests.support import LOCUST, PY, ROOT, Proc, free_port, wait_http
from tests.webui.chromium import wait_for

pytestmark = pytest.mark.slow


def _get(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.headers.get_content_type(), r.read()


def test_charts_and_downloads_on_the_master(tmp_path):
    sim_port, web_port, mport = free_port(), free_port(), free_port()
    env = {"PYTHONPATH": str(ROOT), "LOCUST_PROMETHEUS_PORT": "0", "LOCUST_INPUT_LEN": "fixed:128",
           "LOCUST_OUTPUT_LEN": "fixed:32", "LOCUST_ATTRIBUTION_WINDOW": "1"}
    sim_argv = [PY, "-m", "server.sim", "--host", "127.0.0.1", "--port", str(sim_port), "--profile", "cpu-tiny",
                "--time-scale", "5"]
    host = f"http://127.0.0.1:{sim_port}"
    with Proc(sim_argv, name="sim") as sim:
        wait_http(f"{host}/health", timeout=60, proc=sim)
        master = Proc([LOCUST, "-f", "locustfile.py", "--master", "--master-bind-host", "127.0.0.1",
                       "--master-bind-port", str(mport), "--web-host", "127.0.0.1", "--web-port", str(web_port),
                       "--host", host, "StreamingCompletionUser"], name="master", env=env)
        worker = Proc([LOCUST, "-f", "locustfile.py", "--worker", "--master-host", "127.0.0.1", "--master-port",
                       str(mport), "StreamingCompletionUser"], name="worker", env=env)
        web = f"http://127.0.0.1:{web_port}"
        with master, worker:
            wait_http(web + "/", timeout=60, proc=master)
            wait_for(lambda: json.loads(_get(web + "/stats/requests")[2]).get("workers"), 60, "the worker to join")
            form = urllib.parse.urlencode({"user_count": "2", "spawn_rate": "2", "host": host}).encode()
            with urllib.request.urlopen(urllib.request.Request(web + "/swarm", data=form), timeout=30) as r:
                assert json.loads(r.read())["success"], "the start was refused"
            try:
                d = wait_for(lambda: (d := json.loads(_get(web + "/llm/charts/data")[2]))
                             and {"latency", "throughput"} <= {f["id"] for f in d["figures"]} and d, 60,
                             "the live charts on the master")
            except AssertionError as e:
                raise AssertionError(f"{e}\n--- master ---\n{master.output()[-3000:]}") from None
            assert d["status"]["users"] == 2 and d["status"]["requests"] > 0, d["status"]
            for route, ctype in (("/llm/summary.json", "application/json"), ("/llm/stats.csv", "text/csv"),
                                 ("/llm/stages.csv", "text/csv"), ("/llm/report", "text/html")):
                status, got, body = _get(web + route)
                assert (status, got) == (200, ctype), route
            summary = json.loads(_get(web + "/llm/summary.json")[2])
            assert summary["workers"] == 1 and summary["requests"]["total"] > 0
            urllib.request.urlopen(urllib.request.Request(web + "/stop", method="POST"), timeout=10).read()
        assert "Traceback" not in master.output(), master.output()[-3000:]
