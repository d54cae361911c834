"""vLLM's OpenAI-compatible endpoints over the simulated engine.

``POST /v1/completions`` (prompt: string, list of strings, token ids, or lists of token ids) and
``POST /v1/chat/completions`` (messages rendered with the DeepSeek chat template), streamed or not;
``GET /v1/models``, ``/health``, ``/version``, ``/metrics``; ``POST /tokenize``, ``/detokenize``.
Errors carry vLLM's body ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np
import orjson
from prometheus_client import CollectorRegistry
from tokenizers import Tokenizer

from server.core import sse
from server.core.faults import IMMEDIATE, JUNK
from server.core.http import Connection, Handler, Request, WriteBatcher
from server.sim.engine import Engine
from server.sim.faults import STALL_SECONDS, Fault, Faults
from server.sim.metrics import CONTENT_TYPE, HeaderCollector, render
from server.sim.scheduler import FINISHED, SimRequest
from server.sim.textgen import Vocabulary
from workload.lengths import LengthDist
from workload.routing.table import TOKENIZER_HEADERS
from workload.tokenizers import ChatRenderer, ChatTemplateError, render_chat

REASONING_FIELDS = ("reasoning_content", "reasoning", "think-tags")
"""``--reasoning-field``: the delta field vLLM's reasoning parser fills (``reasoning_content``; newer releases
``reasoning``), or ``think-tags``: R1 served without a parser, the thinking inside ``content`` between
``<think>`` and ``</think>``."""
THINK_OPEN, THINK_CLOSE = b"<think>", b"</think>"

ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 429: "RateLimitError", 500: "InternalServerError"}



VERSION = "0.32.0+sim"
"""``GET /version``: the vLLM release whose interface the simulator imitates (tests/contract/server_env, captured
from the real engine), with ``+sim`` so a run record never takes it for the engine itself."""

class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param = status, message, param

    def body(self) -> bytes:
        return error_body(self.status, self.message, self.param)


def error_body(status: int, message: str, param: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": ERROR_TYPES.get(status, "Error"), "param": param,
                                   "code": status}})


@dataclass(frozen=True, slots=True)
class GenParams:
    prompts: list[list[int]]
    max_tokens: list[int]
    min_tokens: int
    ignore_eos: bool
    stream: bool
    include_usage: bool
    continuous_usage: bool


def _int(data: dict, key: str, default: int | None, minimum: int) -> int | None:
    v = data.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ApiError(400, f"{key} must be an integer, got {v!r}.", key)
    if v < minimum:
        raise ApiError(400, f"{key} must be at least {minimum}, got {v}.", key)
    return v


def _bool(data: dict, key: str, default: bool) -> bool:
    v = data.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise ApiError(400, f"{key} must be a boolean, got {v!r}.", key)
    return v


def _is_ids(x: object) -> bool:
    return isinstance(x, list) and bool(x) and all(isinstance(i, int) and not isinstance(i, bool) for i in x)


class SimApp:
    """Request parsing, validation and response writing; the engine does the timing."""

    def __init__(self, engine: Engine, tokenizer: Tokenizer, vocab: Vocabulary, model_name: str,
                 max_model_len: int, eos_probability: float, rng: np.random.Generator,
                 registry: CollectorRegistry, faults: Faults | None = None, batcher: WriteBatcher | None = None,
                 chat_render: ChatRenderer | None = None):
        self.engine = engine
        self.tok = tokenizer
        self.render_chat = chat_render or render_chat
        """The served tokenizer's chat template (``workload.tokenizers.chat_renderer``): chats count as vLLM's."""
        self.vocab_size = tokenizer.get_vocab_size()
        self.text_of = vocab.text
        self.model_name = model_name
        self.max_model_len = max_model_len
        self.eos_p = eos_probability
        self.rng = rng
        self.registry = registry
        self.faults = faults
        self.batcher = batcher or WriteBatcher()
        """Stream writes queued by the sinks; the engine flushes it (so the server's connections must share it)."""
        self.reasoning: LengthDist | None = None
        """``--reasoning``: reasoning tokens per request (None: the model does not reason). The first R output
        tokens are reasoning; with think-tags the first carries ``<think>`` and the R-th ``</think>``."""
        self.reasoning_field = REASONING_FIELDS[0]
        self.per_request_metrics = False
        """``--enable-per-request-metrics``: vLLM's ``metrics`` object on the last chunk and a whole answer."""
        self.spec_metrics: str | None = None
        """``--per-request-spec-decode-metrics``: ``summary`` or ``detailed`` adds ``speculative_decoding``."""
        self.prompt_details = False
        """``--enable-prompt-tokens-details``: ``usage.prompt_tokens_details`` (the prefix-cache hits)."""
        self.kv = None
        """``--kv-transfer-from``: a :class:`server.sim.pd.KvTransfer` (this is a pair's decode instance), else None."""
        self.created = int(time.time())
        self._ids = itertools.count(1)
        self._id_prefix = os.urandom(4).hex()
        self.tokenizer_headers: Counter = Counter()
        """(header, value) -> generation requests that carried it: the X-Tokenizer-* / X-Compat-Level headers a
        gray-routing client sends (``sim:tokenizer_header_requests_total`` in /metrics)."""
        registry.register(HeaderCollector(self.tokenizer_headers))

    def routes(self) -> dict[tuple[str, str], Handler]:
        return {
            ("GET", "/health"): self.health,
            ("GET", "/ping"): self.health,
            ("GET", "/version"): self.version,
            ("GET", "/v1/models"): self.models,
            ("GET", "/metrics"): self.metrics,
            ("POST", "/v1/completions"): self.completions,
            ("POST", "/v1/chat/completions"): self.chat,
            ("POST", "/tokenize"): self.tokenize,
            ("POST", "/detokenize"): self.detokenize,
        }

    # ---- small endpoints --------------------------------------------------------------------
    def health(self, req: Request, conn: Connection) -> None:
        conn.respond(200, b"")

    def version(self, req: Request, conn: Connection) -> None:
        conn.respond(200, orjson.dumps({"version": VERSION}))

    def models(self, req: Request, conn: Connection) -> None:
        card = {"id": self.model_name, "object": "model", "created": self.created, "owned_by": "vllm",
                "root": self.model_name, "parent": None, "max_model_len": self.max_model_len}
        conn.respond(200, orjson.dumps({"object": "list", "data": [card]}))

    def metrics(self, req: Request, conn: Connection) -> None:
        conn.respond(200, render(self.registry), CONTENT_TYPE)

    def tokenize(self, req: Request, conn: Connection) -> None:
        try:
            data = self._json(req.body)
            self._check_model(data)
            if "messages" in data:
                ids = self._chat_ids(data["messages"], _bool(data, "add_generation_prompt", True))
            elif isinstance(data.get("prompt"), str):
                ids = self.tok.encode(data["prompt"], add_special_tokens=_bool(data, "add_special_tokens", True)).ids
            else:
                raise ApiError(400, "tokenize needs 'prompt' (a string) or 'messages'.", "prompt")
        except ApiError as e:
            conn.respond(e.status, e.body())
            return
        conn.respond(200, orjson.dumps({"count": len(ids), "max_model_len": self.max_model_len, "tokens": ids,
                                        "token_strs": None}))

    def detokenize(self, req: Request, conn: Connection) -> None:
        try:
            data = self._json(req.body)
            self._check_model(data)
            ids = data.get("tokens")
            if not (ids == [] or _is_ids(ids)):
                raise ApiError(400, "detokenize needs 'tokens': a list of token ids.", "tokens")
            self._check_ids(ids)
        except ApiError as e:
            conn.respond(e.status, e.body())
            return
        conn.respond(200, orjson.dumps({"prompt": self.tok.decode(ids, skip_special_tokens=False)}))

    # ---- generation -------------------------------------------------------------------------
    def completions(self, req: Request, conn: Connection) -> None:
        self._generate(req, conn, "completion")

    def chat(self, req: Request, conn: Connection) -> None:
        self._generate(req, conn, "chat")

    def _generate(self, req: Request, conn: Connection, kind: str) -> None:
        for name in TOKENIZER_HEADERS:
            value = req.headers.get(name.lower())
            if value is not None:
                self.tokenizer_headers[(name, value)] += 1
        try:
            params = self._parse(req.body, kind)
        except ApiError as e:
            conn.respond(e.status, e.body())
            return
        fault = self.faults.decide(min(params.max_tokens)) if self.faults is not None else None
        if fault is not None and fault.kind in IMMEDIATE:
            status = int(fault.kind)
            headers = {"retry-after": "1"} if status == 429 else None
            conn.respond(status, error_body(status, f"simulated fault ({fault.kind})"), headers=headers)
            return
        rid = f"{sse.KINDS[kind][1]}{self._id_prefix}{next(self._ids):08x}"
        reqs = [self._sim_request(f"{rid}-{i}", ids, mt, params)
                for i, (ids, mt) in enumerate(zip(params.prompts, params.max_tokens, strict=True))]
        if params.stream:
            resp: _Response = StreamResponse(self, conn, kind, rid, reqs, params, fault)
        else:
            resp = FullResponse(self, conn, kind, rid, reqs, fault)
        conn.on_close = resp.kill
        tracer = self.engine.tracer
        if tracer is not None:  # vLLM's span: its request id is the X-Request-Id when the client sent one
            xrid = req.headers.get("x-request-id")
            for i, r in enumerate(reqs):
                tracer.begin(r, req.headers, f"{sse.KINDS[kind][1]}{xrid}-{i}" if xrid else r.rid, r.max_tokens)
        if self.kv is None:
            for r in reqs:
                self.engine.submit(r)
            return
        for r in reqs:  # a prefill/decode pair: prefill there, the KV transfer, then decode here
            arrival = self.engine.now()

            def submit(r=r, arrival=arrival) -> None:
                if not resp.dead:
                    self.engine.submit(r, arrival)

            asyncio.ensure_future(self.kv.run(r.tokens[:r.num_prompt], submit))

    def details(self, reqs: list[SimRequest]) -> dict | None:
        """``usage.prompt_tokens_details`` of a response (None unless --enable-prompt-tokens-details)."""
        if not self.prompt_details:
            return None
        return {"cached_tokens": sum(r.cached_prompt_tokens for r in reqs), "created_cache_tokens": 0}

    def request_metrics(self, reqs: list[SimRequest]) -> dict | None:
        """vLLM's per-request ``metrics`` (vllm/entrypoints/generate/base/serving.py): its clocks from the engine's
        queue; ``null`` fields for a response of several sequences, as vLLM's for n > 1."""
        if not self.per_request_metrics:
            return None
        out: dict = dict.fromkeys(("time_to_first_token_ms", "generation_time_ms", "queue_time_ms", "mean_itl_ms",
                                   "tokens_per_second"))
        out["speculative_decoding"] = None
        if len(reqs) != 1:
            return out
        r = reqs[0]
        sched, first, last, n = r.first_scheduled, r.first_token, r.last_token, r.num_output
        if sched is None or first is None or last is None:
            return out
        out["time_to_first_token_ms"] = (first - sched) * 1000
        out["generation_time_ms"] = (last - first) * 1000
        out["queue_time_ms"] = (sched - r.arrival) * 1000
        out["mean_itl_ms"] = (last - first) / (n - 1) * 1000 if n > 1 else None
        out["tokens_per_second"] = n / (last - sched) if last > sched else None
        if self.spec_metrics is not None and r.spec_hist is not None:
            out["speculative_decoding"] = spec_record(r)
        return out

    def reasoning_counts(self, n: int) -> list[int]:
        """Reasoning tokens of each of ``n`` sequences (zeros when the model does not reason)."""
        if self.reasoning is None:
            return [0] * n
        return [int(self.reasoning.sample(self.rng)) for _ in range(n)]

    def _sim_request(self, rid: str, ids: list[int], max_tokens: int, p: GenParams) -> SimRequest:
        stop_at, on_eos = max_tokens, False
        if not p.ignore_eos and self.eos_p > 0:
            eos_pos = p.min_tokens + int(self.rng.geometric(self.eos_p))
            if eos_pos <= max_tokens:
                stop_at, on_eos = eos_pos, True
        return SimRequest(rid=rid, tokens=list(ids), num_prompt=len(ids), max_tokens=max_tokens, stop_at=stop_at,
                          stop_on_eos=on_eos, id_offset=int(self.rng.integers(0, 1 << 30)))

    # ---- parsing ----------------------------------------------------------------------------
    @staticmethod
    def _json(body: bytes) -> dict:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise ApiError(400, f"JSON decode error: {e}") from None
        if not isinstance(data, dict):
            raise ApiError(400, "the request body must be a JSON object")
        return data

    def _check_model(self, data: dict) -> None:
        model = data.get("model")
        if model is not None and model != self.model_name:
            raise ApiError(404, f"The model `{model}` does not exist.", "model")

    def _check_ids(self, ids: list[int]) -> None:
        for i in ids:
            if not 0 <= i < self.vocab_size:
                raise ApiError(400, f"Token id {i} is out of vocabulary", "prompt")

    def _chat_ids(self, messages: object, add_generation_prompt: bool = True) -> list[int]:
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise ApiError(400, "messages must be a non-empty list of objects with 'role' and 'content'.", "messages")
        try:
            text = self.render_chat(messages, add_generation_prompt)
        except ChatTemplateError as e:
            raise ApiError(400, str(e), "messages") from None
        return self.tok.encode(text, add_special_tokens=False).ids

    def _prompt_ids(self, prompt: object) -> list[list[int]]:
        if isinstance(prompt, str):
            return [self.tok.encode(prompt, add_special_tokens=True).ids]
        if _is_ids(prompt):
            self._check_ids(prompt)
            return [prompt]
        if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
            return [e.ids for e in self.tok.encode_batch(prompt, add_special_tokens=True)]
        if isinstance(prompt, list) and prompt and all(_is_ids(p) for p in prompt):
            for p in prompt:
                self._check_ids(p)
            return [list(p) for p in prompt]
        raise ApiError(400, "prompt must be a string, a list of strings, a list of token ids or a list of such lists.",
                       "prompt")

    def _parse(self, body: bytes, kind: str) -> GenParams:
        data = self._json(body)
        self._check_model(data)
        stream = _bool(data, "stream", False)
        opts = data.get("stream_options")
        if opts is not None and not isinstance(opts, dict):
            raise ApiError(400, "stream_options must be an object.", "stream_options")
        if opts and not stream:
            raise ApiError(400, "Stream options can only be defined when `stream=True`.", "stream_options")
        opts = opts or {}
        n = _int(data, "n", 1, 1)
        if n != 1:
            raise ApiError(400, "the simulator supports n=1 only.", "n")
        if kind == "chat":
            prompts = [self._chat_ids(data.get("messages"))]
            key = "max_completion_tokens" if data.get("max_completion_tokens") is not None else "max_tokens"
            max_tokens = _int(data, key, None, 1)
        else:
            if "prompt" not in data:
                raise ApiError(400, "prompt is required.", "prompt")
            prompts = self._prompt_ids(data["prompt"])
            max_tokens = _int(data, "max_tokens", 16, 1)
        min_tokens = _int(data, "min_tokens", 0, 0) or 0
        limits = [self._limit(len(p), max_tokens, kind) for p in prompts]
        if min_tokens > min(limits):
            raise ApiError(400, f"min_tokens must be less than or equal to max_tokens={min(limits)}, got {min_tokens}.",
                           "min_tokens")
        return GenParams(prompts, limits, min_tokens, _bool(data, "ignore_eos", False), stream,
                         _bool(opts, "include_usage", False), _bool(opts, "continuous_usage_stats", False))

    def _limit(self, n_prompt: int, max_tokens: int | None, kind: str) -> int:
        where = "messages" if kind == "chat" else "prompt"
        if n_prompt >= self.max_model_len:
            raise ApiError(400, f"This model's maximum context length is {self.max_model_len} tokens. However, your "
                                f"request has {n_prompt} input tokens. Please reduce the length of the input {where}.",
                           where)
        if max_tokens is None:
            return self.max_model_len - n_prompt
        if n_prompt + max_tokens > self.max_model_len:
            raise ApiError(400, f"This model's maximum context length is {self.max_model_len} tokens. However, you "
                                f"requested {n_prompt + max_tokens} tokens ({n_prompt} in the {where}, {max_tokens} in "
                                f"the completion). Please reduce the length of the {where} or completion.",
                           "max_tokens")
        return max_tokens


def spec_record(r: SimRequest) -> dict:
    """vLLM's ``speculative_decoding`` object of one request (vllm/v1/metrics/stats.py RequestSpecDecodeMetrics)."""
    hist = r.spec_hist or []
    steps = sum(hist)
    accepted = sum(j * c for j, c in enumerate(hist))
    out = {"mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
           "draft_acceptance_rate": accepted / r.spec_drafted if r.spec_drafted else 0.0,
           "acceptance_histogram": list(hist), "num_spec_steps": steps, "num_accepted_draft_tokens": accepted,
           "num_draft_tokens": r.spec_drafted, "num_spec_tokens": len(hist) - 1}
    if r.spec_per_step:
        out["per_step_accepted"] = [a for a, _d in r.spec_per_step]
        out["per_step_drafted"] = [d for _a, d in r.spec_per_step]
    return out


class _Response:
    """Common part of a generation response: its engine requests, cancellation and fault bookkeeping."""

    def __init__(self, app: SimApp, conn: Connection, reqs: list[SimRequest], fault: Fault | None):
        self.app, self.conn, self.reqs, self.fault = app, conn, reqs, fault
        self.pending = len(reqs)
        self.dead = False

    def kill(self) -> None:
        """Stop producing: abort every unfinished engine request (client gone, cut, stall)."""
        self.dead = True
        for r in self.reqs:
            if r.status != FINISHED:
                self.app.engine.abort(r)

    def stall(self) -> None:
        self.kill()
        asyncio.get_running_loop().call_later(STALL_SECONDS, self.conn.close)


class _StreamChoice:
    """The engine's sink for one prompt of a streamed response: one SSE write per engine step."""

    __slots__ = ("st", "index", "prefix", "prompt_tokens", "started", "reasoning", "think_tags")

    def __init__(self, st: StreamResponse, index: int, prompt_tokens: int, reasoning: int = 0):
        self.st, self.index, self.prompt_tokens, self.started = st, index, prompt_tokens, False
        self.prefix = st.frames.choice_prefix(index)
        self.reasoning = reasoning
        """Output tokens still to come as reasoning (0: the answer)."""
        self.think_tags = st.app.reasoning_field == "think-tags" or st.frames.kind != "chat"

    def _reasoned(self, req: SimRequest, new: list[int], text_of: dict[int, bytes]) -> tuple[bytes, bytes]:
        """(reasoning text, answer text) of this step's tokens while reasoning lasts."""
        r = min(self.reasoning, len(new))
        first = req.num_output - len(new) + 1  # 1-based position of new[0] in the output
        pieces = [text_of[i] for i in new[:r]]
        if self.think_tags:
            if first == 1:
                pieces[0] = THINK_OPEN + pieces[0]
            if r == self.reasoning:
                pieces[-1] += THINK_CLOSE
        self.reasoning -= r
        return b"".join(pieces), b"".join([text_of[i] for i in new[r:]])

    def _event(self, req: SimRequest, new: list[int], text_of: dict[int, bytes], frames: sse.Frames,
               finish: str | None, usage: bytes | None) -> bytes:
        rtext, atext = self._reasoned(req, new, text_of)
        if self.think_tags:
            return frames.token(self.prefix, rtext + atext, finish, usage)
        prefix = frames.reasoning_prefix(self.index)
        return frames.token(prefix, rtext + frames.both + atext if atext else rtext, finish, usage)

    def __call__(self, req: SimRequest, new: list[int], finished: bool) -> None:
        st = self.st
        if st.dead:
            return
        text_of = st.text_of
        frames = st.frames
        usage = sse.usage_bytes(self.prompt_tokens, req.num_output) if st.continuous else None
        if self.reasoning:
            ev = self._event(req, new, text_of, frames, req.finish_reason if finished else None, usage)
        else:
            text = text_of[new[0]] if len(new) == 1 else b"".join([text_of[i] for i in new])
            ev = frames.token(self.prefix, text, req.finish_reason if finished else None, usage)
        if not self.started:
            self.started = True
            if frames.kind == "chat":
                ev = frames.role(self.index, sse.usage_bytes(self.prompt_tokens, 0) if st.continuous else None) + ev
        fault = st.fault
        # an early EOS still gets its fault; nodone acts at the end
        if fault is not None and (finished or req.num_output >= fault.at) and fault.kind != "nodone":
            st.fault = None
            if fault.kind == "junk":
                ev = JUNK + ev
            else:  # cut / stall: this event, then nothing
                st.conn.write_chunk(ev)
                if fault.kind == "cut":
                    st.kill()
                    st.conn.close()
                else:
                    st.stall()
                return
        if finished:
            st.pending -= 1
            st.completion_tokens += req.num_output
            if st.pending == 0:
                st.dead = True
                if st.include_usage:
                    app = st.app
                    ev += frames.usage_event(st.prompt_tokens, st.completion_tokens, app.details(st.reqs),
                                             app.request_metrics(st.reqs))
                st.conn.end_stream(ev if st.fault is not None else ev + sse.DONE)  # a fault left here: nodone
                return
        st.conn.write_chunk(ev)


class StreamResponse(_Response):
    def __init__(self, app: SimApp, conn: Connection, kind: str, rid: str, reqs: list[SimRequest],
                 params: GenParams, fault: Fault | None):
        super().__init__(app, conn, reqs, fault)
        self.frames = sse.Frames(kind, rid, int(time.time()), app.model_name,
                                 app.reasoning_field if app.reasoning_field != "think-tags" else "reasoning_content")
        self.text_of = app.text_of
        self.continuous = params.continuous_usage
        self.include_usage = params.include_usage
        self.prompt_tokens = sum(r.num_prompt for r in reqs)
        self.completion_tokens = 0
        for i, (r, n) in enumerate(zip(reqs, app.reasoning_counts(len(reqs)), strict=True)):
            r.sink = _StreamChoice(self, i, r.num_prompt, n)
        conn.start_stream()


class FullResponse(_Response):
    def __init__(self, app: SimApp, conn: Connection, kind: str, rid: str, reqs: list[SimRequest],
                 fault: Fault | None):
        super().__init__(app, conn, reqs, fault)
        self.kind, self.rid = kind, rid
        self.reasoning = app.reasoning_counts(len(reqs))
        for r in reqs:
            r.sink = self.on_tokens

    def on_tokens(self, req: SimRequest, new: list[int], finished: bool) -> None:
        if not finished or self.dead:
            return
        self.pending -= 1
        if self.pending:
            return
        self.dead = True
        fault = self.fault
        if fault is not None and fault.kind == "cut":
            self.conn.close()
        elif fault is not None and fault.kind == "stall":
            self.stall()
        else:  # junk: the body cut short; nodone: a whole answer has no [DONE] to leave out
            body = self.body()
            self.conn.respond(200, body[: len(body) // 2] if fault is not None and fault.kind == "junk" else body)

    def body(self) -> bytes:
        text_of = self.app.text_of
        choices = []
        field = self.app.reasoning_field
        for i, (r, n) in enumerate(zip(self.reqs, self.reasoning, strict=True)):
            ids = r.output_ids
            thought = b"".join([text_of[t] for t in ids[:n]]).decode()
            text = b"".join([text_of[t] for t in ids[n:]]).decode()
            if n and (field == "think-tags" or self.kind != "chat"):
                text, thought = f"<think>{thought}</think>{text}", ""
            if self.kind == "chat":
                message = {"role": "assistant", "content": None if thought and not text else text,
                           "reasoning_content": None, "tool_calls": []}
                if thought:
                    message[field] = thought
                choices.append({"index": i, "message": message,
                                "logprobs": None, "finish_reason": r.finish_reason, "stop_reason": None})
            else:
                choices.append({"index": i, "text": text, "logprobs": None, "finish_reason": r.finish_reason,
                                "stop_reason": None, "prompt_logprobs": None})
        prompt = sum(r.num_prompt for r in self.reqs)
        completion = sum(r.num_output for r in self.reqs)
        obj = "chat.completion" if self.kind == "chat" else "text_completion"
        answer = {"id": self.rid, "object": obj, "created": int(time.time()), "model": self.app.model_name,
                  "choices": choices, "usage": {"prompt_tokens": prompt, "total_tokens": prompt + completion,
                                                "completion_tokens": completion,
                                                "prompt_tokens_details": self.app.details(self.reqs)}}
        if (metrics := self.app.request_metrics(self.reqs)) is not None:
            answer["metrics"] = metrics
        return orjson.dumps(answer)
