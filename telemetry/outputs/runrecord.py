"""The run record and the server environment: what a result needs to be compared with another one later.

``run`` (summary section): every effective option (secrets masked), the user classes and their weights, the shape
and its stages, the seeds, the tokenizer with its hash, this tool's version and git commit, the Python and Locust
versions, the UTC start and end, the load-generator hosts and worker count, and why the run stopped.

``server_env`` (summary section, read once at test start on the master or the local run): vLLM's version
(``GET /version``), the served model and its ``max_model_len`` (``GET /v1/models``) and the cache config vLLM
exports as the labels of ``vllm:cache_config_info`` (block_size, cache_dtype, num_gpu_blocks,
gpu_memory_utilization, enable_prefix_caching). A field the server does not answer is null, and ``errors`` says
which look-up failed and why.

    record = RunRecorder(environment).register()     # telemetry/plugin.py installs it
    summary["run"], summary["server_env"]
"""

from __future__ import annotations

import json
import platform
import re
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import gevent
from locust.runners import MasterRunner
from prometheus_client.parser import text_string_to_metric_families

from telemetry.measure.targets import metrics_url
from telemetry.measure.view import RunView
from users.options import RESOLVED_SALT, prompt_source, sampling_fields
from users.settings import api_key_of

TOOL = "deepseek-locust"
ROOT = Path(__file__).resolve().parent.parent
MASK = "***"
SECRET = re.compile(r"(api_key|secret|password|passwd|bearer|credential)", re.IGNORECASE)
"""Option names whose value is never written (``--api-key`` and its kind)."""
CACHE_LABELS = ("block_size", "cache_dtype", "num_gpu_blocks", "gpu_memory_utilization", "enable_prefix_caching")
"""The ``vllm:cache_config_info`` labels the record keeps (typed); the rest are kept as text under ``other``."""
BLOCK_SIZE_FALLBACK = 16
"""The client KV block fill's block size when the server reports none (vLLM's default on GPUs)."""


def utc(t: float | None) -> str | None:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z") if t else None


def _git_commit() -> dict:
    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(dirty) if commit is not None and dirty is not None else None}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _jsonable(v: object) -> object:
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return str(v)


def effective_options(options) -> dict:
    """Every option as the run used it; a secret's value (when set) is written as ``***``."""
    if options is None:
        return {}
    out = {}
    for k, v in sorted(vars(options).items()):
        out[k] = MASK if SECRET.search(k) and v else _jsonable(v)
    return out


def _typed(value: str) -> object:
    low = value.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", ""):
        return None
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def parse_cache_config(text: str) -> dict | None:
    """The labels of ``vllm:cache_config_info`` in a /metrics page, typed (the first engine's); with several engines
    (``--data-parallel-size``: one sample each, each its own pool) also ``engines`` and ``num_gpu_blocks_total``, the
    server's whole pool. None when the page has none."""
    for fam in text_string_to_metric_families(text):
        if fam.name in ("vllm:cache_config_info", "vllm:cache_config") and fam.samples:
            labels = dict(fam.samples[0].labels)
            out = {k: _typed(labels[k]) if k in labels else None for k in CACHE_LABELS}
            out["other"] = {k: v for k, v in sorted(labels.items()) if k not in CACHE_LABELS}
            blocks = [_typed(s.labels.get("num_gpu_blocks", "")) for s in fam.samples]
            out["engines"] = len(fam.samples)
            out["num_gpu_blocks_total"] = sum(blocks) if all(isinstance(b, int) for b in blocks) else None
            return out
    return None


