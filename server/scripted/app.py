"""The scripted server: its routes and schedule on the test servers' HTTP/1.1 core (``server.core.http``, with
kernel-stamped reads), its events rendered as the simulator's (``server.core.sse``).

Routes: ``POST /v1/chat/completions``, ``POST /v1/completions`` (streaming or not, ``prompt`` may be a
list), ``GET /v1/models``, ``POST /tokenize`` (unless ``--no-tokenize``), ``GET /stats``, ``GET /health``.
Faults (``--fault``, the kinds of ``server.core.faults``, rotated over every ``--fault-every``-th completion
request; "part-way" is half the tokens): 500, 429, cut, junk, stall (silent for ``--stall-s`` seconds, then the
connection is dropped), nodone.

With ``--ttft-ms 0 --itl-ms 0`` a stream without a fault is written whole, rendered once per shape and reused
(burst mode: a client benchmark's server that is not the limit, ``bench.scaling``). ``--selector epoll`` serves
more than select()'s ~1000 connections, with waits rounded up to whole milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import selectors
import signal
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field

import orjson

from server.core import sse
from server.core.faults import IMMEDIATE, JUNK, KINDS, parse_faults
from server.core.http import Connection, Handler, Request, chunk
from server.scripted.serial import Serial
from workload import netstamp
from workload.argtypes import non_negative_int, port, positive_int, seconds

_KEEP = 200_000  # timing samples kept for /stats
SELECTORS = {"select": selectors.SelectSelector, "epoll": getattr(selectors, "EpollSelector", selectors.PollSelector)}
_WORDS = (" the", " of", " and", " to", " in", " is", " for", " on", " that", " with", " as", " by")
_BURST_ID = b"cmpl-" + b"x" * 12
"""Where a cached burst (Stream.burst) holds the request id: as wide as ``cmpl-%-12d``."""


@dataclass
class Script:
    ttft: float
    itl: float
    k: int
    output_tokens: int | None
    faults: tuple[str, ...] = ()
    fault_every: int = 1
    stall_s: float = 30.0
    model: str = "scripted"
    tokenizer: object | None = None
    render: object | None = None
    """The tokenizer's chat renderer (``workload.tokenizers.chat_renderer``); None: DeepSeek's template."""
    prompt_offset: int = 0
    tokenize: bool = True
    stats: Counter = field(default_factory=Counter)
    bursts: dict = field(default_factory=dict)
    """Whole streams rendered once per shape for ``--ttft-ms 0 --itl-ms 0`` (Stream.burst)."""
    serial: Serial = field(default_factory=Serial)
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    """Stream ids (``cmpl-<n>``), one count per server."""
    """Token counting, one request per loop pass (see server.scripted.serial)."""
    late: deque[float] = field(default_factory=lambda: deque(maxlen=_KEEP))
    """How late each scheduled write went out (seconds)."""
    ttft_sent: deque[float] = field(default_factory=lambda: deque(maxlen=_KEEP))
    """Per streamed request, its first token's write time minus the request's arrival (seconds)."""
    itl_sent: deque[float] = field(default_factory=lambda: deque(maxlen=_KEEP))
    """Per token after the first, the gap between its chunk's write and the previous one, split over the
    chunk's k tokens (seconds): with ``ttft_sent`` the timing the server really produced, which a client
    must reproduce; the script (``--ttft-ms``/``--itl-ms``) is what it aimed at, ``late`` the difference.
    All three keep the latest ``_KEEP`` samples: the benchmark streams ~25k tokens/s for minutes."""

    def report(self) -> dict:
        out: dict = dict(self.stats)
        for name, xs in (("late_ms", self.late), ("ttft_sent_ms", self.ttft_sent), ("itl_sent_ms", self.itl_sent)):
            if xs:
                ms = sorted(x * 1000.0 for x in xs)
                out[name] = {
                    q: round(ms[min(len(ms) - 1, int(f * len(ms)))], 3)
                    for q, f in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))
                }
        return out

    def fault_for(self, number: int) -> str | None:
        if not self.faults or number % self.fault_every:
            return None
        return self.faults[(number // self.fault_every - 1) % len(self.faults)]

    def count_prompt(self, body: dict, chat: bool) -> int:
        if chat:
            if self.render is None:
                from workload.tokenizers import render_chat  # noqa: PLC0415

                self.render = render_chat
            texts = [self.render(body.get("messages") or [])]  # type: ignore[operator]
            special = False
        else:
            prompt = body.get("prompt", "")
            texts = prompt if isinstance(prompt, list) else [prompt]
            special = True
        if self.tokenizer is None:
            return sum(max(1, len(str(t)) // 4) for t in texts) + self.prompt_offset
        enc = self.tokenizer.encode_batch([str(t) for t in texts], add_special_tokens=special)
        return sum(len(e.ids) for e in enc) + self.prompt_offset * len(texts)


class Stream:
    """Writes one streaming response on the request's own clock."""

    def __init__(self, conn: Connection, script: Script, body: dict, chat: bool, prompt_tokens: int,
                 fault: str | None) -> None:
        s = script
        self.conn, self.script, self.chat, self.fault = conn, s, chat, fault
        self.n = int(s.output_tokens or body.get("max_tokens") or 16)
        opts = body.get("stream_options") or {}
        self.usage = bool(opts.get("include_usage"))
        self.continuous = self.usage and bool(opts.get("continuous_usage_stats"))
        self.prompt_tokens = prompt_tokens
        self.model_key = f"tokens_sent:{body.get('model') or ''}"
        """Per-model token counter: lets two clients share one server and still be told apart."""
        self.rid = next(s.ids)

    def _frames(self, rid: str, created: int) -> None:
        """The event templates (built when written: a cached burst needs none)."""
        self.frames = sse.Frames("chat" if self.chat else "completion", rid, created, self.script.model)
        self.prefix = self.frames.choice_prefix(0)

    def run(self, t_start: float) -> asyncio.Future:
        """Start writing; the future is done when the response is (or the connection went away).

        Each chunk is written by a timer callback at its due time (``loop.call_at``), not by a coroutine
        sleeping: one callback per chunk instead of a future, a task step and a second loop pass (server CPU
        for 64 streams 35% -> 26% of a core here; half the chunks out within 0.1 ms of due)."""
        loop = asyncio.get_running_loop()
        self._frames(f"cmpl-{self.rid}", int(time.time()))
        self.loop, self.t_start, self.j = loop, t_start, 0
        self.done_tokens = 0
        self.chunks = -(-self.n // self.script.k)
        self.words = itertools.cycle(_WORDS)
        self.finished = loop.create_future()
        # the role-only chunk at once, with the head, like vLLM: it carries no token
        self.conn.start_stream(headers=_stream_headers(t_start), first=self._role())
        self._next_at()
        return self.finished

    def _due(self, j: int) -> float:
        s = self.script
        return self.t_start + s.ttft + j * s.k * s.itl

    def _next_at(self) -> None:
        self.loop.call_at(self._due(self.j), self._tick)  # a due time already past runs at the next pass

    def _end(self) -> None:
        if not self.finished.done():
            self.finished.set_result(None)

    def _tick(self) -> None:
        s, j, conn = self.script, self.j, self.conn
        s.late.append(self.loop.time() - self._due(j))
        if conn.closed:
            return self._end()
        if j == self.chunks // 2 and self.fault in ("cut", "stall"):
            if self.fault == "stall":
                self.loop.call_later(s.stall_s, self._cut)
            else:
                self._cut()
            return None
        if j == self.chunks // 2 and self.fault == "junk":
            conn.send(chunk(JUNK))
        take, event = self._token_event()
        now = self.loop.time()
        if j == 0:
            s.ttft_sent.append(now - self.t_start)
        else:
            s.itl_sent.extend(((now - self.sent) / take,) * take)
        self.sent = now
        conn.send(event)
        self.j += 1
        if self.j < self.chunks:
            return self._next_at()
        conn.finish(self._tail())
        return self._end()

    def _token_event(self) -> tuple[int, bytes]:
        """The next token-bearing chunk: (its tokens, its bytes); counts them as sent."""
        s = self.script
        take = min(s.k, self.n - self.done_tokens)
        self.done_tokens += take
        done = self.done_tokens
        s.stats["tokens_sent"] += take
        s.stats[self.model_key] += take
        text = "".join(next(self.words) for _ in range(take)).encode()
        usage = sse.usage_bytes(self.prompt_tokens, done) if self.continuous else None
        return take, chunk(self.frames.token(self.prefix, text, "length" if done == self.n else None, usage))

    def _tail(self) -> bytes:
        """After the last token: the usage chunk and ``[DONE]`` (unless the fault is nodone), framed."""
        s, done = self.script, self.done_tokens
        usage = chunk(self.frames.usage_event(self.prompt_tokens, done)) if self.usage else b""
        s.stats["completed"] += 1
        s.stats["output_tokens"] += done
        return usage + (chunk(sse.DONE) if self.fault != "nodone" else b"")

    def burst(self, t_start: float) -> None:
        """``--itl-ms 0 --ttft-ms 0``: the whole stream in one write, rendered once per shape (endpoint, length,
        usage options, prompt count) and reused with this request's id, so a request costs the server about one
        parse and one write whatever its length: a client benchmark's server (bench.scaling) that is not the limit.
        """
        s = self.script
        key = (self.chat, self.n, self.usage, self.continuous, self.prompt_tokens, self.fault)
        cached = s.bursts.get(key)
        if cached is None:
            self._frames(_BURST_ID.decode(), 0)
            self.words = itertools.cycle(_WORDS)
            self.done_tokens = 0
            body = self._role() + b"".join(self._token_event()[1] for _ in range(-(-self.n // s.k))) + self._tail()
            cached = s.bursts[key] = body
        else:
            s.stats["tokens_sent"] += self.n
            s.stats[self.model_key] += self.n
            s.stats["completed"] += 1
            s.stats["output_tokens"] += self.n
        s.ttft_sent.append(0.0)
        self.conn.stream_whole(cached.replace(_BURST_ID, b"cmpl-%-12d" % self.rid), headers=_stream_headers(t_start))

    def _role(self) -> bytes:
        """The role-only chunk a chat stream opens with, like vLLM: it carries no token."""
        if not self.chat:
            return b""
        return chunk(self.frames.role(0, sse.usage_bytes(self.prompt_tokens, 0) if self.continuous else None))

    def _cut(self) -> None:
        self.conn.abort()
        self._end()


def _stream_headers(t_start: float) -> dict[str, str]:
    return {"cache-control": "no-cache", "x-scripted-start": f"{t_start:.6f}"}


class ScriptedApp:
    """The routes: each request handled on its own clock, which starts when the request reached the host."""

    def __init__(self, script: Script) -> None:
        self.script = script
        s = script
        self.routes: dict[tuple[str, str], Handler] = {
            ("GET", "/v1/models"): lambda req, conn: _send(conn, 200, {
                "object": "list", "data": [{"id": s.model, "object": "model"}]}),
            ("GET", "/health"): lambda req, conn: _send(conn, 200, {}),
            ("GET", "/stats"): lambda req, conn: _send(conn, 200, s.report()),
            ("POST", "/v1/chat/completions"): self._timed(self._completion),
            ("POST", "/v1/completions"): self._timed(self._completion),
        }
        if s.tokenize:
            self.routes[("POST", "/tokenize")] = self._timed(self._tokenize)

    def connection(self) -> Connection:
        return Connection(self.routes, fallback=self._timed(self._no_route), name="server.scripted", stamped=True)

    @staticmethod
    def _timed(fn: Callable[[Request, Connection, float], Coroutine]) -> Handler:
        """A handler whose clock starts when its request's last bytes arrived (the kernel's stamp, see
        server.core.http): requests arriving together must not start their schedules behind their neighbours'
        handling. A request that fails (a bad body) drops its connection and says why on stderr."""

        def handle(req: Request, conn: Connection) -> Coroutine:
            now = asyncio.get_running_loop().time()
            return _guarded(fn(req, conn, now if req.arrival is None else min(req.arrival, now)), req, conn)

        return handle

    async def _no_route(self, req: Request, conn: Connection, _t_start: float) -> None:
        if _body(req, conn) is not None:
            _send(conn, 404, _error(404, f"no route {req.method} {req.path}"))

    async def _tokenize(self, req: Request, conn: Connection, _t_start: float) -> None:
        s = self.script
        if (body := _body(req, conn)) is not None:
            count = await s.serial.run(s.count_prompt, body, "messages" in body)
            _send(conn, 200, {"count": count, "max_model_len": 1 << 20, "tokens": []})

    async def _completion(self, req: Request, conn: Connection, t_start: float) -> None:
        s = self.script
        if (body := _body(req, conn)) is None:
            return None
        chat = req.path == "/v1/chat/completions"
        s.stats["requests"] += 1
        fault = s.fault_for(s.stats["requests"])
        if fault:
            s.stats[f"fault_{fault}"] += 1
        if fault in IMMEDIATE:
            return _send(conn, int(fault), _error(int(fault), f"scripted fault {fault}"))
        prompt_tokens = await s.serial.run(s.count_prompt, body, chat)
        if body.get("stream"):
            stream = Stream(conn, s, body, chat, prompt_tokens, fault)
            if s.itl == 0 and s.ttft == 0 and fault is None:
                return stream.burst(t_start)
            return await stream.run(t_start)
        await self._whole(conn, body, chat, prompt_tokens, t_start)
        return None

    async def _whole(self, conn: Connection, body: dict, chat: bool, prompt_tokens: int, t_start: float) -> None:
        s = self.script
        n = int(s.output_tokens or body.get("max_tokens") or 16)
        prompts = body.get("prompt") if not chat else None
        batch = len(prompts) if isinstance(prompts, list) else 1
        await asyncio.sleep(max(0.0, t_start + s.ttft + (n - 1) * s.itl - asyncio.get_running_loop().time()))
        text = "".join(itertools.islice(itertools.cycle(_WORDS), n))
        if chat:
            choices = [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}]
        else:
            choices = [{"index": i, "text": text, "finish_reason": "length"} for i in range(batch)]
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": n * batch,
            "total_tokens": prompt_tokens + n * batch,
        }
        obj = "chat.completion" if chat else "text_completion"
        _send(conn, 200, {"id": "cmpl-x", "object": obj, "model": s.model, "choices": choices, "usage": usage})
        s.stats["completed"] += 1
        s.stats["output_tokens"] += n * batch


async def _guarded(coro: Coroutine, req: Request, conn: Connection) -> None:
    try:
        await coro
    except Exception as e:  # a bad request body: drop the connection, say why on stderr
        print(f"scripted: {req.method} {req.path}: {e!r}", file=sys.stderr, flush=True)
        conn.abort()


def _body(req: Request, conn: Connection) -> dict | None:
    """The request's JSON body ({} for none); None after answering 400 when it is not JSON."""
    try:
        return orjson.loads(req.body) if req.body else {}
    except orjson.JSONDecodeError:
        _send(conn, 400, _error(400, "body is not JSON"))
        return None


def _send(conn: Connection, status: int, obj: object) -> None:
    conn.respond(status, orjson.dumps(obj))


def _error(code: int, message: str) -> dict:
    kinds = {400: "BadRequestError", 404: "NotFoundError", 429: "RateLimitError", 500: "InternalServerError"}
    return {"object": "error", "message": message, "type": kinds.get(code, "Error"), "param": None, "code": code}


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m server.scripted", description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=port, default=8001)
    p.add_argument("--ttft-ms", type=float, default=150.0, help="first token this long after the request")
    p.add_argument("--itl-ms", type=float, default=20.0, help="then one token every ITL")
    p.add_argument("--tokens-per-chunk", type=positive_int, default=1, help="K tokens per chunk, chunks K x ITL apart")
    p.add_argument("--output-tokens", type=positive_int, default=None, help="tokens per request (default: max_tokens)")
    p.add_argument("--fault", action="append", default=[],
                   help=f"comma list of {', '.join(KINDS)} (server/core/faults.py)")
    p.add_argument("--fault-every", type=positive_int, default=1, help="fault every N-th completion request")
    p.add_argument("--stall-s", type=seconds, default=30.0, help="how long a 'stall' fault stays silent")
    p.add_argument("--model", default="scripted")
    p.add_argument("--tokenizer", default="deepseek-v4", help="counts prompt tokens; 'none' = len/4")
    p.add_argument("--prompt-offset", type=non_negative_int, default=0, help="count this many extra prompt tokens")
    p.add_argument("--no-tokenize", action="store_true", help="answer 404 on /tokenize")
    p.add_argument(
        "--selector", choices=sorted(SELECTORS), default="select",
        help="event loop selector: select (default) times writes to the microsecond but serves file descriptors "
             "below 1024 only (about 1000 connections); epoll serves any number, its waits round up to whole "
             "milliseconds (benchmarks with many streams: bench.client_cost at 512 streams per client)",
    )
    args = p.parse_args(argv)
    try:
        args.fault = tuple(f for spec in args.fault if spec.strip(", ") for f in parse_faults(spec))
    except ValueError:
        p.error(f"--fault takes {', '.join(KINDS)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    tokenizer = render = None
    if args.tokenizer != "none":
        from workload.tokenizers import chat_renderer, load_tokenizer  # noqa: PLC0415

        tokenizer, render = load_tokenizer(args.tokenizer), chat_renderer(args.tokenizer)
        # the first encode and the chat-template import happen now, not inside the first requests' clocks
        Script(0, 0, 1, None, tokenizer=tokenizer, render=render).count_prompt(
            {"messages": [{"role": "user", "content": "w"}]}, True)
    script = Script(
        ttft=args.ttft_ms / 1000,
        itl=args.itl_ms / 1000,
        k=args.tokens_per_chunk,
        output_tokens=args.output_tokens,
        faults=args.fault,
        fault_every=args.fault_every,
        stall_s=args.stall_s,
        model=args.model,
        tokenizer=tokenizer,
        render=render,
        prompt_offset=args.prompt_offset,
        tokenize=not args.no_tokenize,
    )
    # select() takes microsecond timeouts; epoll/poll round up to whole milliseconds, which would make
    # every scripted write up to 1 ms late. The fd limit of select() (1024) is far above what tests use;
    # --selector epoll lifts it where the timing of single writes does not matter.
    loop = asyncio.SelectorEventLoop(SELECTORS[args.selector]())
    try:
        loop.run_until_complete(_serve(script, args.host, args.port))
    finally:
        loop.close()


async def _serve(script: Script, host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(ScriptedApp(script).connection, host, port, backlog=1024)
    for sock in server.sockets:
        # Linux turns receive stamping on for the whole host lazily (deferred work) and off again when the
        # last stamping socket closes: a listener that stamps keeps it on, and accepted sockets inherit
        # the flag, so even a connection's first request gets the kernel's arrival time.
        netstamp.enable(sock)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"scripted server on http://{host}:{port}", file=sys.stderr, flush=True)
    await stop.wait()
    server.close()
