"""The Locust image (Dockerfile + .dockerignore), checked without a Docker engine: the build context keeps
every runtime file, the runtime install leaves out only tools the runtime never imports, and the image
exposes the ports the compose file uses."""

from __future__ import annotations

import ast
import fnmatch
import re
import subprocess

from tests.deploy.compose import command, option, rendered
from tests.support import ROOT

RUNTIME_PACKAGES = ("run", "users", "workload", "shapes", "telemetry", "tokenizer_checks", "server", "webui")
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _ignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [ln.strip().lstrip("/") for ln in lines if ln.strip() and not ln.strip().startswith("#")]


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule for these simple patterns: a match on the path or on one of its parent folders."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pat in patterns:
        if pat.startswith("**/"):
            if any(fnmatch.fnmatch(c.split("/")[-1], pat[3:]) for c in candidates):
                return True
        elif any(fnmatch.fnmatch(c, pat) for c in candidates):
            return True
    return False


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [f for f in out.splitlines() if (ROOT / f).exists()]


def test_build_context_keeps_the_runtime_and_drops_the_rest():
    patterns = _ignore_patterns()
    files = _tracked()
    runtime = [f for f in files if f.split("/")[0] in RUNTIME_PACKAGES or f in ("locustfile.py", "requirements.txt")]
    assert any(f.startswith("server/sim/") for f in runtime) and "locustfile.py" in runtime
    dropped = [f for f in runtime if _ignored(f, patterns)]
    assert not dropped, f".dockerignore drops runtime files: {dropped[:10]}"
    for f in (".git/HEAD", ".venv/bin/python", "tests/support.py", "results/report.html"):
        assert _ignored(f, patterns), f


def _imports(path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_runtime_install_leaves_out_only_unused_tools():
    m = re.search(r"grep -vE '\^\(([^)]*)\)==' requirements.txt", DOCKERFILE)
    assert m, "the Dockerfile filters requirements.txt with grep -vE '^(a|b)=='"
    left_out = set(m.group(1).split("|"))
    pinned = {ln.split("==")[0] for ln in (ROOT / "requirements.txt").read_text().splitlines() if "==" in ln}
    assert left_out <= pinned and left_out, left_out
    sources = [ROOT / "locustfile.py"] + [p for pkg in RUNTIME_PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    for src in sources:
        used = _imports(src) & left_out
        assert not used, f"{src.relative_to(ROOT)} imports {used}, which the image does not install"


def test_image_is_pinned_and_exposes_the_compose_ports():
    assert re.search(r"^FROM python:3\.11-slim\b", DOCKERFILE, re.M)
    exposed = {int(p) for line in re.findall(r"^EXPOSE (.+)$", DOCKERFILE, re.M) for p in line.split()}
    cfg = rendered("gpu")
    master = command(cfg, "locust-master")
    used = {
        int(option(master, "--web-port")),
        int(option(master, "--master-bind-port")),
        int(option(master, "--prometheus-port")),
        int(option(command(cfg, "sim"), "--port")),
        int(option(command(cfg, "gpu-exporter"), "--port")),
    }
    assert used <= exposed, used - exposed
    for name in ("sim", "gpu-exporter", "locust-master", "locust-worker"):
        assert cfg["services"][name]["image"] == "deepseek-locust:0.1.0", name
        assert cfg["services"][name]["build"]["context"] == str(ROOT), name
