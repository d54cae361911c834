"""The test servers' renderer of vLLM's streaming events: pre-rendered byte pieces, so a token event is a few
concatenations.

The shapes are vLLM's OpenAI server's (``data: {json}\\n\\n`` events, then ``data: [DONE]``):

completion chunk ``{"id","object":"text_completion","created","model","choices":[{"index","text",
"logprobs":null,"finish_reason","stop_reason":null}]}``; chat chunk ``{"id","object":"chat.completion.chunk",
"created","model","choices":[{"index","delta":{"content"},"logprobs":null,"finish_reason"}]}`` after a
first role-only chunk ``delta: {"role":"assistant","content":""}``. ``continuous_usage_stats`` adds
``usage`` to every chunk; ``include_usage`` adds a last chunk with ``"choices": []`` and ``usage``.

    f = Frames("chat", "chatcmpl-1", 1700000000, "m")
    f.token(f.choice_prefix(0), b" the", None)
    # -> b'data: {"id":"chatcmpl-1",...,"delta":{"content":" the"},...}\\n\\n'
"""

from __future__ import annotations

import orjson

DONE = b"data: [DONE]\n\n"
KINDS = {"completion": ("text_completion", "cmpl-"), "chat": ("chat.completion.chunk", "chatcmpl-")}


def usage_bytes(prompt: int, completion: int) -> bytes:
    return b'"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}' % (
        prompt, prompt + completion, completion)


class Frames:
    """Byte templates for one streamed response."""

    __slots__ = ("kind", "head", "open", "tails", "object_head", "reasoning_open", "both")

    def __init__(self, kind: str, rid: str, created: int, model: str, reasoning_field: str = "reasoning_content"):
        obj = KINDS[kind][0]
        meta = orjson.dumps({"id": rid, "object": obj, "created": created, "model": model})[:-1]
        self.kind = kind
        self.object_head = b"data: " + meta
        self.head = self.object_head + b',"choices":[{"index":'
        if kind == "completion":
            self.open = b',"text":"'
            self.tails = {
                None: b'","logprobs":null,"finish_reason":null,"stop_reason":null}]',
                "length": b'","logprobs":null,"finish_reason":"length","stop_reason":null}]',
                "stop": b'","logprobs":null,"finish_reason":"stop","stop_reason":null}]',
            }
        else:
            self.open = b',"delta":{"content":"'
            self.reasoning_open = b',"delta":{"' + reasoning_field.encode() + b'":"'
            self.both = b'","content":"'
            self.tails = {
                None: b'"},"logprobs":null,"finish_reason":null}]',
                "length": b'"},"logprobs":null,"finish_reason":"length","stop_reason":null}]',
                "stop": b'"},"logprobs":null,"finish_reason":"stop","stop_reason":null}]',
            }

    def choice_prefix(self, index: int) -> bytes:
        return self.head + b"%d" % index + self.open

    def reasoning_prefix(self, index: int) -> bytes:
        """A chat chunk whose delta carries reasoning (vLLM's reasoning parser): ``{"reasoning_content":"``."""
        return self.head + b"%d" % index + self.reasoning_open

    def token(self, prefix: bytes, text: bytes, finish: str | None, usage: bytes | None = None) -> bytes:
        if usage is None:
            return prefix + text + self.tails[finish] + b"}\n\n"
        return prefix + text + self.tails[finish] + b"," + usage + b"}\n\n"

    def role(self, index: int, usage: bytes | None = None) -> bytes:
        body = self.head + b'%d,"delta":{"role":"assistant","content":""},' % index
        body += b'"logprobs":null,"finish_reason":null}]'
        return body + (b"," + usage if usage is not None else b"") + b"}\n\n"

    def usage_event(self, prompt: int, completion: int, details: dict | None = None,
                    metrics: dict | None = None) -> bytes:
        """The last chunk (``include_usage``); with ``--enable-prompt-tokens-details`` its usage has
        ``prompt_tokens_details``, with ``--enable-per-request-metrics`` the chunk has vLLM's ``metrics`` object."""
        usage = usage_bytes(prompt, completion)
        if details is not None:
            usage = usage[:-1] + b',"prompt_tokens_details":' + orjson.dumps(details) + b"}"
        tail = b',"metrics":' + orjson.dumps(metrics) if metrics is not None else b""
        return self.object_head + b',"choices":[],' + usage + tail + b"}\n\n"
