"""Chat prompts render with the tokenizer's own chat template (jinja2, as vLLM renders through transformers):
DeepSeek's render as before, the others as their tokenizer_config.json says, the sandbox holds."""

from __future__ import annotations

import json

import pytest

from workload.tokenizers import BOS, EOS, ChatTemplateError, chat_renderer, load_tokenizer, render_chat

CONV = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
    {"role": "user", "content": " the cat"},
]
HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("name", ["deepseek-v3", "deepseek-v4", "deepseek-v2.5", "deepseek-v3.2"])
@pytest.mark.parametrize("gen", [True, False])
def test_deepseek_templates_render_as_before(name, gen):
    assert chat_renderer(name)(CONV, gen) == render_chat(CONV, gen)


def test_a_tokenizer_without_template_falls_back_to_deepseeks_and_renderers_are_cached():
    assert chat_renderer("deepseek-v4") is render_chat  # its files carry no chat_template
    assert chat_renderer("qwen2.5") is chat_renderer("qwen2.5") is not render_chat


# Hand-written: what each model's tokenizer_config.json template makes of one message and of CONV.
OWN = {
    "deepseek-v2": (BOS + "User: hi\n\nAssistant:",
                    BOS + "Be brief.\n\nUser: hi\n\nAssistant: hello" + EOS + "User:  the cat\n\nAssistant:"),
    "r1-distill-llama": (
        BOS + "<｜User｜>hi<｜Assistant｜><think>\n",
        BOS + "Be brief.<｜User｜>hi<｜Assistant｜>hello" + EOS + "<｜User｜> the cat<｜Assistant｜><think>\n",
    ),
    "qwen2.5": (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>user\n the cat<|im_end|>\n<|im_start|>assistant\n",
    ),
}


@pytest.mark.parametrize("name", sorted(OWN))
def test_other_templates_render_their_own_text_and_count_differently(name):
    one, conv = OWN[name]
    render = chat_renderer(name)
    assert render(HI) == one and render(CONV) == conv
    tok = load_tokenizer(name)
    count = lambda text: len(tok.encode(text, add_special_tokens=False).ids)  # noqa: E731
    assert render(HI) != render_chat(HI) and count(render(HI)) != count(render_chat(HI))


def test_content_parts_render_as_their_text():
    parts = [{"role": "user", "content": [{"type": "text", "text": "h"}, {"type": "text", "text": "i"}]}]
    assert chat_renderer("qwen2.5")(parts) == chat_renderer("qwen2.5")(HI)


def _folder(tmp_path, template: str, **config) -> str:
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": template, **config}))
    return str(tmp_path)


def test_template_context_specials_exception_date_and_block_trimming(tmp_path):
    template = (
        "{% if messages|length > 2 %}{{ raise_exception('too many') }}{% endif %}\n"
        "{{ bos_token }}{% for m in messages %}\n"
        "  {% if m.role == 'user' %}[{{ m['content'] | trim }}]{% endif %}\n"
        "{% endfor %}{{ eos_token }}{% if add_generation_prompt %}>{{ strftime_now('%Y')|length }}{% endif %}"
    )
    render = chat_renderer(_folder(tmp_path, template, bos_token={"content": "<s>", "lstrip": False},
                                   eos_token="</s>"))
    assert render([{"role": "user", "content": " a "}]) == "<s>[a]</s>>4"
    assert render([{"role": "user", "content": "a"}], False) == "<s>[a]</s>"
    with pytest.raises(ChatTemplateError, match="too many"):
        render(HI * 3)


@pytest.mark.parametrize("template", ["{{ ''.__class__.__mro__[1].__subclasses__() }}", "{{ messages.append(1) }}"])
def test_templates_render_in_an_immutable_sandbox(tmp_path, template):
    with pytest.raises(ChatTemplateError):
        chat_renderer(_folder(tmp_path, template))(HI)
