"""The frozen per-request record every measurement comes from (the README's "What the figures mean").

A user builds exactly one :class:`GenerationResult` per LLM request and hands it to the recorder;
nothing downstream re-reads the stream. All times are ``time.perf_counter()`` seconds.

    r = GenerationResult(meta, ..., chunk_times=np.array([...]), chunk_tokens=np.array([...]))
    r.meta.stage, r.meta.version, r.meta.request_id, ...      # the request's labels: one RequestMeta
    r.ttft_s, r.ttst_s, r.ttfa_s, r.thinking_s, r.answer_span_s, r.e2e_s, r.tpot_s, r.decode_span_s
    r.itl_samples(), r.inter_chunk_samples(), r.reasoning_tokens, r.answer_tokens
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Error kinds (README, docs/summary.schema.json); a failed result carries exactly one.
ERROR_KINDS = (
    "http_4xx",
    "http_5xx",
    "http_429",
    "http_3xx",  # a redirect (not followed)
    "timeout",
    "connection",
    "stream_cut",
    "bad_chunk",
    "empty",
    "server_error",  # an error object inside an HTTP 200 stream
)

_EMPTY_F = np.zeros(0, dtype=np.float64)
_EMPTY_I = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class RequestMeta:
    """The labels of one request: set where each is known (drawn with the input, completed once by the user that
    sends it) and then carried by reference, ``RequestInput.meta`` -> ``Call.meta`` -> ``GenerationResult.meta``;
    nothing copies them field by field. Every field is a column of the request log (telemetry/outputs/requestlog.py
    walks them), so a new label is one field here (with a default) plus the line that sets it."""

    stage: str = "main"
    """Name of the load stage the request was sent in (``"main"`` without a shape)."""
    max_tokens: int = 0
    """The drawn output length (``max_tokens`` in the body)."""
    batch_size: int = 1
    """Prompts carried by this request (BatchCompletionUser), else 1."""
    version: str | None = None
    """Route version picked by the request fingerprint (``--route-table``), else None."""
    turn: int | None = None
    """The turn of its conversation (1, 2, ...; ``--turns``), None for a request that stands alone."""
    user_class: str = ""
    """Locust user class name, e.g. ``StreamingChatUser``."""
    name: str = ""
    """The Locust request name (endpoint and mode), e.g. ``POST /v1/chat/completions [stream]``."""
    request_id: str | None = None
    """The request's ``X-Request-Id`` (``<run>-<worker>-<sequence>``, :mod:`users.tracing`); its trace id is
    ``users.tracing.trace_id_of(request_id)``. None for a request built without one."""
    prefix_group: int | None = None
    """The shared system prompt the request starts with (``--shared-prefix-len``: its group of
    ``--prefix-groups``), None without one: which requests could hit the same prefix-cache blocks."""


@dataclass(frozen=True, slots=True)
class ServerRecord:
    """The server's own account of one request, in-band: vLLM's ``metrics`` object (``--enable-per-request-metrics``)
    on the last streamed chunk or a whole answer, its ``speculative_decoding`` part
    (``--per-request-spec-decode-metrics``) and ``usage.prompt_tokens_details.cached_tokens``
    (``--enable-prompt-tokens-details``). Seconds; None where the server did not say. vLLM's clocks: queue = engine
    arrival to first scheduled, TTFT = first scheduled to first token (queue excluded), generation = first token to
    last token (:mod:`users.inband` reads it)."""

    ttft_s: float | None = None
    queue_s: float | None = None
    generation_s: float | None = None
    mean_itl_s: float | None = None
    tokens_per_second: float | None = None
    cached_tokens: int | None = None
    """Prompt tokens served from the prefix cache."""
    spec_steps: int | None = None
    """Verify steps that checked drafts (vLLM's ``num_spec_steps``; the engine's ``num_drafts``)."""
    spec_drafted: int | None = None
    """Draft tokens proposed."""
    spec_accepted: int | None = None
    """Draft tokens accepted (the bonus token not included)."""
    spec_accepted_per_position: tuple[int, ...] = ()
    """Steps whose draft was accepted at least up to position i (0-based), from the acceptance histogram."""

    @property
    def server_e2e_s(self) -> float | None:
        """Queue + TTFT + generation: engine arrival to last token."""
        parts = (self.queue_s, self.ttft_s, self.generation_s)
        return None if any(p is None for p in parts) else sum(parts)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class GenerationResult:
    """One LLM request, timed on the client."""

    meta: RequestMeta
    """The request's labels (stage, version, turn, user class, request id, ...), shared with its Call."""
    ok: bool
    error_kind: str | None
    """One of :data:`ERROR_KINDS` when not ok."""
    error_message: str | None
    t0: float
    """Start: just before the request was written; in open-loop mode the scheduled send time."""
    t_sent: float
    """When the request was actually written (== t0 in closed loop)."""
    t_end: float
    """End of stream (``[DONE]`` or body end), or of the failure."""
    chunk_times: np.ndarray = field(default_factory=lambda: _EMPTY_F)
    """Arrival times of the token-bearing chunks, in order."""
    chunk_tokens: np.ndarray = field(default_factory=lambda: _EMPTY_I)
    """Tokens carried by each token-bearing chunk (k >= 1)."""
    output_tokens: int = 0
    prompt_tokens: int = 0
    token_source: str = "usage"
    """``usage`` when the server's usage was read, ``tokenizer`` when counted on the client."""
    prompt_tokens_client: int | None = None
    """The client tokenizer's prompt count (for the client/server mismatch ratio)."""
    wall_start: float = 0.0
    """time.time() at t0, for labelling only."""
    t_reasoning: float | None = None
    """Arrival of the first token-bearing chunk of reasoning (``reasoning_content`` / ``reasoning`` / inside
    ``<think>``); None when the answer carried no reasoning."""
    t_answer: float | None = None
    """Arrival of the first chunk with answer text (``content`` outside ``<think>``); None: no answer text came."""
    reasoning_tokens: int = 0
    """Output tokens of the reasoning (the continuous-usage deltas of its chunks; 0 without reasoning)."""
    finish_reason: str | None = None
    """The answer's ``finish_reason`` (``stop``, ``length``, ...; a streamed answer: the last one its chunks said; a
    batch: its first choice's); None when the server said none (a cut stream, an error)."""
    prompt_build_s: float | None = None
    """Client time spent building the request before t0, on the users' event loop: drawing the lengths,
    synthesizing and tokenizing the prompt, the route, serializing the body (``users.base.LLMUser.send``); not part
    of TTFT. None when not measured."""
    server: ServerRecord | None = None
    """The server's in-band record of the request (None: the answer carried none)."""

    @property
    def ttft_s(self) -> float | None:
        return float(self.chunk_times[0] - self.t0) if len(self.chunk_times) else None

    @property
    def ttst_s(self) -> float | None:
        """Time to second token: the second token-bearing chunk's arrival minus the first's (None with fewer)."""
        return float(self.chunk_times[1] - self.chunk_times[0]) if len(self.chunk_times) >= 2 else None

    @property
    def ttfa_s(self) -> float | None:
        """Time to first answer token (the first ``content`` after any reasoning); == TTFT without reasoning."""
        return self.t_answer - self.t0 if self.t_answer is not None else None

    @property
    def thinking_s(self) -> float | None:
        """Thinking span: first answer token minus first reasoning token (None without both)."""
        if self.t_answer is None or self.t_reasoning is None:
            return None
        return self.t_answer - self.t_reasoning

    @property
    def answer_span_s(self) -> float | None:
        """Answer span: last token-bearing chunk minus the first answer token — how long the answer streams after
        any reasoning (== decode span without reasoning); None without answer text."""
        if self.t_answer is None or not len(self.chunk_times):
            return None
        return float(self.chunk_times[-1]) - self.t_answer

    @property
    def answer_tokens(self) -> int:
        """Output tokens that are not reasoning."""
        return self.output_tokens - self.reasoning_tokens

    @property
    def e2e_s(self) -> float:
        return self.t_end - self.t0

    @property
    def client_queue_s(self) -> float:
        return self.t_sent - self.t0

    @property
    def decode_span_s(self) -> float | None:
        return float(self.chunk_times[-1] - self.chunk_times[0]) if len(self.chunk_times) else None

    @property
    def tpot_s(self) -> float | None:
        if len(self.chunk_times) == 0 or self.output_tokens < 2:
            return None
        return float(self.chunk_times[-1] - self.chunk_times[0]) / (self.output_tokens - 1)

    def inter_chunk_samples(self) -> np.ndarray:
        """One gap per token-bearing chunk after the first."""
        return np.diff(self.chunk_times)

    def itl_samples(self) -> np.ndarray:
        """k samples of g/k for each token-bearing chunk after the first (k tokens, g its gap)."""
        if len(self.chunk_times) < 2:
            return _EMPTY_F
        gaps = np.diff(self.chunk_times)
        k = self.chunk_tokens[1:]
        return np.repeat(gaps / k, k)
