"""docker-compose.yml: both profiles validate with Debian's docker-compose 1.29, and they hang together
(ports, network alias, GPU reservation, the reference vLLM flags, pinned images)."""

from __future__ import annotations

import pytest
import yaml

from tests.deploy.compose import COMPOSE_FILE, PROFILES, active_services, command, config, option, rendered

pytestmark = pytest.mark.slow  # every test here starts a real process

COMMON = {"prometheus", "grafana", "locust-master", "locust-worker"}


@pytest.mark.parametrize("profile", PROFILES)
def test_profile_validates(profile):
    proc = config(profile)
    assert proc.returncode == 0, proc.stderr
    assert "services:" in proc.stdout


def test_a_broken_file_is_rejected(tmp_path):
    """The validation above means something: compose 1.29 rejects an unknown key in this file."""
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE_FILE.read_text().replace("    ipc: host", "    ipc_mode: host", 1))
    proc = config("gpu", broken)
    assert proc.returncode != 0 and "ipc_mode" in proc.stderr


def test_profiles_pick_the_server():
    assert active_services(rendered("sim"), "sim") == COMMON | {"sim"}
    assert active_services(rendered("gpu"), "gpu") == COMMON | {"vllm", "gpu-exporter"}
    assert active_services(rendered("gpu-mtp"), "gpu-mtp") == COMMON | {"vllm-mtp", "gpu-exporter"}


@pytest.mark.parametrize("profile", PROFILES)
def test_dependencies_stay_inside_the_profile(profile):
    cfg = rendered(profile)
    active = active_services(cfg, profile)
    for name in active:
        for dep in cfg["services"][name].get("depends_on") or {}:
            assert dep in active, f"{name} depends on {dep}, which --profile {profile} does not start"


def test_both_servers_answer_as_llm_server_on_port_8000():
    cfg = rendered("sim")
    for name in ("sim", "vllm"):
        svc = cfg["services"][name]
        assert "llm-server" in svc["networks"]["default"]["aliases"], name
        assert option(command(cfg, name), "--port") == "8000"
        assert option(command(cfg, name), "--host") == "0.0.0.0"
    assert option(command(cfg, "locust-master"), "--host") == "http://llm-server:8000"


def test_vllm_runs_the_seeds_configuration_on_reserved_gpus():
    cfg = rendered("gpu")
    vllm = cfg["services"]["vllm"]
    argv = command(cfg, "vllm")
    assert vllm["image"].startswith("vllm/vllm-openai:v")
    assert option(argv, "--model") == "deepseek-ai/DeepSeek-V2-Lite"
    assert option(argv, "--tensor-parallel-size") == "2"
    assert option(argv, "--max-num-seqs") == "256"
    assert option(argv, "--gpu-memory-utilization") == "0.9"
    assert "--enable-chunked-prefill" in argv and "--trust-remote-code" in argv
    assert any(str(v).startswith("hf-cache:/root/.cache/huggingface") for v in vllm["volumes"])
    devices = vllm["deploy"]["resources"]["reservations"]["devices"]
    assert devices and devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    gpu = cfg["services"]["gpu-exporter"]["deploy"]["resources"]["reservations"]["devices"]
    assert gpu and "gpu" in gpu[0]["capabilities"]


def test_the_mtp_profile_serves_speculation_and_the_in_band_record():
    cfg = rendered("gpu-mtp")
    argv = command(cfg, "vllm-mtp")
    assert option(argv, "--speculative-config") == '{"method":"mtp","num_speculative_tokens":1}'
    assert "--enable-per-request-metrics" in argv and option(argv, "--per-request-spec-decode-metrics") == "summary"
    assert option(argv, "--model").startswith("deepseek-ai/DeepSeek-") and option(argv, "--port") == "8000"
    assert "llm-server" in cfg["services"]["vllm-mtp"]["networks"]["default"]["aliases"]
    assert cfg["services"]["vllm-mtp"]["image"] == cfg["services"]["vllm"]["image"]


def test_locust_master_and_workers_agree():
    cfg = rendered("sim")
    master, worker = command(cfg, "locust-master"), command(cfg, "locust-worker")
    assert "--master" in master and "--worker" in worker
    assert option(worker, "--master-host") == "locust-master"
    assert option(worker, "--master-port") == option(master, "--master-bind-port")
    assert option(master, "--web-port") == "8089" and option(master, "--web-host") == "0.0.0.0"
    assert option(master, "--prometheus-port") == "9646" and option(master, "--prometheus-host") == "0.0.0.0"
    published = {p["target"] for p in cfg["services"]["locust-master"]["ports"]}
    assert {8089, 9646, int(option(master, "--master-bind-port"))} <= published
    # a worker must not fix its name or ports, or `--scale locust-worker=N` fails
    raw = yaml.safe_load(COMPOSE_FILE.read_text())["services"]["locust-worker"]
    assert "container_name" not in raw and "ports" not in raw


def test_images_are_pinned():
    cfg = rendered("gpu")
    for name, svc in cfg["services"].items():
        image = svc["image"]
        tag = image.rsplit(":", 1)[1] if ":" in image.split("/")[-1] else ""
        assert tag and tag != "latest", f"{name}: pin the image tag ({image})"


def test_grafana_and_prometheus_mount_the_deploy_files():
    cfg = rendered("sim")
    prom = " ".join(str(v) for v in cfg["services"]["prometheus"]["volumes"])
    assert "deploy/prometheus.yml:/etc/prometheus/prometheus.yml" in prom
    assert option(command(cfg, "prometheus"), "--config.file") == "/etc/prometheus/prometheus.yml"
    graf = " ".join(str(v) for v in cfg["services"]["grafana"]["volumes"])
    assert "deploy/grafana/provisioning:/etc/grafana/provisioning" in graf
    assert "deploy/grafana/dashboards:/etc/grafana/dashboards" in graf
