"""DeepSeek as it is really served, end to end: real ``locust`` processes against the real simulator.

1. ``--tokenizer auto`` (the default): the simulator serves ``deepseek-ai/DeepSeek-V2-Lite`` (then
   ``deepseek-ai/DeepSeek-R1-Distill-Llama-8B``) with that model's real tokenizer; the users pick the matching
   bundled tokenizer from ``/v1/models``, log it, name it with its hash in the summary, and their prompt counts
   equal the server's (mismatch 0).
2. Reasoning (R1): the simulator thinks ``--reasoning fixed:200`` tokens per request, in vLLM 0.32's wire form
   (the ``reasoning`` field; the other forms are read back from the simulator in
   tests/contract/test_reasoning_transcripts.py and split by the tally in tests/users/test_reasoning.py); the
   thinking span (TTFA - TTFT) is 200 decode steps (200 x the run's ITL p50) within 2 % at p50, every
   request has 200 reasoning tokens and the rest answer tokens — in the summary, on the Prometheus exporter and
   in the HTML report.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from contextlib import contextmanager
from statistics import median

import pytest
from prometheus_client.parser import text_string_to_metric_families

from telemetry.outputs.requestlog import read_records
from tests.server.sim.helpers import post, running_sim
from tests.support import PY, Proc, free_port, wait_http
from tests.users.e2e import SERVER_NICE, run_locust
from workload.tokenizers import BOS, chat_renderer, load_tokenizer, render_chat, tokenizer_hash

pytestmark = pytest.mark.slow

# One short message as each model's own chat template renders it (its tokenizer_config.json), written by hand.
OWN_TEMPLATE = {
    "deepseek-v2": BOS + "User: hi\n\nAssistant:",
    "r1-distill-llama": BOS + "<｜User｜>hi<｜Assistant｜><think>\n",
}


@pytest.mark.parametrize(
    "model, bundled",
    [("deepseek-ai/DeepSeek-V2-Lite", "deepseek-v2"), ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "r1-distill-llama")],
)
def test_auto_tokenizer_follows_the_served_model(tmp_path, model, bundled):
    # the check can fail: the default of old (deepseek-v4) counts this model's prompts differently
    text = " the quick brown fox jumps over the lazy dog" * 20
    ours, v4 = load_tokenizer(bundled), load_tokenizer("deepseek-v4")
    assert len(ours.encode(text).ids) != len(v4.encode(text).ids) or ours.get_vocab_size() != v4.get_vocab_size()
    # and both sides render chat prompts with the model's own template, not DeepSeek's: one short message
    hi = [{"role": "user", "content": "hi"}]
    assert chat_renderer(bundled)(hi) == OWN_TEMPLATE[bundled] != render_chat(hi)
    own, twin = (len(ours.encode(t, add_special_tokens=False).ids) for t in (OWN_TEMPLATE[bundled], render_chat(hi)))
    assert own != twin
    with running_sim("--time-scale", "20", "--served-model-name", model) as sim:  # the simulator's auto, too
        status, _h, raw = post(sim.port, "/v1/chat/completions", {"model": model, "messages": hi, "max_tokens": 1})
        assert status == 200 and json.loads(raw)["usage"]["prompt_tokens"] == own, raw[:300]
        run = run_locust(f"http://127.0.0.1:{sim.port}", ["-u", "2", "-r", "2", "-t", "4s", "--input-len",
                         "uniform:64:512", "--output-len", "fixed:16", "StreamingChatUser", "StreamingCompletionUser"],
                         tmp_path)
    assert run.summary is not None, run.output[-3000:]
    s = run.summary
    assert s["run"]["tokenizer"] == {"name": bundled, "hash": tokenizer_hash(bundled), "source": "model",
                                     "model": model}
    assert f"tokenizer {bundled} (for the served model '{model}'), sha256 {tokenizer_hash(bundled)[:16]}" in run.output
    assert "has no bundled tokenizer" not in run.output and "prompt token mismatch" not in run.output
    assert s["requests"]["ok"] >= 4 and s["requests"]["failed"] == 0
    assert s["tokens"]["prompt_mismatch_ratio"] == 0.0
    print(f"{model}: tokenizer {s['run']['tokenizer']['name']} {s['run']['tokenizer']['hash'][:16]}, "
          f"{s['tokens']['prompt']} prompt tokens, mismatch {s['tokens']['prompt_mismatch_ratio']}; "
          f"one message 'hi': own template {own} tokens, DeepSeek's {twin}")


def _scrape_until_exit(port: int, proc_done: threading.Event, last: list[str]) -> None:
    """Keep the exporter's latest text until the run ends (the exporter goes with the process)."""
    while not proc_done.is_set():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                last[:] = [r.read().decode()]
        except OSError:
            pass
        proc_done.wait(0.5)


def _prom(text: str) -> dict[str, float]:
    """Sample name -> value summed over label sets (one user class and stage here)."""
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if not s.labels.get("le") and not s.labels.get("quantile"):
                out[s.name] = out.get(s.name, 0.0) + s.value
    return out


REASONING = 200
OUTPUT = 216
TIME_SCALE = "0.5"
"""Decode steps of ~11 ms (the DeepSeek-V2-Lite A100 profile at half speed): a busy box's wake-up jitter (a late
step, then one caught up) stays well inside the 2 % between the median gap and the mean one."""


@contextmanager
def _sim_above_the_client(*flags: str):
    """The simulator at raised (real-time where allowed) priority, as the timing tests run their server: on a
    busy box a stalled server step lengthens every thinking span in flight, while the ITL median ignores it."""
    port = free_port()
    with Proc([*SERVER_NICE, PY, "-m", "server.sim", "--port", str(port), *flags], name="sim") as proc:
        wait_http(f"http://127.0.0.1:{port}/health", timeout=60, proc=proc)
        proc.port = port
        yield proc


