"""A stand-in for pynvml: GPUs with fixed memory and utilization (the GPU exporter's and the dashboard's tests)."""

from __future__ import annotations

from types import SimpleNamespace

import pynvml


class FakeNvml:
    """Two GPUs with fixed memory and utilization, shaped like pynvml's API."""

    NVMLError = pynvml.NVMLError

    def __init__(self, gpus=((80e9, 20e9, 37), (141e9, 100e9, 90)), fail_init: bool = False,
                 energy_mj: dict[int, int] | None = None):
        self.gpus = gpus
        self.fail_init = fail_init
        self.energy_mj = energy_mj
        """GPU index -> NVML's total energy counter in mJ; a GPU not in it has none (NOT_SUPPORTED)."""

    def nvmlInit(self):
        if self.fail_init:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return f"Fake GPU {h}"

    def nvmlDeviceGetMemoryInfo(self, h):
        total, used, _ = self.gpus[h]
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=self.gpus[h][2], memory=0)

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if not self.energy_mj or h not in self.energy_mj:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return self.energy_mj[h]
