"""Throwaway locustfile for telemetry integration tests: a User that fires synthetic LLM results.

Each request event carries a GenerationResult with TTFT cycling through 50..149 ms (1 ms steps)
and 16 tokens 10 ms apart, so merged quantiles are known. ``SYNTH_FAIL_EVERY=N`` makes every
N-th request a ``timeout`` failure.
"""

from __future__ import annotations

import itertools
import os

from locust import User, constant, events, task

from telemetry.options import add_arguments as add_telemetry_options
from telemetry.plugin import install as install_telemetry
from tests.telemetry.synthetic import make_result

FAIL_EVERY = int(os.environ.get("SYNTH_FAIL_EVERY", "0"))


@events.init_command_line_parser.add_listener
def _options(parser, **_kw):
    add_telemetry_options(parser)


@events.init.add_listener
def _install(environment, **_kw):
    install_telemetry(environment)


class SynthUser(User):
    wait_time = constant(0.02)
    _counter = itertools.count()

    @task
    def generate(self) -> None:
        i = next(self._counter)
        failed = FAIL_EVERY > 0 and i % FAIL_EVERY == FAIL_EVERY - 1
        r = make_result(ttft=0.050 + 0.001 * (i % 100), itl=0.010, tokens=16, ok=not failed,
                        error_kind="timeout" if failed else None)  # fmt: skip
        self.environment.events.request.fire(
            request_type="POST", name=r.name, response_time=r.e2e_s * 1000, response_length=r.output_tokens,
            exception=RuntimeError("timeout") if failed else None, context={"llm_result": r},
        )  # fmt: skip
