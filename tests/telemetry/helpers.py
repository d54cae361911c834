"""Test helpers: a fresh Environment with telemetry installed (no network, no Locust process)."""

from __future__ import annotations

import argparse

from locust import User
from locust.env import Environment

from run.context import attach
from shapes.stage import StageBoard
from telemetry.hub import TelemetryHub
from telemetry.plugin import LocalRole, install


class _Nobody(User):
    abstract = True


def options(**overrides) -> argparse.Namespace:
    base = dict(prometheus_port=0, prometheus_host="127.0.0.1", server_metrics_url="off", server_metrics_interval=2.0,
                slo_ttft_p99_ms=None, slo_itl_p95_ms=None, slo_decode_span_p99_ms=None, slo_error_rate=None,
                slo_preset=None, attribution_window=10.0, llm_summary_json=None, llm_csv=None, llm_report=None,
                model="tiny", num_users=4, input_len="fixed:512", headless=True)
    base.update(overrides)
    return argparse.Namespace(**base)


def local_env(board: bool = True, **opts) -> tuple[Environment, TelemetryHub, LocalRole]:
    """A local run: the environment, its telemetry hub (``environment.llm.telemetry``), and the role ``install``
    chose (to drive it)."""
    env = Environment(user_classes=[_Nobody], parsed_options=options(**opts), host="http://127.0.0.1:9")
    env.create_local_runner()
    if board:
        attach(env).stage_board = StageBoard()
    role = install(env)
    assert isinstance(role, LocalRole) and env.llm.telemetry is role.hub
    return env, role.hub, role


def fire(env: Environment, result) -> None:
    env.events.request.fire(request_type="POST", name=result.meta.name, response_time=result.e2e_s * 1000,
                            response_length=result.output_tokens, exception=None,
                            context={"llm_result": result})
