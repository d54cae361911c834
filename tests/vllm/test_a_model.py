"""The tiny model folder that ``make vllm-env`` builds: shape, tokenizer and chat template.

No server needed, but the folder is built by the vLLM setup, so these carry the ``vllm`` mark.
"""

from __future__ import annotations

import json

import pytest

from scripts.build_tiny_model import ARCH, padded_vocab
from workload.tokenizers import CHAT_TEMPLATE, load_tokenizer, render_chat, tokenizer_json_bytes

pytestmark = pytest.mark.vllm

CONVERSATIONS = [
    [{"role": "user", "content": "hi"}],
    [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Explain KV cache paging."},
        {"role": "assistant", "content": "Blocks of 16 tokens."},
        {"role": "user", "content": "你好，再说一遍？"},
    ],
]


def test_padded_vocab_rounds_up_to_64():
    assert padded_vocab(129_280) == 129_280
    assert padded_vocab(129_281) == 129_344
    assert padded_vocab(1) == 64


def test_config_is_the_tiny_llama_with_the_tokenizers_vocab(model_dir):
    cfg = json.loads((model_dir / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    for key, value in ARCH.items():
        assert cfg[key] == value, key
    vocab = load_tokenizer().get_vocab_size(with_added_tokens=True)
    assert cfg["vocab_size"] % 64 == 0 and vocab <= cfg["vocab_size"] < vocab + 64
    assert (cfg["bos_token_id"], cfg["eos_token_id"]) == (0, 1)


def test_tokenizer_is_the_clients(model_dir):
    assert (model_dir / "tokenizer.json").read_bytes() == tokenizer_json_bytes("deepseek-v4")
    tcfg = json.loads((model_dir / "tokenizer_config.json").read_text())
    assert tcfg["chat_template"] == CHAT_TEMPLATE


@pytest.mark.parametrize("messages", CONVERSATIONS)
def test_transformers_renders_the_folder_like_render_chat(model_dir, messages):
    """What vLLM's tokenizer (transformers, from this folder) renders == the client's python twin."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == render_chat(messages)
    ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    assert list(ids) == load_tokenizer().encode(render_chat(messages), add_special_tokens=False).ids
