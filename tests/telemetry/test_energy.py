"""Energy per output token: the GPUs' energy counters (DCGM's in mJ, server/gpu_exporter.py's in J) read by the GPU
watch, the joules over a span between two scrapes, and the capacity section's joules per output token."""

from __future__ import annotations

import pytest

from shapes.search import energy_per_token
from telemetry.outputs import runrecord
from telemetry.outputs.runrecord import GpuWatch, RunRecorder, parse_gpu_metrics

# a DCGM exporter's page (dcgm-exporter 3.x default counters), two H200s; energy in mJ since the driver loaded
DCGM_PAGE = """# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H200",Hostname="h"}} 120000
DCGM_FI_DEV_FB_USED{{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H200",Hostname="h"}} 119000
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H200",Hostname="h"}} 612.5
DCGM_FI_DEV_POWER_USAGE{{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H200",Hostname="h"}} 598.0
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H200",Hostname="h"}} {e0}
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H200",Hostname="h"}} {e1}
"""


def test_dcgm_energy_counters_parse_to_joules_per_gpu():
    gpus = parse_gpu_metrics(DCGM_PAGE.format(e0=8_000_000_000, e1=7_500_000_500))
    assert gpus["0"]["energy_j"] == 8_000_000.0 and gpus["1"]["energy_j"] == pytest.approx(7_500_000.5)
    assert gpus["0"]["used"] == 120000 * 1024**2  # the memory fields still in MiB
    ours = "gpu_energy_joules_total{gpu=\"0\",name=\"NVIDIA H200\"} 1234.5\ngpu_memory_used_bytes{gpu=\"0\"} 1\n"
    assert parse_gpu_metrics(ours)["0"]["energy_j"] == 1234.5


def _watch(monkeypatch, pages: list[tuple[float, str]]) -> GpuWatch:
    """A GPU watch that scraped ``pages`` at their wall times (one more scrape finds nothing new)."""
    clock = {"t": 0.0}
    queue = list(pages)

    def get(_url, _headers):
        if queue:
            clock["t"], page = queue.pop(0)
        else:
            page = pages[-1][1]
        return page.encode()

    monkeypatch.setattr(runrecord, "_get", get)
    monkeypatch.setattr(runrecord.time, "time", lambda: clock["t"])
    watch = GpuWatch("http://dcgm:9400/metrics", 2.0)
    for _ in pages:
        watch.scrape_once()
    return watch


def test_the_energy_over_a_span_is_interpolated_between_scrapes_of_every_gpu(monkeypatch):
    # both GPUs together: 1000 J at t=100, 1600 J at t=102, 2400 J at t=104
    watch = _watch(monkeypatch, [(100.0, DCGM_PAGE.format(e0=600_000, e1=400_000)),
                                 (102.0, DCGM_PAGE.format(e0=900_000, e1=700_000)),
                                 (104.0, DCGM_PAGE.format(e0=1_300_000, e1=1_100_000))])
    joules, how = watch.energy_between(101.0, 103.0)
    assert joules == pytest.approx(2000.0 - 1300.0) and "3 scrapes" in how
    assert watch.energy_between(99.0, 103.0) == (None, "the GPU energy readings do not cover the probe (it began "
                                                       "before the first or ended after the last)")


def test_no_counter_a_reset_or_no_url_is_null_with_the_reason(monkeypatch):
    page = 'DCGM_FI_DEV_FB_USED{gpu="0",modelName="NVIDIA A100"} 1024\n'
    joules, why = _watch(monkeypatch, [(100.0, page), (102.0, page)]).energy_between(100.5, 101.5)
    assert joules is None and "has no energy counter for every GPU" in why
    reset = _watch(monkeypatch, [(100.0, DCGM_PAGE.format(e0=900_000, e1=900_000)),
                                 (102.0, DCGM_PAGE.format(e0=1_000, e1=1_000))])
    assert reset.energy_between(100.5, 101.5) == (None, "a GPU energy counter went backwards (the exporter or the "
                                                        "driver restarted)")
    assert RunRecorder(environment=None).energy_between(0.0, 1.0) == (
        None, "no GPU energy reading: --gpu-metrics-url is not set")


def test_joules_per_output_token_at_the_boundary_probe():
    row = {"energy_j": 700.0, "energy_note": "GPU energy counters at u, 3 scrapes", "output_per_s": 175.0,
           "span_s": 2.0}
    value, how = energy_per_token(row)
    assert value == pytest.approx(700.0 / (175.0 * 2.0)) and "700 J over 2 s / 350 output tokens" in how
    assert energy_per_token({**row, "energy_j": None, "energy_note": "no GPU energy reading: --gpu-metrics-url is "
                             "not set"}) == (None, "no GPU energy reading: --gpu-metrics-url is not set")
    assert energy_per_token({})[0] is None
