"""The two halves of an API adapter: :class:`Adapter` (what a user sends, where) and :class:`Answer`
(how the client reads what comes back).

An adapter is one endpoint: its path, whether it streams, whether its prompts are chat messages, how
many prompts a request carries, and the body it builds from a :class:`~users.request.RequestInput`.
Its ``answer`` reads the response: the chunk tally class that classifies a stream's events, the
end-of-stream rule, and the parse of a whole (non-streaming) answer.

    class Embeddings(Adapter):
        name, path, stream = "embeddings", "/v1/embeddings", False
        answer = MY_ANSWER
        def model_input(self, texts): return list(texts)
        def body(self, inp): return {"input": inp.model_input, **inp.sampling}
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import NamedTuple

from users.request import RequestInput
from users.result import ServerRecord
from users.tally import StreamTally


class WholeAnswer(NamedTuple):
    """What a whole (non-streaming) answer says."""

    output_tokens: int
    prompt_tokens: int | None
    """None: the answer did not say (the client's count is used)."""
    token_source: str
    """``usage`` (the server's count) or ``tokenizer`` (counted on the client)."""
    reasoning_tokens: int = 0
    """Output tokens of the reasoning (0 without)."""
    finish_reason: str | None = None
    """Why generation stopped (``stop``, ``length``, ...; a batch: its first choice's); None: not said."""
    server: ServerRecord | None = None
    """The server's in-band record (:mod:`users.inband`); None: the answer carried none."""


class Answer(ABC):
    """How to read an endpoint's answer. Instances are shared by every request: keep them stateless."""

    tally: type[StreamTally] = StreamTally
    """The stream's chunk classifier, built once per request as ``tally(prompt_tokens_client)``. The client
    calls its ``add(payloads, t)`` once per read with the ``data`` payloads the read completed (the hot path:
    classify inline, no call per payload) and reads ``chunk_times``, ``chunk_tokens``, ``output_tokens`` (so far),
    ``usage_tokens`` (the server's output total or None), ``prompt_tokens`` (server's or None), ``texts`` (for a
    tokenizer count), ``client_prompt_tokens`` and ``final`` (the last usage chunk, whose in-band record
    :mod:`users.inband` reads); it sets ``think`` to :attr:`users.tally.Think.INSIDE` before the first read when
    the chat template opened ``<think>`` in the prompt. It raises
    :class:`~users.faults.StreamFault` for a bad or error chunk."""

    @abstractmethod
    def stream_missing(self, tally: StreamTally) -> tuple[str, ...]:
        """End-of-stream rule: the end markers the stream did not carry (empty: it ended properly).
        The client fails the request as ``stream_cut: stream ended without <a> and <b> after N tokens``."""

    @abstractmethod
    def parse_whole(self, raw: bytes, count_text: Callable[[str], int] | None) -> WholeAnswer:
        """Parse a whole answer (HTTP 200 body); raise :class:`~users.faults.StreamFault` (``bad_chunk``,
        ``server_error``) for one that carries no result. ``count_text`` counts output text on the client
        when the server sends no usage (None: no tokenizer)."""


class Adapter(ABC):
    """One endpoint. Subclass, set the class attributes, implement ``model_input`` and ``body``, register
    an instance (:func:`users.adapters.register`); a user class names it (``adapter = "<name>"``)."""

    name: str = ""
    """Registry key, what user classes name."""
    path: str = ""
    """Endpoint path, e.g. ``/v1/chat/completions`` (after the route's base path, if any)."""
    stream: bool = True
    """Ask for a streamed (SSE) answer and time each chunk; else read the whole body."""
    chat: bool = False
    """Chat messages (the chat template's tokens count in the prompt) rather than a raw prompt."""
    batched: bool = False
    """Carry ``--batch-size`` prompts per request, else one."""
    answer: Answer
    """How to read the answer."""

    @property
    def request_name(self) -> str:
        """The Locust request name: endpoint and mode."""
        return f"POST {self.path} [{'stream' if self.stream else 'batch'}]"

    @abstractmethod
    def model_input(self, texts: tuple[str, ...]) -> object:
        """The body's model input for these prompt texts (messages, a prompt, a list of prompts): what the
        route fingerprint is taken of."""

    @abstractmethod
    def body(self, inp: RequestInput) -> dict:
        """The JSON body of one request (a new dict each call)."""
