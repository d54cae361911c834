"""A pure, incremental Server-Sent Events framer: bytes in, ``data`` payloads out.

It follows the SSE spec (WHATWG HTML "server-sent events") for what an LLM stream needs: events end
with a blank line; lines end with CRLF, LF or CR (also when a CRLF is split across two reads);
``:`` lines are comments (keep-alives such as ``: ping``); several ``data:`` lines join with ``\\n``;
an event without data (a comment-only block) is not dispatched. Payloads stay ``bytes`` and are never
decoded here, so a UTF-8 character split across reads is reassembled before anyone decodes it.
Event names (``event:``), ``id:`` and ``retry:`` are read and dropped: OpenAI-style streams do not
use them.

The common case (``data: {...}\\n\\n`` with LF line ends) costs one ``bytes.find`` and one slice per
event; everything else takes the general path.

    p = SSEParser()
    p.feed(b'data: {"a"')          # -> []
    p.feed(b': 1}\\n\\ndata: [DONE]\\n\\n')  # -> [b'{"a": 1}', b'[DONE]']
"""

from __future__ import annotations

from users.faults import StreamFault, quote

__all__ = ["MAX_EVENT", "SSEParser"]

MAX_EVENT = 1 << 20
"""Bytes one event may hold before its blank line: a chunk of an LLM stream is a few hundred bytes."""


class SSEParser:
    """Incremental framer; one instance per stream. ``feed`` returns the payloads of completed events."""

    __slots__ = ("_buf", "_cr", "comments")

    def __init__(self) -> None:
        self._buf = b""
        self._cr = False
        """The previous read ended with CR: a LF opening the next read belongs to that CRLF."""
        self.comments = 0
        """Comment lines seen (keep-alives), for diagnostics."""

    def idle(self) -> bool:
        """No event begun and no CR pending: the next read starts afresh (a read holding exactly one whole event
        may then be taken without the framer)."""
        return not self._buf and not self._cr

    @property
    def pending(self) -> int:
        """Bytes held for an event that has not ended yet."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        if self._cr or b"\r" in data:
            data = self._normalize(data)
        elif not self._buf and data[:6] == b"data: " and data.find(b"\n", 6) == len(data) - 2 and data[-1:] == b"\n":
            return [data[6:-2]]  # the common read: exactly one complete single-line event
        buf = self._buf + data if self._buf else data
        out: list[bytes] = []
        start = 0
        find = buf.find
        while (end := find(b"\n\n", start)) >= 0:
            block = buf[start:end]
            start = end + 2
            if block[:6] == b"data: " and b"\n" not in block:
                out.append(block[6:])
            else:
                payload = self._event(block)
                if payload is not None:
                    out.append(payload)
        self._buf = buf = buf[start:] if start else buf
        if len(buf) > MAX_EVENT:  # a line that never ends (a 4 MiB "chunk", a server's garbage): bounded memory
            detail = f"an SSE event over {MAX_EVENT >> 20} MiB without its end: {quote(buf[:60])}"
            raise StreamFault("bad_chunk", detail)
        return out

    def close(self) -> list[bytes]:
        """End of stream: a last event whose lines are complete but which lacks the blank line is kept
        (lenient); a partial line is dropped, as the spec says."""
        buf, self._buf = self._buf, b""
        if not buf.endswith(b"\n"):
            return []
        payload = self._event(buf[:-1])
        return [payload] if payload is not None else []

    def _normalize(self, data: bytes) -> bytes:
        if self._cr and data[:1] == b"\n":
            data = data[1:]
        self._cr = data[-1:] == b"\r"
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    def _event(self, block: bytes) -> bytes | None:
        """General path: one event's lines (no blank line inside except leading ones)."""
        parts: list[bytes] = []
        for line in block.lstrip(b"\n").split(b"\n"):
            if not line or line[:1] == b":":
                self.comments += line[:1] == b":"
                continue
            field, colon, value = line.partition(b":")
            if colon and value[:1] == b" ":
                value = value[1:]
            if field == b"data":
                parts.append(value)
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else b"\n".join(parts)
