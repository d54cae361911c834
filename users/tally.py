"""Classify the events of one OpenAI-style stream into token-bearing chunks (DESIGN.md definitions).

A chunk bears tokens when its ``usage.completion_tokens`` rose (vLLM's ``continuous_usage_stats``);
without usage in the chunk, when its ``content`` / ``reasoning_content`` / ``reasoning`` / ``text`` is
non-empty (k = 1). The role-only first chat chunk, empty chunks and the final usage chunk
(``choices: []``) bear none. k, the tokens of a chunk, is the usage delta.

    t = StreamTally(prompt_tokens_client=512)
    t.add([b'{"choices":[...],"usage":{...}}', b"[DONE]"], arrival_time)
    t.times, t.ks, t.out, t.done, t.finished, t.usage_tokens, t.prompt_tokens

Pure: no I/O, no clock. ``add`` raises :class:`StreamFault` (``bad_chunk`` or ``server_error``).
Also the object :mod:`users.inflight` reads: ``prompt`` and ``out`` (tokens so far).
"""

from __future__ import annotations

import orjson

_loads = orjson.loads
_JSONError = orjson.JSONDecodeError
_TEXT_FIELDS = ("content", "reasoning_content", "reasoning")


class StreamFault(Exception):
    """A failure found inside a stream; ``kind`` is one of users.result.ERROR_KINDS."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


class StreamTally:
    __slots__ = (
        "prompt", "out", "times", "ks", "done", "finished", "ct", "continuous", "prompt_tokens", "texts",
        "last", "owner", "live", "stalled",
    )  # fmt: skip

    def __init__(self, prompt_tokens_client: int = 0) -> None:
        self.prompt = prompt_tokens_client
        """Prompt tokens (client count) — for the in-flight KV estimate."""
        self.out = 0
        """Output tokens so far (sum of k)."""
        self.times: list[float] = []
        self.ks: list[int] = []
        self.done = False
        """``data: [DONE]`` seen."""
        self.finished = False
        """A ``finish_reason`` seen."""
        self.ct: int | None = None
        """Last ``usage.completion_tokens`` seen (None: the server sent no usage)."""
        self.continuous = False
        self.prompt_tokens: int | None = None
        self.texts: list[str] = []
        """Text of chunks counted without usage (for a tokenizer count when the server sends no usage)."""
        self.last = 0.0
        """When the last byte arrived (set by the client; read by users.watchdog)."""
        self.owner = None
        """The greenlet reading this request (set by the client), and whether it is still reading."""
        self.live = False
        self.stalled = False

    def add(self, payloads: list[bytes], t: float) -> None:
        """Account the event payloads that arrived in one read at time ``t``."""
        for p in payloads:
            if p[:1] != b"{":
                if p == b"[DONE]":
                    self.done = True
                elif p.strip():
                    raise StreamFault("bad_chunk", f"not JSON: {_quote(p)}")
                continue
            try:
                obj = _loads(p)
            except _JSONError:
                raise StreamFault("bad_chunk", f"not JSON: {_quote(p)}") from None
            choices = obj.get("choices")
            if choices is None:
                self._no_choices(obj, p)
            k = 0
            usage = obj.get("usage")
            if usage:
                ct = usage.get("completion_tokens")
                if ct is not None:
                    if choices:
                        self.continuous = True
                        k = ct - (self.ct or 0)
                    self.ct = ct
                pt = usage.get("prompt_tokens")
                if pt is not None:
                    self.prompt_tokens = pt
            if choices:
                c0 = choices[0]
                if c0.get("finish_reason") is not None:
                    self.finished = True
                if usage is None or usage.get("completion_tokens") is None:
                    k = self._by_text(c0)
            if k > 0:
                self.times.append(t)
                self.ks.append(k)
                self.out += k

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
            self.ct = (self.ct or 0) + 1
        return 1

    @staticmethod
    def _no_choices(obj: dict, p: bytes) -> None:
        err = obj.get("error")
        if err is not None or obj.get("object") == "error":
            raise StreamFault("server_error", _quote(p))
        if "usage" not in obj:
            raise StreamFault("bad_chunk", f"no choices: {_quote(p)}")


def _quote(p: bytes, limit: int = 300) -> str:
    s = p.decode("utf-8", "replace")
    return s if len(s) <= limit else s[:limit] + "…"
