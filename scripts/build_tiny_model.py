"""Build the tiny random-weight model that the real vLLM CPU engine serves in the tests.

A 2-layer LlamaForCausalLM (hidden 128, 4 heads of 32, tied embeddings, ~17 M parameters) whose
vocabulary is the DeepSeek-V4 tokenizer's, so the server counts prompt tokens exactly as the Locust
client does: the same ``tokenizer.json`` (``workload.tokenizers``) and the same chat template
(``CHAT_TEMPLATE``, whose python twin is ``render_chat``). The weights are random (seeded): the
text is noise, but lengths, timings, SSE framing and KV-cache use are real.

Run with the engine's venv (it needs torch), from the repository root:

    .venv-vllm/bin/python scripts/build_tiny_model.py --out .cache/tiny-deepseek
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from workload import tokenizers as bundled  # noqa: E402
from workload.argtypes import seed  # noqa: E402

TOKENIZER = bundled.DEFAULT_TOKENIZER
VOCAB_MULTIPLE = 64
ARCH = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 32,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
}


def padded_vocab(size: int, multiple: int = VOCAB_MULTIPLE) -> int:
    """Round ``size`` up to a multiple of ``multiple`` (embedding tables like aligned sizes)."""
    return -(-size // multiple) * multiple


def tokenizer_files(name: str = TOKENIZER) -> dict[str, bytes]:
    """The tokenizer files of the model folder: tokenizer.json as shipped, plus our config and template."""
    tok_json = bundled.tokenizer_json_bytes(name)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": bundled.BOS,
        "eos_token": bundled.EOS,
        "pad_token": bundled.EOS,
        "unk_token": None,
        "add_bos_token": False,  # the template writes BOS itself (render_chat does the same)
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 2048,
        "chat_template": bundled.CHAT_TEMPLATE,
    }
    return {
        "tokenizer.json": tok_json,
        "tokenizer_config.json": json.dumps(config, ensure_ascii=False, indent=2).encode("utf-8"),
        "chat_template.jinja": bundled.CHAT_TEMPLATE.encode("utf-8"),
    }


def model_config_kwargs(name: str = TOKENIZER) -> dict:
    """LlamaConfig arguments: ARCH plus the tokenizer's vocabulary and special-token ids."""
    tok = bundled.load_tokenizer(name)
    return {
        **ARCH,
        "vocab_size": padded_vocab(tok.get_vocab_size(with_added_tokens=True)),
        "bos_token_id": tok.token_to_id(bundled.BOS),
        "eos_token_id": tok.token_to_id(bundled.EOS),
        "pad_token_id": tok.token_to_id(bundled.EOS),
    }


def build(out: Path, seed: int = 0, name: str = TOKENIZER) -> dict:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(**model_config_kwargs(name))
    model = LlamaForCausalLM(config).to(torch.float32)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    for fname, data in tokenizer_files(name).items():
        (out / fname).write_bytes(data)
    return {"params": sum(p.numel() for p in model.parameters()), "vocab_size": config.vocab_size}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".cache" / "tiny-deepseek")
    parser.add_argument("--seed", type=seed, default=0)
    parser.add_argument("--tokenizer", default=TOKENIZER, help="bundled name or path of tokenizer.json")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    info = build(args.out, seed=args.seed, name=args.tokenizer)
    size = sum(p.stat().st_size for p in args.out.iterdir() if p.is_file())
    print(
        f"tiny model: {info['params'] / 1e6:.1f} M parameters, vocab {info['vocab_size']}, "
        f"{size / 1e6:.0f} MB in {args.out} ({time.perf_counter() - t0:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
