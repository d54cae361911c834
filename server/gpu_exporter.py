"""GPU memory and utilization exporter for the server host (Prometheus text over HTTP, via NVML).

    python -m server.gpu_exporter --port 9400 [--host 0.0.0.0]

Exports, per GPU index (label ``gpu``, plus ``name``): ``gpu_memory_used_bytes``,
``gpu_memory_total_bytes``, ``gpu_utilization_ratio`` (0..1) and the counter ``gpu_energy_joules_total`` (NVML's
total energy since the driver loaded, ``nvmlDeviceGetTotalEnergyConsumption`` in mJ; left out for a GPU older than
Volta, which has none), read from nvidia-ml-py at each scrape. Without a usable NVIDIA driver or GPU it prints one
line and exits with code 1.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator

import pynvml
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from workload.argtypes import port

NO_GPU_EXIT = 1


class GpuCollector(Collector):
    """Reads every GPU through NVML at each scrape."""

    def __init__(self, nvml=pynvml) -> None:
        self.nvml = nvml

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        nv = self.nvml
        used = GaugeMetricFamily("gpu_memory_used_bytes", "GPU memory in use", labels=["gpu", "name"])
        total = GaugeMetricFamily("gpu_memory_total_bytes", "GPU memory in total", labels=["gpu", "name"])
        util = GaugeMetricFamily("gpu_utilization_ratio", "GPU busy time over the last sample period, 0..1",
                                 labels=["gpu", "name"])
        energy = CounterMetricFamily("gpu_energy_joules", "GPU energy consumed since the driver loaded (NVML)",
                                     labels=["gpu", "name"])
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            name = nv.nvmlDeviceGetName(h)
            name = name.decode() if isinstance(name, bytes) else str(name)
            mem = nv.nvmlDeviceGetMemoryInfo(h)
            labels = [str(i), name]
            used.add_metric(labels, float(mem.used))
            total.add_metric(labels, float(mem.total))
            util.add_metric(labels, nv.nvmlDeviceGetUtilizationRates(h).gpu / 100.0)
            try:
                energy.add_metric(labels, nv.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0)
            except nv.NVMLError:  # not supported (before Volta): no sample, not a failed scrape
                pass
        yield used
        yield total
        yield util
        yield energy


def init_nvml(nvml=pynvml) -> int:
    """Initialise NVML and return the GPU count; raise RuntimeError with a one-line reason otherwise."""
    try:
        nvml.nvmlInit()
        count = nvml.nvmlDeviceGetCount()
    except nvml.NVMLError as e:
        raise RuntimeError(f"no usable NVIDIA driver/GPU (NVML: {e})") from None
    if count == 0:
        raise RuntimeError("the NVIDIA driver reports no GPU")
    return count


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m server.gpu_exporter", description=__doc__.split("\n")[0])
    p.add_argument("--port", type=port, default=9400, help="HTTP port for /metrics (default %(default)s)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s; 0.0.0.0 for all)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None, nvml=pynvml) -> int:
    args = parse_args(argv)
    try:
        count = init_nvml(nvml)
    except RuntimeError as e:
        print(f"gpu_exporter: {e}; nothing to export", file=sys.stderr)
        return NO_GPU_EXIT
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpuCollector(nvml))
    try:
        server, _thread = start_http_server(args.port, addr=args.host, registry=registry)
    except OSError as e:
        print(f"gpu_exporter: cannot bind {args.host}:{args.port} ({e.strerror or e})", file=sys.stderr)
        return 2
    print(f"gpu_exporter: {count} GPU(s) at http://{args.host}:{server.server_port}/metrics", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    server.shutdown()
    nvml.nvmlShutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
