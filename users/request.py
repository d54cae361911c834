"""What one LLM request asks, drawn once per request: :class:`RequestInput` (frozen).

The prompt text(s) and their client token count, the output length and the sampling fields, the route
the prompt's fingerprint picks (``--route-table``) and the stage it is sent in. An adapter
(:mod:`users.adapters`) turns it into a body; nothing here knows an endpoint.

    inp = draw(settings, adapter, board.current)   # RNG order: max_tokens, then the prompts
    inp.texts, inp.prompt_tokens, inp.max_tokens, inp.sampling, inp.route, inp.stage, inp.model_input
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

from shapes.stage import Stage
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
    max_tokens: int
    """The drawn output length."""
    sampling: dict
    """Length controls and model name for the body (:meth:`RunSettings.sampling`); read, never changed."""
    stage: str
    """Name of the load stage the request is sent in."""
    model_input: object
    """The model input as the body carries it (the adapter's ``model_input``): what the route fingerprints."""
    route: Route | None = None
    """The route the fingerprint picked, None without ``--route-table``."""
    turn: int | None = None
    """The turn of its conversation (1, 2, ...; ``--turns``), None for a request that stands alone."""

    @property
    def prompts(self) -> int:
        """Prompts carried by the request (the batch size of a batch request)."""
        return len(self.texts)

    @property
    def version(self) -> str | None:
        return self.route.version if self.route is not None else None


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
    return RequestInput(
        texts=texts,
        prompt_tokens=sum(p.tokens for p in prompts) + (len(prompts) * settings.system_tokens(adapter.chat, tok)
                                                        if system else 0),  # fmt: skip
        max_tokens=max_tokens,
        sampling=settings.sampling(max_tokens),
        stage=stage.name,
        model_input=model_input,
        route=Route(*picked) if picked is not None else None,
    )


def draw_records(settings: RunSettings, adapter: _Shape, stage: Stage) -> RequestInput:
    """A completions request from ``--dataset``: the next selected records' first user turns (``--batch-size`` of
    them for a batched adapter), max_tokens from the first one's answer (:meth:`RunSettings.dialog_max_tokens`)."""
    turns = [settings.next_dialog().turns[0] for _ in range(settings.batch_size if adapter.batched else 1)]
    count = settings.source(False).count
    texts = tuple(t.text for t in turns)
    max_tokens = settings.dialog_max_tokens(turns[0])
    model_input = adapter.model_input(texts)
    picked = settings.route(model_input)
    return RequestInput(
        texts=texts,
        prompt_tokens=sum(count(t) for t in texts),
        max_tokens=max_tokens,
        sampling=settings.sampling(max_tokens),
        stage=stage.name,
        model_input=model_input,
        route=Route(*picked) if picked is not None else None,
    )


def draw_trace(settings: RunSettings, adapter: _Shape, stage: Stage, record: TraceRecord) -> RequestInput:
    """One trace line's input (``--trace``): one prompt of ``input_length`` tokens whose blocks follow the line's
    ``hash_ids`` (:class:`workload.trace.BlockPrompts`; the chat template included for chat) and
    ``max_tokens = output_length``. The trace decides the prefixes: ``--shared-prefix-len`` is not added."""
    p = settings.trace_prompt(adapter.chat, record)
    model_input = adapter.model_input((p.text,))
    picked = settings.route(model_input)
    return RequestInput(
        texts=(p.text,),
        prompt_tokens=p.tokens,
        max_tokens=record.output_length,
        sampling=settings.sampling(record.output_length),
        stage=stage.name,
        model_input=model_input,
        route=Route(*picked) if picked is not None else None,
    )
