"""The dashboard's GPU panels read our GPU exporter's series or NVIDIA dcgm-exporter's, whichever exists.

A real Prometheus scrapes two targets: ``server.gpu_exporter`` (its real collector and HTTP server, over the fake
NVML of tests/server/test_gpu_exporter.py: GPU 0 uses 20e9 of 80e9 bytes at 37 %) and a stand-in for dcgm-exporter
serving DCGM's field names with its units (frame buffer in MiB, utilization in %; the text below is written for this
test from the DCGM field list, not captured from a GPU). Each GPU panel query returns both, converted to the
dashboard's units; each side of its ``or`` returns its own exporter's series, so a cluster with only one of the two
sees that one. (The rest of the dashboard returns data from a real run: tests/deploy/test_live_detectors.py.)
"""

from __future__ import annotations

import time

import pytest

from tests.deploy.promql import concrete, dashboard_queries, query
from tests.requires import require_tool
from tests.support import PY, Proc, free_port, prometheus_config, wait_http

pytestmark = pytest.mark.slow

DCGM_TEXT = """\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="3",UUID="GPU-test",device="nvidia3",modelName="Test GPU",Hostname="node-a"} 64
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="3",UUID="GPU-test",device="nvidia3",modelName="Test GPU",Hostname="node-a"} 1000
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="3",UUID="GPU-test",device="nvidia3",modelName="Test GPU",Hostname="node-a"} 3000
"""
SERVE_TEXT = """
import http.server, sys
body = sys.stdin.read().encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""
OURS = """
import sys
from server import gpu_exporter
from tests.server.fakes import FakeNvml
sys.exit(gpu_exporter.main(["--port", sys.argv[1]], nvml=FakeNvml()))
"""
MIB = 1048576
# (panel target) -> {gpu label: value} expected from ours (GPU 0 and 1) and from the DCGM stand-in (GPU 3)
EXPECTED = {
    "'GPU memory' A": {"0": 20e9, "1": 100e9, "3": 1000 * MIB},
    "'GPU memory' B": {"0": 80e9, "1": 141e9, "3": 4000 * MIB},
    "'GPU utilization' A": {"0": 0.37, "1": 0.90, "3": 0.64},
}


def _values(base: str, expr: str) -> dict[str, float]:
    body = query(base, concrete(expr))
    assert body.get("status") == "success", (expr, body)
    return {r["metric"]["gpu"]: float(r["value"][1]) for r in body["data"]["result"]}


def test_gpu_panels_read_our_exporter_or_dcgm(tmp_path):
    prom_exe = require_tool("prometheus", "prometheus")
    ours, dcgm, prom_port = free_port(), free_port(), free_port()
    prometheus_config(tmp_path / "prometheus.yml", {"gpu": ours, "dcgm": dcgm})
    (tmp_path / "dcgm.prom").write_text(DCGM_TEXT)
    with (
        Proc([PY, "-c", OURS, str(ours)], name="gpu-exporter") as gpu,
        Proc(["sh", "-c", f'exec {PY} -c "$0" {dcgm} < {tmp_path / "dcgm.prom"}', SERVE_TEXT], name="dcgm") as fake,
        Proc([prom_exe, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'db'}",
              f"--web.listen-address=127.0.0.1:{prom_port}"], name="prometheus") as prom,
    ):
        wait_http(f"http://127.0.0.1:{ours}/metrics", proc=gpu)
        wait_http(f"http://127.0.0.1:{dcgm}/metrics", proc=fake)
        base = f"http://127.0.0.1:{prom_port}"
        wait_http(base + "/-/ready", timeout=30, proc=prom)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(query(base, "up == 1")["data"]["result"]) < 2:
            time.sleep(0.5)
        gpu_queries = {w.split(" ", 1)[1]: e for w, e in dashboard_queries() if "GPU" in w}
        assert set(gpu_queries) == set(EXPECTED)
        for where, expr in gpu_queries.items():
            ours_side, dcgm_side = expr.split(" or ")
            got = _values(base, expr)
            assert got == pytest.approx(EXPECTED[where]), (where, got)
            assert set(_values(base, ours_side)) == {"0", "1"}, where  # each side reads its own exporter only
            assert set(_values(base, dcgm_side)) == {"3"}, where
