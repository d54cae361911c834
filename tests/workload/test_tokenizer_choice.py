"""``--tokenizer auto``: the served model id picks the bundled tokenizer whose files are that model's."""

from __future__ import annotations

import json

import pytest

from workload.tokenizers import (
    AUTO,
    DEFAULT_TOKENIZER,
    choose_tokenizer,
    load_tokenizer,
    tokenizer_for_model,
    tokenizer_hash,
    tokenizer_json_bytes,
)

CASES = {
    "deepseek-ai/DeepSeek-V2": "deepseek-v2",
    "deepseek-ai/DeepSeek-V2-Lite": "deepseek-v2",
    "deepseek-ai/DeepSeek-V2-Lite-Chat": "deepseek-v2",
    "deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct": "deepseek-v2",
    "deepseek-ai/DeepSeek-V2.5": "deepseek-v2.5",
    "deepseek-ai/DeepSeek-V3": "deepseek-v3",
    "deepseek-ai/DeepSeek-V3-0324": "deepseek-v3",
    "deepseek-ai/DeepSeek-V3.1": "deepseek-v3.1",
    "deepseek-ai/DeepSeek-V3.2-Exp": "deepseek-v3.2",
    "deepseek-ai/DeepSeek-R1": "deepseek-r1",
    "/models/DeepSeek-R1-0528": "deepseek-r1",
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": "r1-distill-llama",
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B": "r1-distill-llama",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": "deepseek-r1-distill-qwen-7b",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": "deepseek-r1-distill-qwen-7b",
    "Qwen/Qwen2.5-7B-Instruct": "qwen2.5",
}


@pytest.mark.parametrize("model, name", CASES.items())
def test_model_ids_map_to_their_tokenizer(model, name):
    assert tokenizer_for_model(model) == name
    chosen = choose_tokenizer(AUTO, model)
    assert (chosen.name, chosen.source, chosen.model, chosen.warning) == (name, "model", model, None)
    load_tokenizer(name)  # the files exist


def _sig(name: str) -> tuple:
    j = json.loads(tokenizer_json_bytes(name))
    return j["model"]["vocab"], j["model"].get("merges"), sorted((t["id"], t["content"]) for t in j["added_tokens"])


def test_the_mapping_follows_the_files():
    """V3/V3.1/V3.2/R1 share V4's vocabulary and merges but not its special tokens (so each keeps its own files);
    V2.5 is V2's vocabulary with more specials; R1-Distill-Qwen is Qwen2.5's vocabulary with R1's chat specials."""
    v4 = _sig("deepseek-v4")
    for name in ("deepseek-v3", "deepseek-v3.1", "deepseek-v3.2", "deepseek-r1"):
        own = _sig(name)
        assert own[:2] == v4[:2] and own[2] != v4[2] and tokenizer_hash(name) != tokenizer_hash("deepseek-v4")
    v2, v25 = _sig("deepseek-v2"), _sig("deepseek-v2.5")
    assert v25[:2] == v2[:2] and len(v25[2]) > len(v2[2])
    qwen, distill = _sig("qwen2.5"), _sig("deepseek-r1-distill-qwen-7b")
    assert distill[:2] == qwen[:2] and any("<｜User｜>" in c for _i, c in distill[2])
    assert not any("<｜User｜>" in c for _i, c in qwen[2])


@pytest.mark.parametrize("model", ["sim-tiny", "mistralai/Mistral-7B-Instruct-v0.3", None])
def test_unknown_model_falls_back_with_a_warning(model):
    chosen = choose_tokenizer(AUTO, model)
    assert chosen.name == DEFAULT_TOKENIZER and chosen.source == "fallback"
    assert DEFAULT_TOKENIZER in chosen.warning and "--align-prompts" in chosen.warning


def test_an_explicit_tokenizer_and_a_model_folder(tmp_path):
    assert choose_tokenizer("deepseek-v3", "deepseek-ai/DeepSeek-V2-Lite").record() == {
        "name": "deepseek-v3", "hash": tokenizer_hash("deepseek-v3"), "source": "option",
        "model": "deepseek-ai/DeepSeek-V2-Lite"}
    (tmp_path / "tokenizer.json").write_bytes(tokenizer_json_bytes("deepseek-v2"))
    chosen = choose_tokenizer(AUTO, str(tmp_path))  # vLLM serving a local folder names the model by its path
    assert (chosen.name, chosen.source, chosen.hash) == (str(tmp_path), "model", tokenizer_hash("deepseek-v2"))


@pytest.mark.slow
def test_every_name_that_works_is_listed_once_in_the_error_and_the_cli_help():
    import subprocess

    from tests.support import PY, ROOT
    from workload.tokenizers import BUNDLED, MODEL_TOKENIZERS, NAMES, TokenizerNotFound, load_tokenizer

    works = sorted({*BUNDLED, *(n for _pattern, n in MODEL_TOKENIZERS)})  # what resolves, as the loader reads it
    assert list(NAMES) == works
    assert len(works) >= 12
    with pytest.raises(TokenizerNotFound) as e:
        load_tokenizer("no-such-tokenizer")
    listed = str(e.value).split("one of ", 1)[1]
    assert listed == ", ".join(works)
    for name in works:  # each listed name loads
        assert load_tokenizer(name).get_vocab_size() > 1000, name
    helptext = subprocess.run([PY, "-m", "tokenizer_checks", "--help"], cwd=ROOT, capture_output=True, text=True,
                              timeout=60).stdout
    assert ", ".join(works) in " ".join(helptext.split()), helptext
