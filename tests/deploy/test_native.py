"""Each service's command from docker-compose.yml, run natively on 127.0.0.1 with free ports: the simulator,
the Locust master (web UI + exporter) and one worker, the GPU exporter, and Prometheus with deploy/prometheus.yml
pointed at the native ports. They must work together: Prometheus sees the master's `llm_*` metrics and the
simulator's `vllm:*` metrics with `up == 1`, and the dashboard's key queries return data. Without a GPU the
exporter must exit non-zero with one clear line (and its target is down).
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

import pytest
import yaml

from tests.deploy.compose import command, rendered
from tests.deploy.promql import CLIENT_METRICS, concrete, dashboard_queries, names_in, query
from tests.requires import require_tool
from tests.support import LOCUST, PY, ROOT, Proc, free_port, wait_http

pytestmark = pytest.mark.slow

# compose host names -> 127.0.0.1 (the network alias and service names have no meaning outside Compose)
SERVICE_HOSTS = ("llm-server", "locust-master", "gpu-exporter", "prometheus", "sim", "vllm")
# Metrics the simulator serves that the dashboard uses (legacy names need --legacy-metrics; GPU needs a GPU).
SIM_METRICS = {
    "vllm:kv_cache_usage_perc", "vllm:num_requests_running", "vllm:num_requests_waiting",
    "vllm:num_preemptions_total", "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds", "vllm:request_time_per_output_token_seconds", "vllm:generation_tokens_total",
}


# The live SLO gauges exist only with an SLO set (the compose file sets none; tests/deploy/test_live_detectors.py does).
SLO_GAUGES = {"llm_slo_breached", "llm_slo_value", "llm_slo_threshold"}

ENTRYPOINTS = {"prometheus": "prometheus"}


@dataclass
class Ports:
    sim: int = field(default_factory=free_port)
    web: int = field(default_factory=free_port)
    master: int = field(default_factory=free_port)
    exporter: int = field(default_factory=free_port)
    gpu: int = field(default_factory=free_port)
    prometheus: int = field(default_factory=free_port)


def native(argv: list[str], service: str, ports: Ports, tmp) -> list[str]:
    """The compose command with executables, hosts and ports made local. Every flag is either kept as is or
    rewritten here; a new host name in the compose file fails the check at the end."""
    exe = {"python": PY, "locust": LOCUST, "prometheus": require_tool("prometheus", "prometheus")}
    if argv[0].startswith("-"):  # arguments to the image's entrypoint (prom/prometheus runs /bin/prometheus)
        argv = [ENTRYPOINTS[service], *argv]
    own_port = {"sim": ports.sim, "gpu-exporter": ports.gpu}.get(service)
    flags = {
        "--port": str(own_port),
        "--host": "127.0.0.1" if service != "locust-master" else f"http://127.0.0.1:{ports.sim}",
        "--web-host": "127.0.0.1",
        "--web-port": str(ports.web),
        "--master-bind-host": "127.0.0.1",
        "--master-bind-port": str(ports.master),
        "--master-host": "127.0.0.1",
        "--master-port": str(ports.master),
        "--prometheus-host": "127.0.0.1",
        "--prometheus-port": str(ports.exporter),
        "--config.file": str(tmp / "prometheus.yml"),
        "--storage.tsdb.path": str(tmp / "tsdb"),
        "--web.listen-address": f"127.0.0.1:{ports.prometheus}",
        "--llm-summary-json": str(tmp / "results" / "summary.json"),
        "--llm-report": str(tmp / "results" / "report.html"),
    }
    out = [exe.get(argv[0], argv[0])]
    i = 1
    while i < len(argv):
        arg = argv[i]
        if "=" in arg and arg.split("=", 1)[0] in flags:
            out.append(f"{arg.split('=', 1)[0]}={flags[arg.split('=', 1)[0]]}")
        elif arg in flags and i + 1 < len(argv):
            out += [arg, flags[arg]]
            i += 1
        else:
            out.append(arg)
        i += 1
    leftover = [a for a in out if _host(a) in (*SERVICE_HOSTS, "0.0.0.0")]
    assert not leftover, f"{service}: compose-only host names left in {out}"
    return out


def _host(arg: str) -> str:
    """The host part when ``arg`` reads as host[:port][/path] or scheme://host..., else the whole arg."""
    rest = arg.split("=", 1)[-1].split("://", 1)[-1]
    return rest.split("/", 1)[0].rsplit(":", 1)[0] if rest else rest


