"""server.gpu_exporter: per-GPU gauges from NVML (faked here), and the one-line no-GPU exit without traceback."""

from __future__ import annotations

import subprocess
import urllib.request

import pynvml
import pytest
from prometheus_client import CollectorRegistry

from server import gpu_exporter
from tests.server.fakes import FakeNvml
from tests.support import PY, ROOT, Proc, free_port, wait_http


def test_collector_exports_memory_and_utilization_per_gpu():
    reg = CollectorRegistry()
    reg.register(gpu_exporter.GpuCollector(FakeNvml()))
    g1 = {"gpu": "1", "name": "Fake GPU 1"}
    assert reg.get_sample_value("gpu_memory_total_bytes", g1) == 141e9
    assert reg.get_sample_value("gpu_memory_used_bytes", g1) == 100e9
    assert reg.get_sample_value("gpu_utilization_ratio", g1) == pytest.approx(0.90)
    assert reg.get_sample_value("gpu_utilization_ratio", {"gpu": "0", "name": "Fake GPU 0"}) == pytest.approx(0.37)


def test_collector_exports_each_gpus_energy_counter_in_joules_where_nvml_has_one():
    reg = CollectorRegistry()
    reg.register(gpu_exporter.GpuCollector(FakeNvml(energy_mj={1: 123_456_789})))
    assert reg.get_sample_value("gpu_energy_joules_total", {"gpu": "1", "name": "Fake GPU 1"}) == 123_456.789
    assert reg.get_sample_value("gpu_energy_joules_total", {"gpu": "0", "name": "Fake GPU 0"}) is None  # unsupported
    assert reg.get_sample_value("gpu_memory_used_bytes", {"gpu": "0", "name": "Fake GPU 0"}) == 20e9  # still read


def test_no_driver_returns_exit_code_with_one_line(capsys):
    assert gpu_exporter.main(["--port", "0"], nvml=FakeNvml(fail_init=True)) == gpu_exporter.NO_GPU_EXIT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no usable NVIDIA driver/GPU" in err[0]


def test_zero_gpus_is_also_no_gpu(capsys):
    assert gpu_exporter.main(["--port", "0"], nvml=FakeNvml(gpus=())) == gpu_exporter.NO_GPU_EXIT
    assert "reports no GPU" in capsys.readouterr().err


def _has_gpu() -> bool:
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return True
    except pynvml.NVMLError:
        return False


@pytest.mark.slow
def test_real_process_serves_a_gpu_or_says_one_line_and_exits_nonzero():
    """Whichever this machine has: with a GPU the real process serves its metrics, without one it exits with one
    line. The branch that ran is printed (a machine can show only one)."""
    if _has_gpu():
        port = free_port()
        with Proc([PY, "-m", "server.gpu_exporter", "--port", str(port)], name="gpu-exporter") as p:
            wait_http(f"http://127.0.0.1:{port}/metrics", proc=p)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                body = r.read()
        print("\nGPU exporter branch: a GPU, serving its metrics")
        assert b"gpu_memory_used_bytes" in body, body[:2000]
        return
    p = subprocess.run([PY, "-m", "server.gpu_exporter", "--port", "0"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    print("\nGPU exporter branch: no GPU, one-line exit")
    assert p.returncode == gpu_exporter.NO_GPU_EXIT
    out = (p.stdout + p.stderr).strip().splitlines()
    assert len(out) == 1, out
    assert "Traceback" not in p.stderr and out[0].startswith("gpu_exporter: no usable NVIDIA driver/GPU")
