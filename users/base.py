"""The LLM users: an abstract :class:`LLMUser` on ``FastHttpUser`` and the three concrete users.

Each task iteration sends ONE LLM request and fires ONE Locust request event for it:
``name`` = endpoint and mode (``POST /v1/chat/completions [stream]``), ``response_time`` = E2E ms,
``response_length`` = output tokens, ``context={"llm_result": GenerationResult}``, and on failure an
:class:`~users.client.LLMError` whose message is ``<kind>: <server body, truncated>``.

    class MyChat(StreamingChatUser):
        weight = 3

A user reads the process settings (``environment.llm_users``, built at test_start), stamps the current
stage (``environment.llm_stage_board``), takes its prompt length from the stage's ``input_len`` or
``--input-len``, and in open loop waits for ``environment.llm_pacer.wait_slot()`` before sending.
"""

from __future__ import annotations

import orjson
from geventhttpclient.url import URL
from locust import constant, task
from locust.contrib.fasthttp import FastHttpUser

from shapes.stage import MAIN
from users.client import Call, LLMError, exchange
from users.result import GenerationResult
from users.settings import STREAM_OPTIONS, RunSettings


class LLMUser(FastHttpUser):
    """Sends LLM requests back to back (closed loop) or on the pacer's schedule (open loop)."""

    abstract = True

    path: str = ""
    """Endpoint path, e.g. ``/v1/chat/completions``."""

    stream: bool = True
    """Ask for a streamed (SSE) answer and time each chunk."""

    chat: bool = False
    """Chat messages (the chat template's tokens count in the prompt) rather than a raw prompt."""

    wait_time = constant(0)
    """No think time: the load is set by the number of users (or by the pacer)."""

    def __init__(self, environment) -> None:
        settings = getattr(environment, "llm_users", None)
        if settings is None:  # an Environment built without the plugin (tests, library use)
            settings = environment.llm_users = RunSettings.from_options(environment.parsed_options)
        self.settings: RunSettings = settings
        # with the process's stall watch, sockets block without a per-read timer (see users.watchdog)
        watched = getattr(environment, "llm_stall_watch", None) is not None
        self.network_timeout = None if watched else settings.request_timeout
        self.connection_timeout = min(settings.request_timeout, 60.0)
        super().__init__(environment)
        self._pool = self.client.client.clientpool
        self._http = self._pool.get_client(URL(self.host))
        self._request_name = f"POST {self.path} [{'stream' if self.stream else 'batch'}]"
        self._headers = settings.headers(self.stream)

    def body(self, max_tokens: int, stage_input_len: str | None) -> tuple[dict, int, int]:
        """(request body, prompt tokens by the client, prompts in the request)."""
        raise NotImplementedError

    def _routed(self, body: dict) -> tuple[object, str, dict[str, str], str | None]:
        """(HTTP client, path, headers, version): ``--host``, or the route the fingerprint picks."""
        picked = self.settings.route(body.get("messages") if self.chat else body.get("prompt"))
        if picked is None:
            return self._http, self.path, self._headers, None
        version, base_url, meta = picked
        url = URL(base_url)
        base_path = url.path.rstrip("/") if url.path not in ("", "/") else ""
        return self._pool.get_client(url), base_path + self.path, {**self._headers, **meta}, version

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
        self.send()

    def send(self) -> GenerationResult:
        env = self.environment
        board = getattr(env, "llm_stage_board", None)
        stage = board.current if board is not None else MAIN
        max_tokens = self.settings.max_tokens()
        body, prompt_tokens, batch = self.body(max_tokens, stage.input_len)
        http, path, headers, version = self._routed(body)
        call = Call(
            path=path,
            body=orjson.dumps(body),
            headers=headers,
            name=self._request_name,
            user_class=type(self).__name__,
            stage=stage.name,
            stream=self.stream,
            prompt_tokens_client=prompt_tokens,
            max_tokens=max_tokens,
            batch_size=batch,
            version=version,
        )
        pacer = getattr(env, "llm_pacer", None)
        t0 = pacer.wait_slot() if pacer is not None else None
        result = exchange(http, call, t0, getattr(env, "llm_inflight", None), self.settings.count_text)
        env.events.request.fire(
            request_type="LLM",
            name=call.name,
            response_time=result.e2e_s * 1000.0,
            response_length=result.output_tokens,
            exception=None if result.ok else LLMError(result.error_kind or "", _detail(result)),
            context={"llm_result": result},
            response=None,
            url=self.path,
            start_time=result.wall_start,
        )
        return result


def _detail(result: GenerationResult) -> str:
    msg = result.error_message or ""
    prefix = f"{result.error_kind}: "
    return msg[len(prefix) :] if msg.startswith(prefix) else msg


class StreamingChatUser(LLMUser):
    """Streams ``/v1/chat/completions`` with one user message of a drawn length."""

    abstract = False
    path = "/v1/chat/completions"
    chat = True

    def body(self, max_tokens, stage_input_len):
        p = self.settings.prompt(True, stage_input_len)
        messages = [{"role": "user", "content": p.text}]
        body = {"messages": messages, "stream": True, "stream_options": STREAM_OPTIONS}
        return {**body, **self.settings.sampling(max_tokens)}, p.tokens, 1


class StreamingCompletionUser(LLMUser):
    """Streams ``/v1/completions`` with a raw prompt of a drawn length."""

    abstract = False
    path = "/v1/completions"

    def body(self, max_tokens, stage_input_len):
        p = self.settings.prompt(False, stage_input_len)
        body = {"prompt": p.text, "stream": True, "stream_options": STREAM_OPTIONS}
        return {**body, **self.settings.sampling(max_tokens)}, p.tokens, 1


class BatchCompletionUser(LLMUser):
    """Non-streaming ``/v1/completions`` carrying ``--batch-size`` prompts; per-request latency and tokens."""

    abstract = False
    path = "/v1/completions"
    stream = False

    def body(self, max_tokens, stage_input_len):
        prompts = [self.settings.prompt(False, stage_input_len) for _ in range(self.settings.batch_size)]
        body = {"prompt": [p.text for p in prompts], "stream": False}
        return {**body, **self.settings.sampling(max_tokens)}, sum(p.tokens for p in prompts), len(prompts)
