"""What one LLM request asks, drawn once per request: :class:`RequestInput` (frozen).

The prompt text(s) and their client token count, the output length and the sampling fields, the route
the prompt's fingerprint picks (``--route-table``) and the stage it is sent in. An adapter
(:mod:`users.adapters`) turns it into a body; nothing here knows an endpoint.

    inp = draw(settings, adapter, board.current)   # RNG order: max_tokens, then the prompts
    inp.texts, inp.prompt_tokens, inp.sampling, inp.route, inp.model_input
    inp.meta                                        # the labels (stage, max_tokens, version, turn, ...)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

from shapes.stage import Stage
from users.result import RequestMeta
from users.settings import RunSettings
from workload.trace import TraceRecord


class Route(NamedTuple):
    """Where ``--route-table`` sends a request: its version, that version's base URL, the metadata headers."""

    version: str
    base_url: str
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class RequestInput:
    texts: tuple[str, ...]
    """The prompt texts, one per prompt in the request."""
    prompt_tokens: int
    """Prompt tokens by the client's tokenizer, over all prompts."""
    sampling: dict
    """Length controls and model name for the body (:meth:`RunSettings.sampling`); read, never changed."""
    model_input: object
    """The model input as the body carries it (the adapter's ``model_input``): what the route fingerprints."""
    meta: RequestMeta
    """The labels known when the input is drawn (stage, max_tokens, batch size, version, turn); the user adds its
    own (:meth:`users.base.LLMUser.send`) and hands the record on by reference."""
    route: Route | None = None
    """The route the fingerprint picked, None without ``--route-table``."""

    @property
    def max_tokens(self) -> int:
        """The drawn output length."""
        return self.meta.max_tokens

    @property
    def prompts(self) -> int:
        """Prompts carried by the request (the batch size of a batch request)."""
        return len(self.texts)


def request_input(texts: tuple[str, ...], prompt_tokens: int, max_tokens: int, sampling: dict, stage: Stage,
                  model_input: object, picked: tuple | None, **labels) -> RequestInput:
    """The input and its labels: the route ``picked`` (``RunSettings.route``'s answer, None without a table); the
    caller's own ``labels`` (``turn=...``) are further :class:`~users.result.RequestMeta` fields."""
    route = Route(*picked) if picked is not None else None
    meta = RequestMeta(stage=stage.name, max_tokens=max_tokens, batch_size=len(texts),
                       version=route.version if route is not None else None, **labels)
    return RequestInput(texts, prompt_tokens, sampling, model_input, meta, route)


class _Shape(Protocol):
    chat: bool
    batched: bool

    def model_input(self, texts: tuple[str, ...]) -> object: ...


MAX_DRAWS = 16
"""Draws per request when the route versions run different tokenizers (``--route-tokenizers``): a prompt is cut
with one of them, chosen uniformly, and kept when its fingerprint picks a version that runs it, so each version's
prompts are counted with its own tokenizer and the versions keep their bucket shares. With two tokenizers each draw
is kept with probability 1/2 on average; after MAX_DRAWS the last draw is sent as it is (its count may differ)."""


def draw(settings: RunSettings, adapter: _Shape, stage: Stage, group: int = 0) -> RequestInput:
    """Draw one request's input: the output length, then ``--batch-size`` prompts for a batched adapter
    (else one) of a length from the stage's ``input_len`` or ``--input-len``, then its route (redrawn while the
    route's version runs another tokenizer than the prompt was cut with: :data:`MAX_DRAWS`). With
    ``--shared-prefix-len`` each prompt starts with the system prompt of the user's prefix ``group``: a
    system message for chat, the prompt's head for completions (its tokens added to the count)."""
    if settings.dataset is not None and not adapter.chat:
        return draw_records(settings, adapter, stage)
    max_tokens = settings.max_tokens()
    n = settings.batch_size if adapter.batched else 1
    names = settings.draw_tokenizers()
    for _draw in range(MAX_DRAWS if names else 1):
        tok = names[int(settings.rng.integers(len(names)))] if names else None
        prompts = [settings.prompt(adapter.chat, stage.input_len, tok) for _ in range(n)]
        texts = tuple(p.text for p in prompts)
        system = settings.system_prompt(group, tok)
        if system and not adapter.chat:
            texts = tuple(system + t for t in texts)
        model_input = adapter.model_input(texts)
        if system and adapter.chat:
            model_input = [{"role": "system", "content": system}, *model_input]
        picked = settings.route(model_input)
        if tok is None or picked is None or settings.tokenizer_of(picked[0]) == tok:
            break
    tokens = sum(p.tokens for p in prompts) + (n * settings.system_tokens(adapter.chat, tok) if system else 0)
    return request_input(texts, tokens, max_tokens, settings.sampling(max_tokens), stage, model_input, picked)


def draw_records(settings: RunSettings, adapter: _Shape, stage: Stage) -> RequestInput:
    """A completions request from ``--dataset``: the next selected records' first user turns (``--batch-size`` of
    them for a batched adapter), max_tokens from the first one's answer (:meth:`RunSettings.dialog_max_tokens`)."""
    turns = [settings.next_dialog().turns[0] for _ in range(settings.batch_size if adapter.batched else 1)]
    count = settings.source(False).count
    texts = tuple(t.text for t in turns)
    max_tokens = settings.dialog_max_tokens(turns[0])
    model_input = adapter.model_input(texts)
    picked = settings.route(model_input)
    tokens = sum(count(t) for t in texts)
    return request_input(texts, tokens, max_tokens, settings.sampling(max_tokens), stage, model_input, picked)


def draw_trace(settings: RunSettings, adapter: _Shape, stage: Stage, record: TraceRecord) -> RequestInput:
    """One trace line's input (``--trace``): one prompt of ``input_length`` tokens whose blocks follow the line's
    ``hash_ids`` (:class:`workload.trace.BlockPrompts`; the chat template included for chat) and
    ``max_tokens = output_length``. The trace decides the prefixes: ``--shared-prefix-len`` is not added."""
    p = settings.trace_prompt(adapter.chat, record)
    model_input = adapter.model_input((p.text,))
    picked = settings.route(model_input)
    n = record.output_length
    return request_input((p.text,), p.tokens, n, settings.sampling(n), stage, model_input, picked)
