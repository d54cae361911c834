"""deploy/prometheus.yml and the Grafana provisioning + dashboard: valid, consistent with the compose file,
and every query names real metrics and parses in a real Prometheus (Debian's, on 127.0.0.1)."""

from __future__ import annotations

import runpy
import subprocess

import pytest
import yaml

from tests.deploy.compose import command, option, rendered
from tests.deploy.promql import (
    DASHBOARD,
    KNOWN,
    concrete,
    dashboard,
    dashboard_queries,
    names_in,
    query,
)
from tests.requires import require_tool
from tests.support import ROOT, Proc, free_port, wait_http

PROM_FILE = ROOT / "deploy" / "prometheus.yml"
PROVISIONING = ROOT / "deploy" / "grafana" / "provisioning"


def _tool(name: str) -> str:
    return require_tool(name, "prometheus")


def _targets() -> dict[str, list[str]]:
    cfg = yaml.safe_load(PROM_FILE.read_text())
    jobs = cfg["scrape_configs"]
    return {job["job_name"]: [t for sc in job.get("static_configs", []) for t in sc["targets"]]
            + [f"{n}:{sd['port']}" for sd in job.get("dns_sd_configs", []) for n in sd["names"]] for job in jobs}


# ---- Prometheus ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_promtool_accepts_the_config():
    proc = subprocess.run([_tool("promtool"), "check", "config", str(PROM_FILE)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_promtool_rejects_a_broken_config(tmp_path):
    bad = tmp_path / "prometheus.yml"
    bad.write_text(PROM_FILE.read_text().replace("scrape_interval: 5s", "scrape_interval: soon", 1))
    proc = subprocess.run([_tool("promtool"), "check", "config", str(bad)], capture_output=True, text=True)
    assert proc.returncode != 0


def test_every_server_replica_is_discovered_not_one_address():
    (job,) = [j for j in yaml.safe_load(PROM_FILE.read_text())["scrape_configs"] if j["job_name"] == "llm-server"]
    assert "static_configs" not in job  # one static address would be one replica, whichever answered
    assert job["dns_sd_configs"] == [{"names": ["llm-server"], "type": "A", "port": 8000, "refresh_interval": "10s"}]


@pytest.mark.slow
def test_scrape_targets_match_the_compose_services():
    cfg = rendered("gpu")
    master_port = option(command(cfg, "locust-master"), "--prometheus-port")
    gpu_port = option(command(cfg, "gpu-exporter"), "--port")
    assert _targets() == {
        "llm-server": ["llm-server:8000"],
        "locust": [f"locust-master:{master_port}"],
        "gpu": [f"gpu-exporter:{gpu_port}"],
    }


# ---- Grafana ------------------------------------------------------------------------------------------
def test_dashboard_json_is_the_generators_output():
    gen = runpy.run_path(str(ROOT / "deploy" / "grafana" / "dashboard.py"))
    assert DASHBOARD.read_text() == gen["render"](), "stale: run python deploy/grafana/dashboard.py"


@pytest.mark.slow
def test_datasource_points_at_the_compose_prometheus():
    ds = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())["datasources"]
    (prom,) = [d for d in ds if d["type"] == "prometheus"]
    listen = option(command(rendered("sim"), "prometheus"), "--web.listen-address")
    assert prom["url"] == f"http://prometheus:{listen.rsplit(':', 1)[1]}"
    assert prom["isDefault"] is True  # the dashboard's datasource variable falls back to the default Prometheus


def _datasource_refs(node) -> list:
    """Every ``datasource`` value anywhere in the dashboard JSON."""
    if isinstance(node, dict):
        return [*([node["datasource"]] if "datasource" in node else []), *(r for v in node.values()
                                                                             for r in _datasource_refs(v))]
    if isinstance(node, list):
        return [r for v in node for r in _datasource_refs(v)]
    return []


def test_dashboard_imports_anywhere():
    """No hard-coded datasource uid: every panel, query, variable and annotation reads ``${datasource}``, a
    datasource variable of type prometheus whose default is the import dialog's ``DS_PROMETHEUS`` input."""
    d = dashboard()
    refs = _datasource_refs(d)
    assert len(refs) > 2 * len(d["panels"]) and all(r == {"type": "prometheus", "uid": "${datasource}"} for r in refs)
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    (inp,) = d["__inputs"]
    assert inp["type"] == "datasource" and inp["pluginId"] == "prometheus"
    assert variables["datasource"]["current"]["value"] == f"${{{inp['name']}}}"
    assert '"uid": "prometheus"' not in DASHBOARD.read_text()
    # the label variables, each offering the values of a label our series carry, All matching a missing label too
    for name, label in (("model", "model_name"), ("stage", "stage"), ("user_class", "user_class"),
                        ("version", "version")):
        v = variables[name]
        assert v["includeAll"] and v["allValue"] == ".*" and v["definition"].endswith(f", {label})"), v
        assert any(f'=~"${name}"' in e for _, e in dashboard_queries()), f"no query filters by ${name}"
    # P95 beside p50 and p99 in every latency panel
    for p in d["panels"]:
        exprs = " ".join(t["expr"] for t in p["targets"])
        if "histogram_quantile(0.99" in exprs and "llm_latency_quantile_seconds" in exprs:
            assert "histogram_quantile(0.5," in exprs and "histogram_quantile(0.95," in exprs, p["title"]


@pytest.mark.slow
def test_dashboard_provider_reads_the_mounted_folder():
    providers = yaml.safe_load((PROVISIONING / "dashboards" / "deepseek-locust.yml").read_text())["providers"]
    mounts = [str(v) for v in rendered("sim")["services"]["grafana"]["volumes"]]
    for p in providers:
        assert any(m.split(":")[1] == p["options"]["path"] for m in mounts), (p, mounts)
    home = rendered("sim")["services"]["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{providers[0]['options']['path']}/{DASHBOARD.name}"


def test_every_query_names_known_metrics():
    for where, expr in dashboard_queries():
        names = names_in(expr)
        assert names, f"{where}: no metric in {expr!r}"
        assert names <= KNOWN, f"{where}: unknown metric(s) {names - KNOWN} (tests/deploy/promql.py lists the names)"


def test_the_dashboard_covers_what_the_issue_asks_for():
    used = set().union(*(names_in(e) for _, e in dashboard_queries()))
    for needed in (
        "llm_time_to_first_token_seconds", "llm_inter_token_latency_seconds", "llm_time_per_output_token_seconds",
        "llm_latency_quantile_seconds", "llm_output_tokens_total", "llm_requests_total",
        "llm_server_kv_cache_usage_ratio", "vllm:kv_cache_usage_perc", "llm_client_kv_block_fill_ratio",
        "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:num_preemptions_total",
        "gpu_memory_used_bytes", "llm_stage_info",
    ):
        assert needed in used, needed
    kv = [p for p in dashboard()["panels"] if "llm_client_kv_block_fill_ratio" in str(p["targets"])]
    assert kv and "vllm:kv_cache_usage_perc" in str(kv[0]["targets"]), "client KV fill sits next to server KV usage"


def test_panels_do_not_overlap():
    taken: set[tuple[int, int]] = set()
    for p in dashboard()["panels"]:
        g = p["gridPos"]
        cells = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert g["x"] + g["w"] <= 24 and not cells & taken, p["title"]
        taken |= cells


@pytest.mark.slow
def test_every_query_parses_in_prometheus(tmp_path):
    """Evaluate every dashboard query in a real Prometheus (no targets needed for syntax and types)."""
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 5s\nscrape_configs: []\n")
    argv = [_tool("prometheus"), f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}"]
    with Proc(argv, name="prometheus") as prom:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/-/ready", timeout=30, proc=prom)
        bad = {}
        for where, expr in dashboard_queries():
            body = query(base, concrete(expr))
            if body.get("status") != "success":
                bad[where] = body.get("error")
        assert query(base, "sum(rate(x[")["status"] == "error"  # the check can fail
    assert not bad, bad


def test_panel_ids_and_ref_ids_are_unique():
    panels = dashboard()["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for p in panels:
        refs = [t["refId"] for t in p["targets"]]
        assert len(set(refs)) == len(refs) and all(t["legendFormat"] for t in p["targets"]), p["title"]
