"""Repeat runs against one prefix-caching server: by default each run's prompt texts take a fresh salt, so a second
run finds none of the first one's prompts in the cache (same TTFT, hit rate ~0); with one salt given twice the
second run is served from the cache, and the console and the summary say so."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from telemetry.outputs.prefix_cache import PREFIX_CACHE_EXCESS, section, workload_share
from tests.support import LOCUST, PY, Proc, free_port, wait_http
from users.options import PROMPT_SALT_DEFAULT, RESOLVED_SALT, prompt_salt, resolve_prompt_salt
from users.settings import RunSettings

SIM_TIME_SCALE = 0.25
"""The simulator runs 4x slower than its model: a 2048-token prefill takes ~0.4 s, well above the client's own noise
on a busy box."""
LOAD = ["-u", "1", "-r", "1", "-t", "90s", "--num-requests", "10", "--input-len", "fixed:2048", "--output-len",
        "fixed:4", "--prometheus-port", "0", "StreamingCompletionUser"]


def _run(host: str, tmp, name: str, *extra: str) -> tuple[dict, str]:
    path = tmp / f"{name}.json"
    with Proc([LOCUST, "-f", "locustfile.py", "--headless", "--host", host, "--llm-summary-json", str(path), *extra,
               *LOAD], name=name) as p:
        rc = p.wait(120)
        out = p.output()
    assert rc == 0, out[-3000:]
    return json.loads(path.read_text()), out


@pytest.mark.slow
def test_back_to_back_runs_do_not_hit_each_others_prefix_cache_unless_asked(tmp_path):
    port = free_port()
    with Proc([PY, "-m", "server.sim", "--host", "127.0.0.1", "--port", str(port), "--time-scale",
               str(SIM_TIME_SCALE)], name="sim") as sim:
        host = f"http://127.0.0.1:{port}"
        wait_http(f"{host}/health", proc=sim)
        first, _ = _run(host, tmp_path, "first")
        second, out2 = _run(host, tmp_path, "second")
        same_a, _ = _run(host, tmp_path, "same_a", "--prompt-salt", "77")
        same_b, out_b = _run(host, tmp_path, "same_b", "--prompt-salt", "77")
    # default: two salts, no cache hit, the same TTFT
    assert first["run"]["prompt_salt"] != second["run"]["prompt_salt"]
    for s in (first, second):
        assert s["requests"]["ok"] == 10 and s["prefix_cache"]["hit_rate"] < 0.05, s["prefix_cache"]
        assert s["prefix_cache"]["warning"] is None
    a, b = first["ttft_ms"]["p50"], second["ttft_ms"]["p50"]
    assert abs(a - b) <= 0.10 * max(a, b), (a, b)
    assert "server prefix cache: hit rate" in out2 and "WARNING: the server's prefix cache" not in out2
    # the same salt twice: the second run is served from the cache, and says so
    assert same_a["run"]["prompt_salt"] == same_b["run"]["prompt_salt"] == 77
    assert same_b["prefix_cache"]["hit_rate"] > 0.9 and same_b["prefix_cache"]["warning"], same_b["prefix_cache"]
    assert same_b["ttft_ms"]["p50"] < 0.6 * same_a["ttft_ms"]["p50"], (same_a["ttft_ms"], same_b["ttft_ms"])
    assert "WARNING: the server's prefix cache served" in out_b


def _settings(salt: int | None, worker: int = 0) -> RunSettings:
    opts = SimpleNamespace(seed=3, input_len="uniform:8:64", shared_prefix_len=16, tokenizer="deepseek-v2",
                           **{RESOLVED_SALT: salt})
    return RunSettings.from_options(opts, worker)


def test_the_salt_changes_the_texts_never_the_lengths():
    a, b, none = _settings(1), _settings(2), _settings(None)
    pa = [a.prompt(chat=False) for _ in range(20)]
    pb = [b.prompt(chat=False) for _ in range(20)]
    assert [p.tokens for p in pa] == [p.tokens for p in pb]  # --seed fixes the lengths
    assert not {p.text for p in pa} & {p.text for p in pb}
    assert a.system_prompt(0) != b.system_prompt(0) != none.system_prompt(0)
    # one salt: the same texts in every process of the run (the shared system prompt) and in a rerun with it
    assert _settings(1, worker=1).system_prompt(0) == a.system_prompt(0)
    assert _settings(1).prompt(chat=False).text == pa[0].text
    # none: the texts of --seed alone, as before the salt existed (one Generator for lengths and words)
    assert none.text_rng is none.rng and a.text_rng is not a.rng


def test_prompt_salt_values():
    assert prompt_salt(" RUN ") == PROMPT_SALT_DEFAULT and prompt_salt("none") == "none" and prompt_salt("42") == "42"
    with pytest.raises(Exception, match="--prompt-salt"):
        prompt_salt("-1")
    assert resolve_prompt_salt("none") is None and resolve_prompt_salt("42") == 42
    assert resolve_prompt_salt("run") != resolve_prompt_salt("run")


def test_workload_share_counts_what_the_workload_itself_repeats():
    opts = SimpleNamespace(shared_prefix_len=100, prompt_file=None, trace=None)
    assert workload_share(opts, prompt_tokens=1000, prompts=4, turns=[]) == pytest.approx(0.4)
    turns = [{"turn": 1, "requests": 2, "prompt_tokens_mean": 100.0},
             {"turn": 2, "requests": 2, "prompt_tokens_mean": 300.0}]
    # turn 2 resends 200 tokens of history, twice, of 800 prompt tokens
    assert workload_share(SimpleNamespace(), 800, 4, turns) == pytest.approx(0.5)
    assert workload_share(SimpleNamespace(prompt_file="x.jsonl"), 800, 4, []) is None
    assert section(0.5, 0.4)["warning"] is None
    assert "flattered" in section(0.4 + PREFIX_CACHE_EXCESS + 0.01, 0.4)["warning"]
    assert section(None, 0.0)["warning"] is None


def test_a_traces_repeated_blocks_are_its_share(tmp_path):
    lines = [{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]},
             {"timestamp": 5, "input_length": 1024, "output_length": 1, "hash_ids": [1, 3]}]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    assert workload_share(SimpleNamespace(trace=str(path)), 2048, 2, []) == pytest.approx(512 / 2048)