def prometheus_config(ports: Ports) -> str:
    """deploy/prometheus.yml with each compose target replaced by its native address."""
    cfg = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    local = {"llm-server:8000": ports.sim, "locust-master:9646": ports.exporter, "gpu-exporter:9400": ports.gpu}
    for job in cfg["scrape_configs"]:
        # a DNS-discovered job (every replica of a compose service) is its one native address here
        for sd in job.pop("dns_sd_configs", []):
            job.setdefault("static_configs", []).append({"targets": [f"{n}:{sd['port']}" for n in sd["names"]]})
        for sc in job["static_configs"]:
            assert all(t in local for t in sc["targets"]), f"unknown target in {sc}"
            sc["targets"] = [f"127.0.0.1:{local[t]}" for t in sc["targets"]]
    # rule files are relative to the config's directory: keep them pointing into deploy/
    cfg["rule_files"] = [str(ROOT / "deploy" / pattern) for pattern in cfg["rule_files"]]
    return yaml.safe_dump(cfg)


def _poll(fn, timeout: float, what: str, procs: list[Proc]):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.5)
    logs = "\n".join(f"--- {p.name} ---\n{p.output()[-2500:]}" for p in procs)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last})\n{logs}")


def _result(base: str, expr: str) -> list:
    body = query(base, expr)
    assert body.get("status") == "success", (expr, body)
    return body["data"]["result"]


def test_compose_commands_work_together_natively(tmp_path):
    sim_cfg, gpu_cfg = rendered("sim"), rendered("gpu")
    ports = Ports()
    (tmp_path / "prometheus.yml").write_text(prometheus_config(ports))
    compose_env = sim_cfg["services"]["locust-master"].get("environment") or {}
    env = {k: str(v) for k, v in compose_env.items() if v is not None}  # None: taken from the shell, if set
    load = {"LOCUST_INPUT_LEN": "fixed:128", "LOCUST_OUTPUT_LEN": "fixed:32"}  # small requests on a 2-core box

    sim_argv = native(command(sim_cfg, "sim"), "sim", ports, tmp_path)
    with Proc(sim_argv, name="sim", env=env) as sim:
        wait_http(f"http://127.0.0.1:{ports.sim}/health", timeout=60, proc=sim)

        gpu = Proc(native(command(gpu_cfg, "gpu-exporter"), "gpu-exporter", ports, tmp_path), name="gpu-exporter")
        master = Proc(native(command(sim_cfg, "locust-master"), "locust-master", ports, tmp_path),
                      name="locust-master", env={**env, **load})
        worker = Proc(native(command(sim_cfg, "locust-worker"), "locust-worker", ports, tmp_path),
                      name="locust-worker", env={**env, **load})
        prom = Proc(native(command(sim_cfg, "prometheus"), "prometheus", ports, tmp_path), name="prometheus")
        procs = [sim, gpu, master, worker, prom]
        with gpu, master, worker, prom:
            web = f"http://127.0.0.1:{ports.web}"
            wait_http(web + "/", timeout=90, proc=master)
            _poll(lambda: json.load(urllib.request.urlopen(web + "/stats/requests"))["worker_count"] >= 1,
                  90, "the worker to connect to the master", procs)
            form = urllib.parse.urlencode({"user_count": 2, "spawn_rate": 2}).encode()
            answer = json.load(urllib.request.urlopen(web + "/swarm", data=form, timeout=10))
            assert answer["success"], answer

            # The GPU exporter: no GPU here -> exits non-zero with one clear line.
            gpu_has_device = _gpu_serving(gpu, ports.gpu)
            print(f"\nGPU exporter branch: {'a GPU, serving metrics' if gpu_has_device else 'no GPU, one-line exit'}")
            if not gpu_has_device:
                code = gpu.wait(timeout=30)
                out = gpu.output().strip()
                assert code != 0, out
                assert len(out.splitlines()) == 1 and "GPU" in out and "Traceback" not in out, out

            base = f"http://127.0.0.1:{ports.prometheus}"
            wait_http(base + "/-/ready", timeout=60, proc=prom)

            def up() -> dict[str, float]:
                return {r["metric"]["job"]: float(r["value"][1]) for r in _result(base, "up")}

            state = _poll(lambda: (u := up()).get("llm-server") == 1 and u.get("locust") == 1 and "gpu" in u and u,
                          60, "up == 1 for the simulator and the Locust master (and a GPU target)", procs)
            assert state.get("gpu") == (1.0 if gpu_has_device else 0.0), state

            # Requests flowed through the worker to the master's exporter, and the server's own metrics arrived.
            _poll(lambda: _result(base, 'sum(llm_requests_total{outcome="ok"}) > 0'), 90,
                  "completed requests in llm_requests_total", procs)
            _poll(lambda: _result(base, 'sum(vllm:generation_tokens_total{job="llm-server"}) > 0'), 30,
                  "generated tokens in the simulator's vllm:generation_tokens_total", procs)
            # every dashboard metric has series and the key panels have data (rate() over the dashboard's windows
            # needs two scrapes after the first request): polled for, not waited out
            names = set().union(*(names_in(e) for _, e in dashboard_queries()))
            expected = names & (CLIENT_METRICS | SIM_METRICS) - SLO_GAUGES
            gaps: list[str] = []

            def complete() -> bool:
                gaps[:] = [f"no series for {n}" for n in sorted(expected)
                           if not _result(base, f'{{__name__=~"{_series(n)}"}}')]
                gaps.extend(f"{title}: no data for {expr}" for title, expr in _key_queries()
                            if not _result(base, concrete(expr, "1m")))
                return not gaps

            try:
                _poll(complete, 45, "series for every dashboard metric and data in the key panels", procs)
            except AssertionError as e:
                raise AssertionError(f"still missing: {gaps}\n{e}") from None
            _check_rules(base, procs)
            urllib.request.urlopen(urllib.request.Request(web + "/stop", method="POST"), timeout=10).read()
            master.stop(timeout=30)  # SIGTERM, as `docker-compose stop` sends: the master writes its files
            worker.wait(timeout=30)  # and tells the worker to quit
        summary = json.loads((tmp_path / "results" / "summary.json").read_text())
        assert summary["schema"] == 2 and summary["requests"]["ok"] > 0, summary["requests"]
        assert "<html" in (tmp_path / "results" / "report.html").read_text()[:2000].lower()
        for p in (master, worker):
            assert "Traceback" not in p.output(), f"{p.name}:\n{p.output()[-3000:]}"