def _get(url: str, headers: dict[str, str], timeout: float = 5.0) -> bytes:
    req = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 (the user's own --host)
        return r.read()


def read_server_env(host: str, metrics: str | None, headers: dict[str, str] | None = None) -> dict:
    """One look at the server: version, model card, cache config. Never raises; ``errors`` names each miss."""
    headers = headers or {}
    base = host.rstrip("/").removesuffix("/v1")
    env: dict = {"url": base, "version": None, "model": None, "max_model_len": None, "cache_config": None,
                 "errors": {}}
    try:
        env["version"] = str(json.loads(_get(base + "/version", headers))["version"])
    except Exception as e:  # noqa: BLE001 — a server without /version is recorded, not fatal
        env["errors"]["version"] = f"{type(e).__name__}: {e}"
    try:
        card = json.loads(_get(base + "/v1/models", headers))["data"][0]
        env["model"] = str(card["id"])
        mml = card.get("max_model_len")
        env["max_model_len"] = int(mml) if mml is not None else None
    except Exception as e:  # noqa: BLE001
        env["errors"]["models"] = f"{type(e).__name__}: {e}"
    if metrics:
        try:
            env["cache_config"] = parse_cache_config(_get(metrics, headers).decode("utf-8", errors="replace"))
            if env["cache_config"] is None:
                env["errors"]["cache_config"] = "no vllm:cache_config_info in " + metrics
        except Exception as e:  # noqa: BLE001
            env["errors"]["cache_config"] = f"{type(e).__name__}: {e}"
    return env


def block_size(server_env: dict | None) -> tuple[int, str]:
    """(block size, where it came from): the server's cache config, else the fallback."""
    cc = (server_env or {}).get("cache_config") or {}
    bs = cc.get("block_size")
    if isinstance(bs, int) and bs > 0:
        return bs, "server"
    return BLOCK_SIZE_FALLBACK, "fallback"


def fetch_block_size(metrics: str | None, headers: dict[str, str] | None = None) -> tuple[int, str]:
    """(block size, source) from the server's /metrics (``vllm:cache_config_info``), else the fallback."""
    if not metrics:
        return BLOCK_SIZE_FALLBACK, "fallback"
    try:
        cc = parse_cache_config(_get(metrics, headers or {}).decode("utf-8", errors="replace"))
    except Exception:  # noqa: BLE001 — the fallback is named in the summary
        cc = None
    return block_size({"cache_config": cc})


GPU_USED = ("gpu_memory_used_bytes", "DCGM_FI_DEV_FB_USED")
GPU_TOTAL = ("gpu_memory_total_bytes",)
GPU_FREE = ("DCGM_FI_DEV_FB_FREE",)
GPU_ENERGY = {"gpu_energy_joules": 1.0, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 1e-3}
"""Each GPU's energy counter (its name without the ``_total`` a counter's sample may carry) -> joules per unit:
server/gpu_exporter.py's ``gpu_energy_joules_total`` (J), DCGM's (mJ since boot)."""
MIB = 1024 * 1024


def parse_gpu_metrics(text: str) -> dict[str, dict]:
    """Per GPU (label ``gpu``): name, memory used and total in bytes, energy consumed in joules (a counter; None when
    the exporter has none), from server/gpu_exporter.py's metrics or NVIDIA DCGM exporter's
    (``DCGM_FI_DEV_FB_USED``/``_FREE`` in MiB, ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` in mJ, ``modelName``)."""
    gpus: dict[str, dict] = {}
    for fam in text_string_to_metric_families(text):
        for sample in fam.samples:
            labels = sample.labels
            gid = str(labels.get("gpu", labels.get("GPU_I_ID", "0")))
            g = gpus.setdefault(gid, {"name": None, "used": None, "total": None, "free": None, "energy_j": None})
            g["name"] = g["name"] or labels.get("name") or labels.get("modelName")
            dcgm = sample.name.startswith("DCGM_")
            value = sample.value * (MIB if dcgm else 1)
            if sample.name in GPU_USED:
                g["used"] = value
            elif sample.name in GPU_TOTAL:
                g["total"] = value
            elif sample.name in GPU_FREE:
                g["free"] = value
            elif (counter := sample.name.removesuffix("_total")) in GPU_ENERGY:
                g["energy_j"] = sample.value * GPU_ENERGY[counter]
    for g in gpus.values():
        if g["total"] is None and g["used"] is not None and g["free"] is not None:
            g["total"] = g["used"] + g["free"]
    return {k: g for k, g in gpus.items() if g["used"] is not None}


class GpuWatch:
    """``--gpu-metrics-url``: the GPUs' names and memory totals, and the peak memory used during the run (the
    article's "VRAM residency"), polled every ``interval_s``; ``record()`` is the summary's ``server_env.gpu``.
    Where every GPU has an energy counter, ``energy`` keeps (wall time, joules summed over the GPUs) per scrape:
    ``energy_between(a, b)`` is what the GPUs consumed between two wall-clock times."""

    def __init__(self, url: str, interval_s: float) -> None:
        self.url, self.interval_s = url, interval_s
        self.gpus: dict[str, dict] = {}
        self.energy: list[tuple[float, float]] = []
        self.scrapes = 0
        self.errors = 0
        self.last_error: str | None = None
        self._g: gevent.Greenlet | None = None

    def start(self) -> GpuWatch:
        self._g = gevent.spawn(self._run)
        return self

    def stop(self) -> None:
        g, self._g = self._g, None
        if g is not None:
            g.kill(block=False)

    def _run(self) -> None:
        while True:
            self.scrape_once()
            gevent.sleep(self.interval_s)

    def scrape_once(self) -> None:
        try:
            now = parse_gpu_metrics(_get(self.url, {}).decode("utf-8", errors="replace"))
        except Exception as e:  # noqa: BLE001 — counted and named in the record
            self.errors += 1
            self.last_error = f"{type(e).__name__}: {e}"
            return
        self.scrapes += 1
        if now and all(g["energy_j"] is not None for g in now.values()):
            self.energy.append((time.time(), sum(g["energy_j"] for g in now.values())))
        for gid, g in now.items():
            seen = self.gpus.setdefault(gid, {"gpu": gid, "name": g["name"], "memory_total_bytes": g["total"],
                                              "memory_used_start_bytes": g["used"], "memory_used_peak_bytes": 0.0})
            seen["memory_used_peak_bytes"] = max(seen["memory_used_peak_bytes"], g["used"])
            seen["memory_total_bytes"] = g["total"] if g["total"] is not None else seen["memory_total_bytes"]

    def energy_between(self, start_wall: float, end_wall: float) -> tuple[float | None, str]:
        """(joules the GPUs consumed from ``start_wall`` to ``end_wall``, how it was read), each end interpolated
        between the scrapes around it (one more scrape is taken when none is past the end yet); (None, why not)
        when the counters do not cover the span."""
        if not self.energy or self.energy[-1][0] < end_wall:
            self.scrape_once()
        samples = self.energy
        if not samples:
            return None, (f"{self.url} has no energy counter for every GPU (gpu_energy_joules_total, "
                          f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION)" if self.scrapes else
                          f"no reading from {self.url} ({self.last_error})")
        if samples[0][0] > start_wall or samples[-1][0] < end_wall:
            return None, "the GPU energy readings do not cover the probe (it began before the first or ended after " \
                         "the last)"

        def at(t: float) -> float:
            for (t0, e0), (t1, e1) in zip(samples, samples[1:], strict=False):
                if t0 <= t <= t1:
                    return e0 + (e1 - e0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.0)
            return samples[-1][1]

        joules = at(end_wall) - at(start_wall)
        if joules < 0:
            return None, "a GPU energy counter went backwards (the exporter or the driver restarted)"
        return joules, f"GPU energy counters at {self.url}, {len(samples)} scrapes"

    def record(self) -> dict:
        def whole(v: float | None) -> int | None:
            return None if v is None else int(v)

        gpus = [{**g, **{k: whole(g[k]) for k in ("memory_total_bytes", "memory_used_start_bytes",
                                                   "memory_used_peak_bytes")}}
                for _gid, g in sorted(self.gpus.items())]
        return {"url": self.url, "gpus": gpus, "scrapes": self.scrapes, "scrape_failures": self.errors,
                "last_error": self.last_error}


