"""Datasets replayed end to end (``--dataset``): real ``locust`` processes against the simulator.

1. A ShareGPT file of multi-turn conversations (generated here): every turn of every sampled conversation is sent
   in order with its whole history (the dataset's answers), the server's prompt count equals the client's (the
   chat template over the whole history), each turn's output equals its dataset answer's token count
   (``--ignore-eos``), and the summary's ``turns[]`` prompt means grow turn by turn; the run record names the file.
2. An AIPerf multi-turn file and a vLLM bench custom file run unchanged (their delays and output_tokens obeyed).
"""

from __future__ import annotations

import hashlib
import json

import jsonschema
import pytest

from telemetry.outputs.requestlog import read_records
from tests.server.sim.helpers import running_sim
from tests.support import ROOT, locust_cluster
from tests.users.e2e import run_locust
from workload.tokenizers import chat_renderer, load_tokenizer

MODEL = "deepseek-ai/DeepSeek-V2-Lite"
TOKENIZER = "deepseek-v2"
WORDS = ("latency", "cache", "token", "batch", "decode", "prefill", "kernel", "tensor", "queue", "stream")

pytestmark = pytest.mark.slow


def _text(i: int, n: int) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(n))


def _sharegpt(n: int) -> list[dict]:
    """n conversations of 2-4 turns, answers of different lengths, every third with a system message."""
    out = []
    for i in range(n):
        conv = [{"from": "system", "value": f"You answer conversation {i}."}] if i % 3 == 0 else []
        for t in range(2 + i % 3):
            conv += [{"from": "human", "value": f"question {i}.{t}: " + _text(i + t, 12 + 5 * t + 2 * i)},
                     {"from": "gpt", "value": f"answer {i}.{t}: " + _text(i * t + 1, 6 + 4 * i % 9 + t)}]
        out.append({"id": f"c{i}", "conversations": conv})
    return out


def _expected(records: list[dict]) -> list[list[tuple]]:
    """Each conversation's turns as (turn, client prompt tokens, output tokens), in order."""
    tok, render = load_tokenizer(TOKENIZER), chat_renderer(TOKENIZER)
    convs = []
    for r in records:
        want: list[tuple] = []
        convs.append(want)
        msgs, turn = [], 0
        for m in r["conversations"]:
            role = {"system": "system", "human": "user", "gpt": "assistant"}[m["from"]]
            msgs.append({"role": role, "content": m["value"]})
            if role == "user":
                turn += 1
                prompt = len(tok.encode(render(msgs), add_special_tokens=False).ids)
            elif role == "assistant":
                out = len(tok.encode(m["value"], add_special_tokens=False).ids)
                want.append((turn, prompt, out))
    return convs


def _run(sim, tmp_path, *args: str, user: str = "StreamingChatUser"):
    run = run_locust(f"http://127.0.0.1:{sim.port}", ["-r", "50", "--server-metrics-url",
                     f"http://127.0.0.1:{sim.port}/metrics", "--server-metrics-interval", "0.5", *args,
                     user], tmp_path)
    assert run.summary is not None, run.output[-3000:]
    assert run.summary["requests"]["failed"] == 0, run.summary["requests"]
    assert run.summary["tokens"]["prompt_mismatch_ratio"] == 0.0, run.summary["tokens"]
    return run


