"""The OpenAI answer shape (vLLM's OpenAI-compatible server): :data:`OPENAI`.

A stream is SSE events of ``{"choices": [...], "usage": {...}}`` chunks classified by
:class:`~users.tally.StreamTally`, ending with ``data: [DONE]``; a proper end also carried a
``finish_reason``. A whole answer is one JSON object with ``choices`` and ``usage``, or an error object.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson

from users.adapters.base import Answer, Whole
from users.faults import StreamFault, quote
from users.tally import StreamTally

STREAM_OPTIONS = {"include_usage": True, "continuous_usage_stats": True}
"""Ask for usage on every chunk: k, the tokens of a chunk, is the usage delta."""


class OpenAIAnswer(Answer):
    tally = StreamTally

    def stream_missing(self, tally: StreamTally) -> tuple[str, ...]:
        """Both ``[DONE]`` and a ``finish_reason`` are required."""
        return tuple(m for m, seen in (("[DONE]", tally.done), ("finish_reason", tally.finished)) if not seen)

    def parse_whole(self, raw: bytes, count_text: Callable[[str], int] | None) -> Whole:
        """Output tokens from ``usage.completion_tokens``, else the choices' text counted by ``count_text``
        (0 without it); prompt tokens from ``usage.prompt_tokens``."""
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise StreamFault("bad_chunk", f"response is not JSON: {quote(raw, strip=True)}") from None
        choices = obj.get("choices") if isinstance(obj, dict) else None
        if not choices:
            if isinstance(obj, dict) and (obj.get("error") is not None or obj.get("object") == "error"):
                raise StreamFault("server_error", quote(raw, strip=True))
            raise StreamFault("bad_chunk", f"response has no choices: {quote(raw, strip=True)}")
        usage = obj.get("usage") or {}
        output = usage.get("completion_tokens")
        source = "usage"
        if output is None:
            texts = [c.get("text") or (c.get("message") or {}).get("content") or "" for c in choices]
            output = sum(count_text(t) for t in texts) if count_text else 0
            source = "tokenizer"
        return Whole(output, usage.get("prompt_tokens"), source)


OPENAI = OpenAIAnswer()
