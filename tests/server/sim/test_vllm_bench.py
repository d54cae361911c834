"""vLLM's own benchmark client (``vllm bench serve``, from .venv-vllm) runs against the simulator without errors: the
completions backend here; the chat backend's run is shared with the vLLM-bench JSON field check
(tests/telemetry/test_run_outputs.py), one ``vllm bench serve`` start less."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.requires import VLLM as VLLM_SWITCH
from tests.requires import require
from tests.server.sim.helpers import running_sim
from tests.vllm.engine import MODEL_DIR as TOKENIZER
from tests.vllm.engine import VLLM, missing_reason

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def test_vllm_bench_serve_completes_every_request(tmp_path):
    backend, endpoint = "openai", "/v1/completions"
    require(missing_reason(), VLLM_SWITCH)
    n, out_len = 24, 16
    with running_sim("--time-scale", "10", profile="deepseek-v2-lite-a100") as sim:
        cmd = [str(VLLM), "bench", "serve", "--backend", backend, "--endpoint", endpoint,
               "--base-url", f"http://127.0.0.1:{sim.port}", "--model", "deepseek-ai/DeepSeek-V2-Lite",
               "--tokenizer", str(TOKENIZER), "--dataset-name", "random", "--random-input-len", "64",
               "--random-output-len", str(out_len), "--num-prompts", str(n), "--max-concurrency", "8",
               "--ignore-eos", "--disable-tqdm", "--save-result", "--result-dir", str(tmp_path),
               "--result-filename", "bench.json"]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache")}
        r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads((tmp_path / "bench.json").read_text())
    assert res["completed"] == n and res["failed"] == 0, res.get("errors")
    assert res["total_output_tokens"] == n * out_len
    assert res["mean_ttft_ms"] > 0 and res["mean_itl_ms"] > 0
