"""Test-only locustfile: the project's locustfile plus a listener that writes one JSON line per Locust
request event (from the users' ``context["llm_result"]``) to ``$LLM_TEST_RESULTS``.

    LLM_TEST_RESULTS=/tmp/r.jsonl locust -f tests/users/results_locustfile.py --headless ...
"""

from __future__ import annotations

import os

import orjson
from locust import events

import locustfile  # noqa: F401  (options, plugins)
from users import BatchCompletionUser, StreamingChatUser, StreamingCompletionUser  # noqa: F401


@events.init.add_listener
def _dump(environment, **_kw) -> None:
    out = open(os.environ["LLM_TEST_RESULTS"], "ab")  # noqa: SIM115  (closed at quit)

    def on_request(name, response_time, response_length, exception, context, **_kw) -> None:
        r = (context or {}).get("llm_result")
        row = {
            "name": name,
            "response_time": response_time,
            "response_length": response_length,
            "exception": None if exception is None else str(exception),
            "has_result": r is not None,
        }
        if r is not None:
            row.update(
                ok=r.ok,
                t0=r.t0,
                kind=r.error_kind,
                ttft=r.ttft_s,
                ttfa=r.ttfa_s,
                thinking=r.thinking_s,
                reasoning_tokens=r.reasoning_tokens,
                e2e=r.e2e_s,
                tpot=r.tpot_s,
                itl=r.itl_samples().tolist(),
                gaps=r.inter_chunk_samples().tolist(),
                output_tokens=r.output_tokens,
                prompt_tokens=r.prompt_tokens,
                prompt_tokens_client=r.prompt_tokens_client,
                source=r.token_source,
                stage=r.stage,
                user_class=r.user_class,
                version=r.version,
                batch_size=r.batch_size,
                max_tokens=r.max_tokens,
                turn=r.turn,
            )
        out.write(orjson.dumps(row) + b"\n")
        out.flush()

    environment.events.request.add_listener(on_request)
    environment.events.quit.add_listener(lambda **_: out.close())
