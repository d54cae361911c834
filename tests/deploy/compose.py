"""Reading docker-compose.yml the way Compose does: rendered by `docker-compose config`, then per profile.

    cfg = rendered("sim")                 # dict of the interpolated file (needs Debian's docker-compose)
    active_services(cfg, "sim")           # {"sim", "prometheus", "grafana", "locust-master", "locust-worker"}
"""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

import yaml

from tests.requires import require_tool
from tests.support import ROOT

COMPOSE_FILE = ROOT / "docker-compose.yml"
PROFILES = ("sim", "gpu", "gpu-mtp")


def docker_compose() -> str:
    return require_tool("docker-compose", "docker-compose")


def config(profile: str, file: Path = COMPOSE_FILE) -> subprocess.CompletedProcess:
    """`docker-compose -f docker-compose.yml --profile P config` (validates; no Docker engine needed)."""
    return subprocess.run(
        [docker_compose(), "-f", str(file), "--profile", profile, "config"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},  # no LLM_HOST/VLLM_* from the caller: the file's defaults
    )


@cache
def rendered(profile: str) -> dict:
    proc = config(profile)
    assert proc.returncode == 0, f"docker-compose --profile {profile} config failed:\n{proc.stderr}"
    return yaml.safe_load(proc.stdout)


def active_services(cfg: dict, profile: str) -> set[str]:
    """Services Compose starts for ``--profile profile``: those without profiles, and those listing it."""
    return {name for name, svc in cfg["services"].items() if not svc.get("profiles") or profile in svc["profiles"]}


def command(cfg: dict, service: str) -> list[str]:
    cmd = cfg["services"][service]["command"]
    assert isinstance(cmd, list), f"{service}: keep `command` a list so it runs the same without a shell"
    return [str(c) for c in cmd]


def option(argv: list[str], flag: str) -> str | None:
    """Value of ``--flag V`` or ``--flag=V`` in an argv."""
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None
