"""Classify the events of one OpenAI-style stream into token-bearing chunks (the README's definitions).

A chunk bears tokens when its ``usage.completion_tokens`` rose (vLLM's ``continuous_usage_stats``);
without usage in the chunk, when its ``content`` / ``reasoning_content`` / ``reasoning`` / ``text`` is
non-empty (k = 1). The role-only first chat chunk, empty chunks and the final usage chunk
(``choices: []``) bear none. k, the tokens of a chunk, is the usage delta.

    t = StreamTally(prompt_tokens_client=512)
    t.add([b'{"choices":[...],"usage":{...}}', b"[DONE]"], arrival_time)
    t.chunk_times, t.chunk_tokens             # arrival and tokens (k) of each token-bearing chunk
    t.output_tokens, t.usage_tokens           # tokens so far (sum of k); the server's usage.completion_tokens
    t.done, t.finished, t.finish_reason, t.prompt_tokens, t.client_prompt_tokens
    t.t_reason, t.t_answer, t.reasoning, t.split, t.think      # reasoning vs answer (R1); think: a Think

Reasoning (DeepSeek-R1): a token-bearing chunk is reasoning when its delta carries ``reasoning_content`` or
``reasoning`` (vLLM's reasoning parser), or — served without a parser — when its ``content`` lies between
``<think>`` (the first content opens with it, or the chat template opened it in the prompt, as R1's does: then the
client starts the tally inside it) and ``</think>``; the first chunk with other ``content`` is
the first answer token (``t_answer``; after reasoning, whitespace-only content such as the blank line after
``</think>`` is not). The tokens of the chunks before it (reasoning, and token-bearing chunks
without text once reasoning began, e.g. the parser's swallowed ``</think>``) are ``reasoning``. A chunk holding
both sides (the tag mid-chunk, or both fields) is kept as ``split = (k, answer text)``: the client counts the
answer text's tokens once, at the end. Per chunk this costs one attribute test once the answer began, and a
method call with three dict lookups (plus a substring search inside ``<think>``) before.

Pure: no I/O, no clock. ``add`` raises :class:`~users.faults.StreamFault` (``bad_chunk`` or ``server_error``).
This is the chunk classifier of the OpenAI answer shape (:mod:`users.adapters.openai`); the request's
liveness (last byte, reading greenlet) is :class:`users.inflight.LiveRequest`, which reads ``client_prompt_tokens``
and ``output_tokens`` (tokens so far) from here.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum

import orjson

from users.chunkscan import TEXT_FIELDS, ChunkShape
from users.faults import StreamFault, quote
from users.sse import SSEParser

_loads = orjson.loads
_JSONError = orjson.JSONDecodeError
_TEXT_FIELDS = TEXT_FIELDS
_LEARN_MISSES = 4
"""Chunks a stream may fail to learn a shape from before its tally stops trying (a server whose chunks never fit)."""


class Think(IntEnum):
    """Where a stream's ``content`` stands against ``<think>...</think>`` (R1 served without a reasoning parser):
    part of the adapter contract — the client sets ``INSIDE`` before the first chunk for a model whose chat template
    opens ``<think>`` in the prompt (R1: the reply starts inside the thinking, without the tag)."""

    NO_TAG = 0
    """No ``<think>`` seen in content (a parser's reasoning fields, or a model that does not reason)."""
    INSIDE = 1
    """Inside ``<think>``: content is reasoning until ``</think>``."""
    CLOSED = 2
    """``</think>`` seen: content after it is the answer."""


_NO_TAG, _INSIDE, _CLOSED = (int(x) for x in Think)  # plain ints in module globals: no enum lookup per chunk


class StreamTally:
    __slots__ = ("client_prompt_tokens", "output_tokens", "chunk_times", "chunk_tokens", "done", "finish_reason",
                 "usage_tokens", "continuous", "prompt_tokens", "texts", "t_reason", "t_answer", "reasoning", "pending",
                 "split", "think", "kept", "_shape", "_framed", "_misses", "final")

    def __init__(self, prompt_tokens_client: int = 0) -> None:
        self.client_prompt_tokens = prompt_tokens_client
        """Prompt tokens (client count) — for the in-flight KV estimate."""
        self.output_tokens = 0
        """Output tokens so far (sum of k)."""
        self.chunk_times: list[float] = []
        """Arrival time of each token-bearing chunk."""
        self.chunk_tokens: list[int] = []
        """Tokens carried by each token-bearing chunk (k >= 1)."""
        self.done = False
        """``data: [DONE]`` seen."""
        self.finish_reason: str | None = None
        """The last ``finish_reason`` seen (``stop``, ``length``, ...)."""
        self.usage_tokens: int | None = None
        """Last ``usage.completion_tokens`` seen (None: the server sent no usage)."""
        self.continuous = False
        self.prompt_tokens: int | None = None
        self.texts: list[str] = []
        """Text of chunks counted without usage (for a tokenizer count when the server sends no usage)."""
        self.t_reason: float | None = None
        """Arrival of the first reasoning chunk."""
        self.t_answer: float | None = None
        """Arrival of the first answer chunk."""
        self.reasoning = 0
        """Reasoning tokens so far (a split chunk's share not included: see ``split``)."""
        self.pending = 0
        """Tokens of text-less chunks before any reasoning or answer (reasoning if reasoning follows)."""
        self.split: tuple[int, str] | None = None
        """(k, answer text) of the chunk where reasoning ended and the answer began mid-chunk."""
        self.think = _NO_TAG
        """Where content stands against ``<think>`` (:class:`Think`)."""
        self.kept: list[str] | None = None
        """When a list: every chunk's answer text (``content`` / ``text``) is appended to it (a conversation's)."""
        self._shape: ChunkShape | None = None
        """The token-bearing chunk's shape learned from the last fully decoded one (:mod:`users.chunkscan`)."""
        self._framed: ChunkShape | None = None
        """The same shape as one whole SSE event (``data: ...\\n\\n``): a read holding exactly one such event."""
        self._misses = 0
        self.final: dict | None = None
        """The final usage chunk (``choices: []``): where vLLM puts its in-band ``metrics`` (:mod:`users.inband`)."""

    def reader(self, parser: SSEParser) -> Callable[[bytes, float], None]:
        """``take(data, t)``: account one read's body bytes, framed by ``parser``. A read that is exactly one event of
        the learned chunk shape is read by a byte scan (:mod:`users.chunkscan`); any other goes through the framer
        and :meth:`add`."""
        parse, add, idle = parser.feed, self.add, parser.idle
        fresh = idle()  # the framer holds nothing: only its feed changes that, so it is read after each feed

        def take(data: bytes, t: float) -> None:
            nonlocal fresh
            framed = self._framed
            if fresh and framed is not None and (m := framed.match(data)) is not None:
                self._scanned(m[0], m[1], t)
                return
            events = parse(data)
            fresh = idle()
            if events:
                add(events, t)

        return take

    def _scanned(self, text: str, ct: int, t: float) -> None:
        """A chunk of the learned shape: what :meth:`add` does with it, without decoding it."""
        k = ct - self.usage_tokens
        self.usage_tokens = ct
        field = self._shape.field
        if self.kept is not None and text and (field == "content" or field == "text"):
            self.kept.append(text)
        if k > 0:
            self.chunk_times.append(t)
            self.chunk_tokens.append(k)
            self.output_tokens += k
            if self.t_answer is None:
                if field == "content" or field == "text":
                    self._stage_texts(None, text, k, t)
                else:
                    self._stage_texts(text or None, None, k, t)

    def _learn(self, p: bytes, obj: dict) -> None:
        shape = ChunkShape.learn(p, obj) if self.prompt_tokens is not None else None
        if shape is None:  # a shape learned before stays: a chunk is matched against it or decoded
            self._misses += 1
            return
        self._shape, self._framed = shape, shape.framed(b"data: ", b"\n\n")

    def add(self, payloads: list[bytes], t: float) -> None:
        """Account the event payloads that arrived in one read at time ``t``."""
        for p in payloads:
            shape = self._shape
            if shape is not None and (m := shape.match(p)) is not None:
                self._scanned(m[0], m[1], t)
                continue
            try:
                obj = _loads(p)
                choices = obj["choices"]
            except (_JSONError, KeyError, TypeError):
                self._without_choices(p)  # [DONE], keep-alive, error object, usage without choices, junk
                continue
            usage = obj.get("usage")
            if usage is not None and (ct := usage.get("completion_tokens")) is not None:
                if self.prompt_tokens is None:
                    self.prompt_tokens = usage.get("prompt_tokens")
                if not choices:  # the final usage chunk: the total, no token of its own
                    self.usage_tokens = ct
                    self.final = obj
                    continue
                self.continuous = True
                k = ct - (self.usage_tokens or 0)
                self.usage_tokens = ct
                c0 = choices[0]
                if self._misses < _LEARN_MISSES:
                    self._learn(p, obj)
            elif choices:
                c0 = choices[0]
                k = self._by_text(c0)
            else:
                continue
            if self.kept is not None:
                d = c0.get("delta")
                if (text := d.get("content") if d is not None else c0.get("text")):
                    self.kept.append(text)
            if (reason := c0.get("finish_reason")) is not None:
                self.finish_reason = reason
            if k > 0:
                self.chunk_times.append(t)
                self.chunk_tokens.append(k)
                self.output_tokens += k
                if self.t_answer is None:  # reasoning precedes the answer: nothing more to do per chunk after
                    self._stage(c0, k, t)

    def _stage(self, c0: dict, k: int, t: float) -> None:
        """Reasoning or answer, for a token-bearing chunk before the first answer token."""
        d = c0.get("delta")
        if d is not None:
            self._stage_texts(d.get("reasoning_content") or d.get("reasoning"), d.get("content"), k, t)
        else:
            self._stage_texts(None, c0.get("text"), k, t)

    def _stage_texts(self, r: str | None, a: str | None, k: int, t: float) -> None:
        """:meth:`_stage` given the chunk's reasoning text ``r`` and answer text ``a``."""
        if r and self.think == _INSIDE:  # a reasoning parser is at work: content is the answer
            self.think = _NO_TAG
        if a and (self.think == _INSIDE or (self.think == _NO_TAG and a.lstrip().startswith("<think>"))):
            end = a.find("</think>")
            if end < 0:
                self.think, r, a = _INSIDE, a, None
            else:
                self.think, r, a = _CLOSED, a[: end + 8], a[end + 8 :]
                if not a.strip():
                    a = None
        if r:
            if self.t_reason is None:
                self.t_reason = t
                self.reasoning += self.pending
            if a:
                self.t_answer = t
                self.split = (k, a)
            else:
                self.reasoning += k
        elif a and (self.t_reason is None or a.strip()):  # after reasoning, blank lines are not the answer yet
            self.t_answer = t
        elif self.t_reason is not None:
            self.reasoning += k
        else:
            self.pending += k

    @property
    def finished(self) -> bool:
        """A ``finish_reason`` seen."""
        return self.finish_reason is not None

    def reasoning_tokens(self, count_text: Callable[[str], int] | None) -> int:
        """Reasoning tokens of the stream: the split chunk's reasoning share is its k minus the answer text's
        tokens (``count_text``; without it, a share by characters)."""
        if self.split is None:
            return self.reasoning
        k, answer = self.split
        n = count_text(answer) if count_text is not None else round(k * len(answer) / max(len(answer) + 8, 1))
        return self.reasoning + max(k - max(n, 1), 0)

    def _without_choices(self, p: bytes) -> None:
        """The rare payloads: anything but a JSON object with ``choices``."""
        if p == b"[DONE]":
            self.done = True
            return
        if not p.strip():
            return
        try:
            obj = _loads(p)
        except _JSONError:
            raise StreamFault("bad_chunk", f"not JSON: {quote(p)}") from None
        if not isinstance(obj, dict):
            raise StreamFault("bad_chunk", f"not a JSON object: {quote(p)}")
        if obj.get("error") is not None or obj.get("object") == "error":
            raise StreamFault("server_error", quote(p))
        usage = obj.get("usage")
        if not isinstance(usage, dict) or usage.get("completion_tokens") is None:
            raise StreamFault("bad_chunk", f"no choices: {quote(p)}")
        self.usage_tokens = usage["completion_tokens"]
        self.final = obj
        if self.prompt_tokens is None:
            self.prompt_tokens = usage.get("prompt_tokens")

    def _by_text(self, c0: dict) -> int:
        """Token-bearing by content when the chunk has no usage: k = 1 for non-empty text."""
        delta = c0.get("delta")
        if delta is not None:
            text = next((delta[f] for f in _TEXT_FIELDS if delta.get(f)), None)
        else:
            text = c0.get("text") or None
        if not isinstance(text, str):
            return 0
        self.texts.append(text)
        if self.continuous:  # a chunk without usage in a continuous stream: keep the delta base in step
            self.usage_tokens = (self.usage_tokens or 0) + 1
        return 1
