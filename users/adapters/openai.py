"""The OpenAI answer shape (vLLM's OpenAI-compatible server): :data:`OPENAI`.

A stream is SSE events of ``{"choices": [...], "usage": {...}}`` chunks classified by
:class:`~users.tally.StreamTally`, ending with ``data: [DONE]``; a proper end also carried a
``finish_reason``. A whole answer is one JSON object with ``choices`` and ``usage``, or an error object.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson

from users.adapters.base import Answer, WholeAnswer
from users.faults import StreamFault, quote
from users.inband import server_record
from users.tally import StreamTally

STREAM_OPTIONS = {"include_usage": True, "continuous_usage_stats": True}
"""Ask for usage on every chunk: k, the tokens of a chunk, is the usage delta."""


class OpenAIAnswer(Answer):
    tally = StreamTally

    def stream_missing(self, tally: StreamTally) -> tuple[str, ...]:
        """Both ``[DONE]`` and a ``finish_reason`` are required."""
        return tuple(m for m, seen in (("[DONE]", tally.done), ("finish_reason", tally.finished)) if not seen)

    def parse_whole(self, raw: bytes, count_text: Callable[[str], int] | None) -> WholeAnswer:
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
        parts = [_sides(c) for c in choices]
        if output is None:
            output = sum(count_text(r) + count_text(a) for r, a in parts) if count_text else 0
            source = "tokenizer"
        return WholeAnswer(output, usage.get("prompt_tokens"), source, _reasoning_tokens(parts, output, count_text),
                           choices[0].get("finish_reason"), server_record(obj))


def _sides(choice: dict) -> tuple[str, str]:
    """(reasoning text, answer text) of one choice: the message's ``reasoning_content`` / ``reasoning``, or
    its content (the completion's text) split at ``</think>`` when it opens with ``<think>``."""
    msg = choice.get("message") or {}
    text = choice.get("text") or msg.get("content") or ""
    reasoning = msg.get("reasoning_content") or msg.get("reasoning") or ""
    if not reasoning and (text.lstrip().startswith("<think>") or "</think>" in text):  # R1's template opens it
        end = text.find("</think>")
        if end < 0:
            return text, ""
        return text[: end + 8], text[end + 8 :]
    return reasoning, text


def _reasoning_tokens(parts: list[tuple[str, str]], output: int, count_text: Callable[[str], int] | None) -> int:
    """Output tokens of the reasoning: all of them when no choice has answer text (vLLM 0.32's
    ``completion_tokens_details.reasoning_tokens`` says 0 there: not used); else the reasoning text counted by
    ``count_text`` (without it, a share of ``output`` by characters)."""
    if not any(r for r, _a in parts):
        return 0
    if not any(a.strip() for _r, a in parts):
        return output
    if count_text is not None:
        return min(sum(count_text(r) for r, _a in parts if r), output)
    chars_r, chars = sum(len(r) for r, _a in parts), sum(len(r) + len(a) for r, a in parts)
    return round(output * chars_r / chars)


OPENAI = OpenAIAnswer()
