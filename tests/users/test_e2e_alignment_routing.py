"""End to end: prompt-token alignment against a server's /tokenize, and gray routing by fingerprint."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.users.e2e import run_locust, scripted

pytestmark = pytest.mark.slow


def test_mismatched_server_is_reported_and_align_prompts_recuts(tmp_path) -> None:
    args = ["-u", "2", "-r", "2", "-t", "3s", "--stop-timeout", "5", "--input-len", "200", "StreamingCompletionUser"]
    with scripted("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "4", "--prompt-offset", "5") as (host, _):
        plain = run_locust(host, args, tmp_path)
        aligned = run_locust(host, [*args, "--align-prompts"], tmp_path)
    assert "Traceback" not in plain.output + aligned.output
    assert "prompt token mismatch (completion)" in plain.output and "mismatch ratio" in plain.output
    assert {r["prompt_tokens"] - r["prompt_tokens_client"] for r in plain.results} == {5}
    assert {r["prompt_tokens"] for r in plain.results} == {205}
    assert "re-cutting prompts" in aligned.output
    assert {r["prompt_tokens"] for r in aligned.results} == {200}  # the server now counts the drawn length


def test_server_without_tokenize_is_skipped_quietly(tmp_path) -> None:
    with scripted("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "4", "--no-tokenize") as (host, _):
        # the scripted server counts with deepseek-v4: named, so the unknown model's fallback hint stays out
        run = run_locust(host, ["-u", "1", "-t", "2s", "--input-len", "50", "--tokenizer", "deepseek-v4",
                                "StreamingChatUser"], tmp_path)
    assert "prompt token mismatch" not in run.output and "/tokenize" not in run.output
    assert run.results and all(r["ok"] and r["prompt_tokens"] == 50 for r in run.results)


def test_route_table_sends_each_request_to_its_versions_host(tmp_path) -> None:
    with (
        scripted("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "4", "--model", "m") as (a, stats_a),
        scripted("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "4", "--model", "m") as (b, stats_b),
    ):
        table = f"v1={a}@0-59,beta={b}@60-99"
        run = run_locust(a, ["-u", "4", "-r", "4", "-t", "4s", "--stop-timeout", "5", "--input-len", "uniform:8:64",
                             "--route-table", table, "StreamingChatUser"], tmp_path)
        served = {"v1": stats_a()["requests"], "beta": stats_b()["requests"]}
    assert "Traceback" not in run.output, run.output[-3000:]
    by_version = Counter(r["version"] for r in run.results)
    assert by_version == served and by_version["v1"] > 0 and by_version["beta"] > 0
    assert all(r["ok"] for r in run.results)
