"""The failures a request can end in, as exceptions carrying their error kind (users.result.ERROR_KINDS).

    raise LLMError("http_5xx", f"HTTP 500: {quote(body, strip=True)}")   # str(e) == "http_5xx: HTTP 500: ..."
    raise StreamFault("bad_chunk", f"not JSON: {quote(payload)}")        # found in the answer's content

The client turns either into a failed :class:`~users.result.GenerationResult` whose message is ``str(e)``.
"""

from __future__ import annotations

_QUOTE = 300


class LLMError(Exception):
    """The exception a failed request carries in its Locust event: message ``<kind>: <detail>``."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail

    def __repr__(self) -> str:  # Locust's failure table shows repr(); keep it the plain message
        return str(self)


class StreamFault(LLMError):
    """A failure found inside the answer (``bad_chunk`` or ``server_error``), raised by a chunk tally or
    an adapter's parse of a whole answer."""


def quote(raw: bytes, *, strip: bool = False) -> str:
    """A server's bytes for an error message, cut at 300 characters."""
    s = raw.decode("utf-8", "replace")
    if strip:
        s = s.strip()
    return s if len(s) <= _QUOTE else s[:_QUOTE] + "…"
