"""The LLM users: an abstract :class:`LLMUser` on ``FastHttpUser`` and the three concrete users.

Each task iteration sends ONE LLM request and fires ONE Locust request event for it:
``name`` = endpoint and mode (``POST /v1/chat/completions [stream]``), ``response_time`` = E2E ms,
``response_length`` = output tokens, ``context={"llm_result": GenerationResult}``, and on failure an
:class:`~users.faults.LLMError` whose message is ``<kind>: <server body, truncated>``.

    class MyChat(StreamingChatUser):
        weight = 3

    class MyEndpoint(LLMUser):      # any registered API adapter (users.adapters)
        adapter = "my-endpoint"

A user reads the process settings (``environment.llm.settings``, built at test_start), stamps the current
stage (``environment.llm.stage_board``), draws the request's input once (:func:`users.request.draw`: prompt
length from the stage's ``input_len`` or ``--input-len``), has its adapter build the body, and in open loop
waits for ``environment.llm.pacer.wait_slot()`` before sending. Replaying a trace (``--trace``), it takes the
pacer's next slot first — a trace line — builds that line's request (:func:`users.request.draw_trace`), then
sleeps until the line's time.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import NamedTuple

import gevent
import orjson
from geventhttpclient.url import URL
from locust import constant, task
from locust.contrib.fasthttp import FastHttpUser

from run.context import attach
from shapes.stage import MAIN
from users.adapters import adapter_named
from users.adapters.base import Adapter
from users.client import Call, exchange
from users.conversation import Conversation
from users.faults import LLMError
from users.request import RequestInput, draw, draw_trace
from users.result import GenerationResult
from users.settings import RunSettings
from users.tracing import HEADER_REQUEST_ID, HEADER_TRACEPARENT

log = logging.getLogger(__name__)
_WARNED_TURNS: set[str] = set()
"""User classes already warned that ``--turns`` does not apply to them (once per class and process)."""
TRACE_SPENT_SLEEP_S = 1.0
"""A user whose process has sent its share of the trace idles this long per task until the run ends."""


class Target(NamedTuple):
    """Where one request goes: ``--host``, or the host of the route its fingerprint picked."""

    http: object
    """The geventhttpclient HTTPClient of that host."""
    path: str
    """The adapter's path under the host's base path."""
    headers: dict[str, str]
    """The process's request headers, plus the route's metadata headers."""


CONNECT_BACKOFF_S = (0.05, 2.0)
"""After a request that could not connect, a user waits this long before its next one (the first, doubled at each
failure in a row, up to the second; back to none at the first answer): a server that died mid-run keeps being
counted as failing, without the users spinning a core on refused connections."""


class LLMUser(FastHttpUser):
    """Sends LLM requests back to back (closed loop) or on the pacer's schedule (open loop)."""

    abstract = True

    adapter: str = ""
    """Name of the API adapter (``users.adapters.ADAPTERS``): endpoint, body, and how the answer is read."""

    wait_time = constant(0)
    """No think time: the load is set by the number of users (or by the pacer)."""

    def __init__(self, environment) -> None:
        ctx = attach(environment)
        settings = ctx.settings
        if settings is None:  # an Environment built without the plugin (tests, library use)
            settings = ctx.settings = RunSettings.from_options(environment.parsed_options)
        self.settings: RunSettings = settings
        self.api: Adapter = adapter_named(self.adapter)
        # with the process's stall watch, sockets block without a per-read timer (see users.watchdog)
        watched = ctx.stall_watch is not None
        self.network_timeout = None if watched else settings.request_timeout
        self.connection_timeout = min(settings.request_timeout, 60.0)
        super().__init__(environment)
        self._pool = self.client.client.clientpool
        self._http = self._pool.get_client(URL(self.host))
        self._request_name = self.api.request_name
        self._headers = settings.headers(self.api.stream)
        self._ids = settings.request_ids
        group = settings.next_group()
        self._backoff = 0.0
        self._prefix_group = group
        talks = settings.turns is not None or settings.dataset is not None
        self._conv = Conversation(settings, group) if talks and self.api.chat else None
        """This user's conversation (``--turns`` or ``--dataset``, chat users), else None."""
        if settings.turns is not None and not self.api.chat and type(self).__name__ not in _WARNED_TURNS:
            _WARNED_TURNS.add(type(self).__name__)
            log.warning("--turns applies to chat users only: %s sends single requests", type(self).__name__)

    def _target(self, inp: RequestInput) -> Target:
        route = inp.route
        if route is None:
            return Target(self._http, self.api.path, self._headers)
        url = URL(route.base_url)
        base_path = url.path.rstrip("/") if url.path not in ("", "/") else ""
        return Target(self._pool.get_client(url), base_path + self.api.path, {**self._headers, **route.headers})

    def on_start(self) -> None:
        """Open the connection before the first timed request, as a long-lived client would: DNS look-up
        (gevent's thread-pool resolver, tens of ms when 64 users start together) and TCP/TLS set-up then
        never count in a TTFT. A failure here is left for the first request to report."""
        pool = self._http._connection_pool
        try:
            pool.return_socket(pool.get_socket())
        except OSError:
            pass

    @task
    def generate(self) -> None:
        budget = self.environment.llm.budget  # --num-requests (users/budget.py)
        if budget is None:
            self.send()
            return
        if not budget.claim():  # this process's share is spent: idle until the run ends
            gevent.sleep(1.0)
            return
        try:
            self.send()
        finally:
            budget.finish()

    def _shares_prefix(self, slot) -> bool:
        """This request starts with its group's shared system prompt (``--shared-prefix-len``): not a replayed trace
        line nor a ``--dataset`` record, which bring their own."""
        return bool(self.settings.shared_prefix_len) and slot is None and self.settings.dataset is None

    def send(self) -> GenerationResult | None:
        """Send one request and report it; None when a replayed trace has no line left for this process."""
        env = self.environment
        api = self.api
        pacer = env.llm.pacer
        slot = pacer.take() if pacer is not None and pacer.replaying else None  # (time, trace line)
        if pacer is not None and pacer.replaying and slot is None:
            gevent.sleep(TRACE_SPENT_SLEEP_S)
            return None
        board = env.llm.stage_board
        stage = board.current if board is not None else MAIN
        conv = self._conv if slot is None else None
        building = time.perf_counter()  # the tokenizer layer: prompt synthesis + counting + body, before t0
        if slot is not None:
            inp = draw_trace(self.settings, api, stage, slot[1])
        elif conv is not None:
            inp = conv.draw(api, stage)
        else:
            inp = draw(self.settings, api, stage, self._prefix_group)
        target = self._target(inp)
        rid, traceparent = self._ids.next()
        call = Call(
            path=target.path,
            body=orjson.dumps(api.body(inp)),
            headers=target.headers,
            extra=((HEADER_REQUEST_ID, rid), (HEADER_TRACEPARENT, traceparent)),
            meta=replace(inp.meta, user_class=type(self).__name__, name=self._request_name, request_id=rid,
                         prefix_group=self._prefix_group if self._shares_prefix(slot) else None),
            stream=api.stream,
            prompt_tokens_client=inp.prompt_tokens,
            answer=api.answer if conv is None else conv.answer,
            opens_thinking=self.settings.opens_thinking and api.chat,
        )
        call.prompt_build_s = time.perf_counter() - building
        if slot is not None:
            pacer.sleep_until(slot[0])
            t0 = slot[0]
        else:
            t0 = pacer.wait_slot() if pacer is not None else None
        result = exchange(target.http, call, t0, env.llm.inflight, self.settings.count_text)
        env.events.request.fire(
            request_type="LLM",
            name=call.meta.name,
            response_time=result.e2e_s * 1000.0,
            response_length=result.output_tokens,
            exception=None if result.ok else LLMError(result.error_kind or "", _detail(result)),
            context={"llm_result": result},
            response=None,
            url=api.path,
            start_time=result.wall_start,
        )
        if conv is not None and (pause := conv.after(result.ok)) > 0:
            gevent.sleep(pause)
        if result.error_kind == "connection":
            lo, hi = CONNECT_BACKOFF_S
            self._backoff = min(max(self._backoff * 2, lo), hi)
            gevent.sleep(self._backoff)
        else:
            self._backoff = 0.0
        return result


def _detail(result: GenerationResult) -> str:
    msg = result.error_message or ""
    prefix = f"{result.error_kind}: "
    return msg[len(prefix) :] if msg.startswith(prefix) else msg


class StreamingChatUser(LLMUser):
    """Streams ``/v1/chat/completions`` with one user message of a drawn length."""

    abstract = False
    adapter = "chat"


class StreamingCompletionUser(LLMUser):
    """Streams ``/v1/completions`` with a raw prompt of a drawn length."""

    abstract = False
    adapter = "completions"


class BatchCompletionUser(LLMUser):
    """Non-streaming ``/v1/completions`` carrying ``--batch-size`` prompts; per-request latency and tokens."""

    abstract = False
    adapter = "completions-batch"
