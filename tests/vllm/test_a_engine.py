"""The real engine itself: what the rest of the project assumes about vLLM's CPU build, checked live.

Runs first (file name) on the server that the end-to-end tests share.
"""

from __future__ import annotations

import json
import re

import pytest

from scripts.capture_transcripts import CASES, capture
from tests.fixtures.sse import load_transcript
from tests.vllm.engine import SERVED_NAME, Server
from workload.tokenizers import load_tokenizer, render_chat

pytestmark = [pytest.mark.vllm, pytest.mark.slow]  # the shared engine: a real process


def _events(raw: bytes) -> list[bytes]:
    return [block[len(b"data: ") :] for block in raw.split(b"\n\n") if block.startswith(b"data: ")]


def test_models_lists_the_served_name(vllm_server: Server):
    ids = [m["id"] for m in vllm_server.get_json("/v1/models")["data"]]
    assert ids == [SERVED_NAME]


def test_metrics_use_v1_names(vllm_server: Server):
    text = vllm_server.metrics_text()
    names = set(re.findall(r"^(vllm:[a-z_]+)", text, flags=re.M))
    for name in ("vllm:kv_cache_usage_perc", "vllm:num_requests_waiting", "vllm:num_requests_running",
                 "vllm:num_preemptions_total", "vllm:cache_config_info"):
        assert name in names, f"{name} missing from /metrics"
    assert "vllm:gpu_cache_usage_perc" not in names  # the legacy name the scraper must not rely on


@pytest.mark.parametrize("case", ["chat_usage", "completions_usage"])
def test_prompt_tokens_match_the_client_tokenizer(vllm_server: Server, case: str):
    """Server usage.prompt_tokens == the client's count of the same text (chat: rendered with the template)."""
    raw, meta = capture(vllm_server.url, SERVED_NAME, CASES[case])
    assert meta["status"] == 200
    usage = json.loads(_events(raw)[-2])["usage"]
    body = meta["request"]
    text = render_chat(body["messages"]) if "messages" in body else body["prompt"]
    client = len(load_tokenizer().encode(text, add_special_tokens=False).ids)
    assert usage["prompt_tokens"] == client
    assert usage["completion_tokens"] == body["max_tokens"]  # ignore_eos


@pytest.mark.parametrize("case", sorted(CASES))
def test_recorded_transcripts_still_describe_this_engine(vllm_server: Server, case: str):
    """A fresh capture has the framing of the recorded one: same status, event count, role/usage/[DONE]
    positions. If this fails, vLLM changed: re-record with scripts/capture_transcripts.py."""
    raw, meta = capture(vllm_server.url, SERVED_NAME, CASES[case])
    recorded = load_transcript(case)
    assert meta["status"] == recorded.meta["status"]
    assert meta["content_type"].split(";")[0] == recorded.meta["content_type"].split(";")[0]
    if meta["status"] != 200:
        assert json.loads(raw)["error"]["code"] == json.loads(recorded.body)["error"]["code"]
        return
    live, old = _events(raw), _events(recorded.body)
    assert len(live) == len(old)
    assert live[-1] == old[-1] == b"[DONE]"

    def shape(event: bytes) -> tuple:
        obj = json.loads(event)
        choices = obj.get("choices") or []
        keys = tuple(sorted(choices[0].get("delta", {}))) if choices else ()
        return (len(choices), keys, "usage" in obj and obj["usage"] is not None)

    assert [shape(e) for e in live[:-1]] == [shape(e) for e in old[:-1]]


def test_the_engine_accepts_the_gray_routing_headers(vllm_server: Server):
    """The X-Tokenizer-* / X-Compat-Level headers a gray-routed request carries (--route-table, --route-tokenizers)
    are accepted by the real engine: the same answer shape and prompt count as without them."""
    import urllib.request

    from users.routing import VersionTokenizer
    from workload.tokenizers import DEFAULT_TOKENIZER

    headers = VersionTokenizer(DEFAULT_TOKENIZER, "route-tokenizers", None, "deepseek-v2").headers("beta")
    assert headers["X-Compat-Level"] == "none"  # measured (V2 -> V4 lengthens some texts), not a fixed "backward"
    body = json.dumps({"model": SERVED_NAME, "messages": [{"role": "user", "content": "hello there"}],
                       "max_tokens": 4, "ignore_eos": True}).encode()

    def post(extra: dict[str, str]) -> tuple[int, dict]:
        req = urllib.request.Request(vllm_server.url + "/v1/chat/completions", data=body, method="POST",
                                     headers={"Content-Type": "application/json", **extra})
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())

    status, with_headers = post(headers)
    plain_status, plain = post({})
    assert status == plain_status == 200
    assert with_headers["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"] > 0
    assert with_headers["usage"]["completion_tokens"] == 4