def test_reasoning_split_ttfa_and_tokens(tmp_path):
    """Four users (a dozen requests: a p50 that one stalled request on a busy box does not move) with 16-token
    prompts: another user's prefill inside a thinking span costs 0.1 % of it."""
    field, exp_port = "reasoning", free_port()
    report, jsonl = tmp_path / "report.html", tmp_path / "requests.jsonl"
    with _sim_above_the_client("--profile", "deepseek-v2-lite-a100", "--time-scale", TIME_SCALE,
                               "--served-model-name", "deepseek-ai/DeepSeek-R1", "--tokenizer", "deepseek-r1",
                               "--reasoning", f"fixed:{REASONING}", "--reasoning-field", field) as sim:
        done, last = threading.Event(), [""]
        scraper = threading.Thread(target=_scrape_until_exit, args=(exp_port, done, last), daemon=True)
        scraper.start()
        try:
            run = run_locust(f"http://127.0.0.1:{sim.port}", ["-u", "4", "-r", "4", "-t", "8s", "--input-len",
                             "fixed:16", "--output-len", f"fixed:{OUTPUT}", "--prometheus-port", str(exp_port),
                             "--llm-report", str(report), "--llm-requests-jsonl", str(jsonl), "StreamingChatUser"],
                             tmp_path)
        finally:
            done.set()
            scraper.join(5)
    s = run.summary
    assert s is not None, run.output[-3000:]
    ok = s["requests"]["ok"]
    assert ok >= 4 and s["requests"]["failed"] == 0, s["requests"]
    assert s["run"]["tokenizer"]["name"] == "deepseek-r1" and s["tokens"]["prompt_mismatch_ratio"] == 0.0
    # tokens: exactly 200 reasoning per request, the rest answer
    assert s["tokens"]["output"] == OUTPUT * ok
    assert s["tokens"]["reasoning"] == REASONING * ok
    assert s["tokens"]["answer"] == (OUTPUT - REASONING) * ok
    # timing: TTFA beside TTFT; the thinking span is 200 decode steps
    ttft, ttfa, itl, thinking = (s[k]["p50"] for k in ("ttft_ms", "ttfa_ms", "itl_ms", "thinking_ms"))
    assert s["ttfa_ms"]["count"] == s["ttft_ms"]["count"] == s["thinking_ms"]["count"] == ok
    print(f"{field}: {ok} requests, TTFT p50 {ttft:.1f} ms, TTFA p50 {ttfa:.1f} ms, thinking p50 {thinking:.1f} ms, "
          f"ITL p50 {itl:.3f} ms, thinking / (200 x ITL) {thinking / (REASONING * itl):.4f}, "
          f"tokens {s['tokens']['reasoning']} reasoning / {s['tokens']['answer']} answer")
    # the exact per-request values: per request TTFA = TTFT + thinking, and the thinking span is the request's own
    # first REASONING gaps (one token a step: the first token and the REASONING - 1 after it think). Per request, not
    # p50(TTFA) - p50(TTFT) or 200 x the ITL p50: a difference of medians is no median of differences, and a busy
    # box's stalls skew the gaps (CI: 2298 vs 2214 ms, thinking / (200 x ITL p50) 0.972), while these hold exactly
    rows = [r for r in run.results if r.get("ok")]
    assert [r["reasoning_tokens"] for r in rows] == [REASONING] * len(rows) == [REASONING] * ok
    span, step = median(r["thinking"] for r in rows), median(x for r in rows for x in r["itl"])
    print(f"{field} exact: thinking p50 {span * 1e3:.2f} ms, ITL p50 {step * 1e3:.3f} ms, "
          f"ratio {span / (REASONING * step):.4f}")
    assert all(r["ttfa"] - r["ttft"] == pytest.approx(r["thinking"], abs=1e-9) for r in rows)
    assert all(r["thinking"] == pytest.approx(sum(r["itl"][:REASONING]), abs=1e-6) for r in rows), \
        [(r["thinking"], sum(r["itl"][:REASONING])) for r in rows]
    # the summary's quantiles are sketches of the same values (1 % relative accuracy): its thinking p50 lies between
    # the exact lower and upper medians, its ITL p50 at the exact one
    exact = sorted(r["thinking"] * 1000 for r in rows)
    lo, hi = exact[(len(exact) - 1) // 2], exact[len(exact) // 2]
    assert 0.99 * lo <= thinking <= 1.01 * hi, (thinking, exact)
    assert itl == pytest.approx(step * 1000, rel=0.02), (itl, step)
    # the per-request log: every reasoning figure in every line, equal to the exact per-request values
    lines = [line for line in read_records(jsonl) if line["ok"]]
    assert len(lines) == ok
    for line in lines:
        assert all(line[k] is not None for k in ("ttft_ms", "ttst_ms", "ttfa_ms", "thinking_ms", "tpot_ms", "e2e_ms"))
        assert line["ttfa_ms"] - line["ttft_ms"] == pytest.approx(line["thinking_ms"], abs=0.002)
    # Prometheus (the exporter's last scrape during the run: every request it had recorded)
    prom = _prom(last[0])
    n = prom["llm_time_to_first_answer_token_seconds_count"]
    assert n >= 1 and prom["llm_thinking_span_seconds_count"] == n
    assert prom["llm_reasoning_tokens_total"] == REASONING * n
    assert prom["llm_output_tokens_total"] - prom["llm_reasoning_tokens_total"] == (OUTPUT - REASONING) * n
    # the report shows TTFA and the token split
    html = report.read_text()
    assert "TTFA" in html and "thinking span" in html and f"{REASONING * ok:,} reasoning" in html