class RunRecorder:
    """Captures what only the live process knows (start workers, server answers) and fills both sections."""

    def __init__(self, environment) -> None:
        self.environment = environment
        self.server_env: dict | None = None
        self.hosts: list[str] = []
        self._g: gevent.Greenlet | None = None
        self.gpu: GpuWatch | None = None

    def register(self) -> RunRecorder:
        self.environment.events.test_start.add_listener(self._on_test_start)
        self.environment.events.test_stop.add_listener(self._on_test_stop)
        hooks = self.environment.llm.hooks
        hooks.add_section("run", self.run_section, empty=lambda _view: None)
        hooks.add_section("server_env", lambda _view, _summary: self.server_env_now(), empty=lambda _view: None)
        return self

    def _on_test_start(self, environment=None, **_kw) -> None:
        runner = self.environment.runner
        if isinstance(runner, MasterRunner):
            ids = [c.id for c in runner.clients.ready + runner.clients.running + runner.clients.spawning]
            self.hosts = sorted({str(i).rsplit("_", 1)[0] for i in ids})
        else:
            self.hosts = [socket.gethostname()]
        host = self.environment.host
        self.server_env = None
        options = self.environment.parsed_options
        self._on_test_stop()
        self.gpu = None
        gpu_url = getattr(options, "gpu_metrics_url", None)
        if gpu_url and str(gpu_url).lower() != "off":
            interval = float(getattr(options, "server_metrics_interval", None) or 2.0)
            self.gpu = GpuWatch(gpu_url, interval).start()
        if not host:
            return
        murl = metrics_url(getattr(options, "server_metrics_url", None), host)
        key = api_key_of(options)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._g = gevent.spawn(self._read, host, murl, headers)

    def _on_test_stop(self, environment=None, **_kw) -> None:
        if self.gpu is not None:
            self.gpu.stop()
            self.gpu.scrape_once()  # the last reading: a peak in the final seconds counts

    def _read(self, host: str, murl: str | None, headers: dict[str, str]) -> None:
        # urllib blocks this greenlet only (gevent-patched sockets under Locust)
        self.server_env = read_server_env(host, murl, headers)

    def energy_between(self, start_wall: float, end_wall: float) -> tuple[float | None, str]:
        """Joules the server's GPUs consumed between two wall-clock times (:meth:`GpuWatch.energy_between`); None
        with the reason when there is no reading (no ``--gpu-metrics-url``, no energy counter)."""
        if self.gpu is None:
            return None, "no GPU energy reading: --gpu-metrics-url is not set"
        return self.gpu.energy_between(start_wall, end_wall)

    def server_env_now(self) -> dict | None:
        if self._g is not None:
            self._g.join(timeout=10)
        if self.server_env is None:
            return None
        return {**self.server_env, "gpu": self.gpu.record() if self.gpu is not None else None}

    def run_section(self, view: RunView, summary: dict) -> dict:
        env = self.environment
        options = view.options
        seed = getattr(options, "seed", None)
        workers = view.worker_count
        tok = env.llm.tokenizer
        classes = [
            {"name": c.__name__, "weight": getattr(c, "weight", 1), "fixed_count": getattr(c, "fixed_count", 0)}
            for c in (env.user_classes or [])
        ]
        stopped = env.llm.stopped_by
        detectors = (view.detectors or {}).get("stopped_by") if isinstance(view.detectors, dict) else None
        if stopped is None and detectors:
            stopped = {"reason": "detector", **detectors}
        return {
            "tool": {"name": TOOL, "version": _version(TOOL) or _pyproject_version(), **_git_commit()},
            "python": platform.python_version(),
            "python_implementation": sys.implementation.name,
            "locust": _version("locust"),
            "started_utc": utc(view.t0_wall),
            "ended_utc": utc(view.t0_wall + view.duration_s),
            "duration_s": view.duration_s,
            "hosts": self.hosts,
            "workers": workers,
            "user_classes": classes,
            "shape": getattr(options, "shape", None),
            "stages": [st.name for st, _a, _b in view.stage_spans()],
            "seed": seed,
            "worker_seeds": [seed + i for i in range(workers)] if isinstance(seed, int) else [],
            "prompt_salt": getattr(options, RESOLVED_SALT, None),
            "tokenizer": tok.record() if tok is not None else None,  # users/plugin.py: workload.tokenizers.Chosen
            "dataset": env.llm.dataset,  # users/plugin.py: --dataset's record and selection
            "prompt_source": prompt_source(options),
            "sampling": sampling_fields(options),
            "stopped_by": stopped,
            "options": effective_options(options),
        }


def _pyproject_version() -> str | None:
    m = re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE) if (
        ROOT / "pyproject.toml").exists() else None
    return m.group(1) if m else None