def test_sharegpt_conversations_replay_turn_by_turn_with_the_datasets_lengths(tmp_path):
    records = _sharegpt(12)
    path = tmp_path / "chats.json"
    path.write_text(json.dumps(records), encoding="utf-8")  # the JSON-array form
    with running_sim("--served-model-name", MODEL, "--tokenizer", TOKENIZER) as sim:
        run = _run(sim, tmp_path, "-u", "3", "-t", "6s", "--dataset", str(path), "--dataset-sample", "6",
                   "--think-time", "fixed:0.01")
        mean = round(run.summary["tokens"]["prompt"] / run.summary["requests"]["ok"])
        plain = _run(sim, tmp_path, "-u", "3", "-t", "3s", "--input-len", f"fixed:{mean}", "--output-len", "fixed:16")
    s = run.summary
    schema = json.loads((ROOT / "docs" / "summary.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(s)
    d = s["run"]["dataset"]
    assert d["format"] == "sharegpt" and d["records"] == 12 and d["selected"] == 6 and d["skipped"] == {}
    assert d["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    convs = _expected(records)
    want = {k for c in convs for k in c}
    assert len(want) == sum(len(c) for c in convs)  # every turn of the fixture is told apart by its counts
    rows = [r for r in run.results if r.get("has_result")]
    seen = {}
    for r in rows:
        assert r["ok"], r
        key = (r["turn"], r["prompt_tokens_client"], r["output_tokens"])
        assert key in want, (key, sorted(want))  # a dataset turn: its history's count and its answer's length
        assert r["prompt_tokens"] == r["prompt_tokens_client"], r  # the server's count
        assert r["max_tokens"] == r["output_tokens"], r
        seen[key] = seen.get(key, 0) + 1
    started = [c for c in convs if c[0] in seen]
    assert len(started) == 6, sorted(seen)  # the sample, no other record
    assert set(seen) == {k for c in started for k in c}  # every turn of every sampled conversation
    sampled = set(seen)
    turns = s["turns"]
    assert [t["turn"] for t in turns][:2] == [1, 2], turns
    means = [t["prompt_tokens_mean"] for t in turns]
    assert all(b > a for a, b in zip(means, means[1:], strict=False)), means
    # the simulator's prefix cache (full blocks): the replayed histories hit it, synthetic prompts of the same
    # mean length do not
    hit = [st["prefix_cache_hit_rate"] for st in s["stages"]]
    miss = [st["prefix_cache_hit_rate"] for st in plain.summary["stages"]]
    assert all(h is not None and h > 0.5 for h in hit), hit
    assert all(m is not None and m < 0.2 for m in miss), miss
    print(f"{len(rows)} requests, {len(sampled)} distinct dataset turns; turns[] prompt means {means}; "
          f"prefix cache hit rate {hit} vs {miss} for --input-len fixed:{mean}")


def test_aiperf_multi_turn_and_vllm_bench_custom_files_run_unchanged(tmp_path):
    aiperf = tmp_path / "aiperf.jsonl"
    aiperf.write_text("".join(json.dumps({"session_id": f"s{i}", "turns": [
        {"text": _text(i, 20), "max_tokens": 5 + i}, {"text": _text(i + 1, 9), "delay": 300, "max_tokens": 7}]}) + "\n"
        for i in range(4)), encoding="utf-8")
    custom = tmp_path / "custom.jsonl"
    custom.write_text("".join(json.dumps({"prompt": _text(i, 30), "output_tokens": 10 + i}) + "\n" for i in range(5)),
                      encoding="utf-8")
    with running_sim("--served-model-name", MODEL, "--tokenizer", TOKENIZER) as sim:
        a = _run(sim, tmp_path, "-u", "2", "-t", "4s", "--dataset", str(aiperf))
        c = _run(sim, tmp_path, "-u", "2", "-t", "3s", "--dataset", str(custom))
        k = _run(sim, tmp_path, "-u", "2", "-t", "3s", "--dataset", str(custom), user="StreamingCompletionUser")
    assert a.summary["run"]["dataset"]["format"] == "aiperf"
    rows = [r for r in a.results if r.get("has_result")]
    assert {(r["turn"], r["output_tokens"]) for r in rows} <= {(1, 5), (1, 6), (1, 7), (1, 8), (2, 7)}
    assert {r["turn"] for r in rows} == {1, 2}
    # the 300 ms delay before each second turn bounds the pace of a user's conversations
    assert a.summary["requests"]["total"] <= 2 * 2 * (4 / 0.3 + 1), a.summary["requests"]
    assert c.summary["run"]["dataset"]["format"] == "custom"
    rows = [r for r in c.results if r.get("has_result")]
    assert {r["output_tokens"] for r in rows} <= set(range(10, 15)) and len({r["output_tokens"] for r in rows}) == 5
    assert all(r["turn"] == 1 for r in rows)
    rows = [r for r in k.results if r.get("has_result")]  # completions: the prompt as it is, no template
    assert {r["output_tokens"] for r in rows} == set(range(10, 15)), {r["output_tokens"] for r in rows}
    assert all(r["turn"] is None and r["prompt_tokens"] == r["prompt_tokens_client"] for r in rows)


def test_a_master_and_two_workers_replay_disjoint_shares_of_the_sample(tmp_path):
    records = _sharegpt(10)
    path = tmp_path / "chats.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    firsts = {c[0][1]: i for i, c in enumerate(_expected(records))}  # first turn's prompt count -> conversation
    assert len(firsts) == len(records)
    log, summary = tmp_path / "requests.jsonl", tmp_path / "summary.json"
    with running_sim("--served-model-name", MODEL, "--tokenizer", TOKENIZER) as sim:
        cluster = locust_cluster(
            ["--headless", "-u", "4", "-r", "4", "-t", "10s", "--host", f"http://127.0.0.1:{sim.port}",
             "--only-summary", "--prometheus-port", "0", "--server-metrics-url", "off", "--dataset", str(path),
             "--dataset-sample", "4", "--dataset-shuffle", "--llm-requests-jsonl", str(log), "--llm-summary-json",
             str(summary), "StreamingChatUser"])
        with cluster as (master, workers):
            assert master.wait(90) == 0, master.output()[-3000:]
    logs = "\n".join(p.output()[-2000:] for p in (master, *workers))
    s = json.loads(summary.read_text())
    assert s["requests"]["total"] > 0, logs
    assert s["run"]["dataset"]["selected"] == 4 and s["run"]["dataset"]["records"] == 10
    assert s["requests"]["failed"] == 0 and s["tokens"]["prompt_mismatch_ratio"] == 0.0
    by_worker: dict[int, set[int]] = {}
    for r in read_records(log):
        if r["turn"] == 1:
            by_worker.setdefault(r["worker"], set()).add(firsts[r["prompt_tokens"]])
    assert len(by_worker) == 2, by_worker
    a, b = by_worker.values()
    assert not a & b and len(a | b) == 4, by_worker  # disjoint shares, together the sample