EVALUATION_S = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())["global"]["evaluation_interval"]
EVALUATION_S = float(EVALUATION_S.removesuffix("s"))


def _check_rules(base: str, procs: list[Proc]) -> None:
    """deploy/prometheus/rules loaded and evaluating without errors; the TTFT percentiles recorded from both sides;
    no alert even pending during a healthy run on the simulator."""
    files = sorted((ROOT / "deploy" / "prometheus" / "rules").glob("*.yml"))
    expected = sum(len(g["rules"]) for f in files for g in yaml.safe_load(f.read_text())["groups"])

    def healthy() -> list[dict]:
        with urllib.request.urlopen(base + "/api/v1/rules", timeout=10) as r:
            rules = [r for g in json.load(r)["data"]["groups"] for r in g["rules"]]
        evaluated = all(r["health"] == "ok" for r in rules)
        return rules if len(rules) == expected and evaluated else []

    rules = _poll(healthy, 30, f"{expected} rules loaded and evaluated with health ok", procs)
    assert not [r for r in rules if r.get("lastError")], rules
    for name in ("llm:ttft_seconds:p50", "llm:itl_seconds:p95", "server:ttft_seconds:p50", "server:tpot_seconds:p99"):
        _poll(lambda name=name: _result(base, f"{name} > 0"), 30, f"a recorded {name}", procs)
    # the stopped-reporting alert reads increase(llm_requests_total[5m]): once that has two samples, and the rules
    # have been evaluated after it (every 5 s), no alert may be even pending
    _poll(lambda: _result(base, "sum(increase(llm_requests_total[5m])) > 0"), 30, "two samples of requests", procs)
    evaluated = time.monotonic() + 2 * EVALUATION_S
    alerts = _result(base, "ALERTS")
    while alerts and time.monotonic() < evaluated:
        time.sleep(0.5)
        alerts = _result(base, "ALERTS")
    assert alerts == [], f"an alert is pending during a healthy run: {alerts}"


def _gpu_serving(gpu: Proc, port: int, timeout: float = 30.0) -> bool:
    """Whether the GPU exporter serves GPU metrics: polled until it answers, or exits (no GPU: one line, exit 1)."""
    deadline = time.monotonic() + timeout
    while gpu.alive() and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as r:
                return b"gpu_memory_used_bytes" in r.read()
        except OSError:
            time.sleep(0.2)
    return False


def _series(name: str) -> str:
    """Regex for a family's series (histograms expose _bucket/_sum/_count)."""
    return f"{name}(_bucket|_sum|_count)?"


def _key_queries() -> list[tuple[str, str]]:
    """Dashboard queries that must return data during a run on the simulator."""
    wanted = ("Time to first token", "Inter-token latency", "Time per output token", "Tokens per second",
              "Requests by outcome", "KV cache: server usage vs client block fill",
              "Scheduler: running and waiting")
    out = []
    for where, expr in dashboard_queries():
        if any(where.startswith(f"panel {w!r} A") for w in wanted):
            out.append((where, expr))
    assert len(out) == len(wanted)
    return out
