"""The simulator counts a chat prompt with its served model's own chat template (``--tokenizer auto``), as the
client does: a synthetic prompt of N tokens is N tokens on both sides, which DeepSeek's template would miss."""

from __future__ import annotations

import numpy as np
import pytest

from server.sim.cli import build_app, build_parser, settings_from_args
from workload.prompts import SyntheticPrompts
from workload.tokenizers import chat_renderer, choose_tokenizer, load_tokenizer, render_chat


@pytest.mark.parametrize("model, bundled", [("Qwen/Qwen2.5-7B-Instruct", "qwen2.5"),
                                            ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "r1-distill-llama")])
def test_client_and_simulator_count_a_synthetic_chat_prompt_alike(model, bundled):
    app, _engine = build_app(settings_from_args(build_parser().parse_args(["--served-model-name", model])))
    chosen = choose_tokenizer("auto", model).name  # what the client's --tokenizer auto picks
    assert chosen == bundled
    tok = load_tokenizer(chosen)
    src = SyntheticPrompts(tok, chat=True, render=chat_renderer(chosen))
    for n in (64, 300):
        p = src.build(np.random.default_rng(n), n)
        messages = [{"role": "user", "content": p.text}]
        assert len(app._chat_ids(messages)) == p.tokens == n
        assert len(tok.encode(render_chat(messages), add_special_tokens=False).ids) != n  # DeepSeek's would differ
