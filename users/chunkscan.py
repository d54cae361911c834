"""The per-token chunk of an OpenAI-style stream read by a byte scan instead of a JSON decode: :class:`ChunkShape`.

Within one stream, vLLM's token-bearing chunks differ only in the text of the delta and the numbers of the usage:

    {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1796203049,"model":"tiny","choices":[{"index":0,
     "delta":{"content":" of"},"logprobs":null,"finish_reason":null,"token_ids":null}],"usage":{"prompt_tokens":16,
     "total_tokens":18,"completion_tokens":2,"completion_tokens_details":null}}

The tally decodes a chunk whole (``orjson.loads``) and, when it is such a chunk, learns its shape from it
(:meth:`ChunkShape.learn`): the bytes before the text string (the *head*: id, model, index, the delta's one key),
and the bytes after it (the *tail*) with every digit read as ``0``. A later chunk has that shape when it starts with
the same head, its text is a valid JSON string (decoded by orjson: escapes, unicode, control characters are judged
as a full decode judges them), and its tail equals the learned tail digit for digit-position — the same keys in the
same order and nesting, the same nulls, the same finish_reason (null), numbers of the same widths. Then the
chunk's ``usage.completion_tokens`` is the digits at the learned place and its text is the string: exactly what
the full decode would have found (a property test compares the two over generated streams). Anything else —
another key, a finish_reason, the usage chunk (``choices: []``: the general path reads everything the last chunk
carries), a number that grew a digit, spaces, an error object, junk — is not matched and takes the full decode,
which may learn the new shape. The scan does not re-validate digit runs: a number written with a leading zero
(invalid JSON) inside a matched tail is read as its value where a full decode would refuse the chunk.

    shape = ChunkShape.learn(payload, obj)          # None: not a single-text-field chunk with continuous usage
    shape.match(payload)                            # (text, completion_tokens) or None

Pure bytes work: no I/O, no clock, no state beyond the learned shape.
"""

from __future__ import annotations

import orjson

__all__ = ["TEXT_FIELDS", "ChunkShape"]

TEXT_FIELDS = ("content", "reasoning_content", "reasoning")
"""The delta's text fields (answer, then vLLM's two names for reasoning)."""
_ZERO = bytes.maketrans(b"123456789", b"000000000")
_loads = orjson.loads
_JSONError = orjson.JSONDecodeError
_CT = b'"completion_tokens":'


def _string_end(p: bytes, i: int) -> int:
    """Index of the quote closing the JSON string whose text starts at ``i``; -1 when there is none."""
    j = p.find(b'"', i)
    while j > 0 and p[j - 1] == 92:  # a backslash before it: escaped unless the backslashes pair up
        n = 1
        while j - 1 - n >= 0 and p[j - 1 - n] == 92:
            n += 1
        if n % 2 == 0:
            break
        j = p.find(b'"', j + 1)
    return j


class ChunkShape:
    """One stream's token-bearing chunk shape, learned from a fully decoded chunk."""

    __slots__ = ("head", "field", "tail", "ct_at", "ct_end", "_head_len")

    def __init__(self, head: bytes, field: str, tail: bytes, ct_at: int, ct_end: int) -> None:
        self.head = head
        """The bytes up to and including the text string's opening quote."""
        self.field = field
        """The text's key: ``content``, ``reasoning_content``, ``reasoning`` (a delta's), ``text`` (a completion's)."""
        self.tail = tail
        """The bytes after the text string's closing quote, digits read as ``0``."""
        self.ct_at, self.ct_end = ct_at, ct_end
        """Where ``usage.completion_tokens``'s digits lie in the tail."""
        self._head_len = len(head)

    @classmethod
    def learn(cls, p: bytes, obj: dict) -> ChunkShape | None:
        """The shape of payload ``p`` (``obj`` is its decode), or None when ``p`` is not one choice with one text
        field, no finish_reason, and an integer ``usage.completion_tokens`` written compactly, each key named once."""
        choices = obj.get("choices")
        usage = obj.get("usage")
        if not isinstance(choices, list) or len(choices) != 1 or not isinstance(usage, dict):
            return None
        ct = usage.get("completion_tokens")
        c0 = choices[0]
        if type(ct) is not int or ct < 0 or not isinstance(c0, dict) or c0.get("finish_reason") is not None:
            return None
        delta = c0.get("delta")
        if delta is not None:
            if not isinstance(delta, dict) or len(delta) != 1:
                return None
            (field, text), = delta.items()
            if field not in TEXT_FIELDS or p.count(b'"delta"') != 1:
                return None
            key = b'"delta":{"' + field.encode() + b'":"'
        else:
            field, text = "text", c0.get("text")
            key = b'"text":"'
        if not isinstance(text, str) or p.count(key) != 1 or p.count(_CT[:-1]) != 1:
            return None
        i = p.find(key) + len(key)
        j = _string_end(p, i)
        if j < 0:
            return None
        try:
            if _loads(p[i - 1 : j + 1]) != text:
                return None
        except _JSONError:
            return None
        tail = p[j + 1 :]
        at = tail.find(_CT)
        if at < 0:  # completion_tokens sits before the text: its digits would be taken as fixed
            return None
        at += len(_CT)
        end = at
        while end < len(tail) and 48 <= tail[end] <= 57:
            end += 1
        if end == at or int(tail[at:end]) != ct:
            return None
        return cls(p[:i], field, tail.translate(_ZERO), at, end)

    def framed(self, before: bytes, after: bytes) -> ChunkShape:
        """The same shape with ``before`` and ``after`` around the payload (no digits in either): an SSE event."""
        return ChunkShape(before + self.head, self.field, self.tail + after, self.ct_at, self.ct_end)

    def match(self, p: bytes) -> tuple[str, int] | None:
        """(text, usage.completion_tokens) of a payload of this shape; None for any other payload."""
        i = self._head_len
        if not p.startswith(self.head):
            return None
        j = p.find(b'"', i)
        if j > 0 and p[j - 1] == 92:  # an escaped quote inside the text (rare): the full scan
            j = _string_end(p, i)
        if j < 0:
            return None
        tail = p[j + 1 :]
        if tail.translate(_ZERO) != self.tail:
            return None
        try:
            text = _loads(p[i - 1 : j + 1])
        except _JSONError:
            return None
        return text, int(tail[self.ct_at : self.ct_end])
