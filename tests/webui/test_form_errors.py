"""The start form's failure paths: an unknown ``--shape`` is refused (nothing starts, nothing changes), and a
run after a sweep with ``shape=none`` is a plain -u/-r run again. Flask's test client on a real Environment with
a web UI, the shapes and web UI plugins installed as the locustfile installs them."""

from __future__ import annotations

import sys

import gevent
import pytest
from locust.env import Environment

from shapes.plugin import install as install_shapes
from shapes.sweep import LengthSweepShape, RateSweepShape
from tests.shapes.test_propagation import _Idle, _options
from webui.plugin import install as install_webui


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["locust"])
    environment = Environment(user_classes=[_Idle], parsed_options=_options(headless=False))
    environment.create_local_runner()
    environment.create_web_ui("127.0.0.1", 0, delayed_start=True)
    install_shapes(environment)
    install_webui(environment)
    yield environment
    environment.runner.quit()


def _post(env, path: str, **form):
    base = {"user_count": "3", "spawn_rate": "50", "host": "http://127.0.0.1:1"}
    return env.web_ui.app.test_client().post(path, data={**base, **form} if path == "/swarm" else form)


def _swarm(env, **form) -> dict:
    return _post(env, "/swarm", **form).get_json()


def _wait(cond, timeout: float = 5.0) -> bool:
    for _ in range(int(timeout / 0.05)):
        if cond():
            return True
        gevent.sleep(0.05)
    return cond()


@pytest.mark.parametrize("name", ["bogus", "rate_sweep", "RateSweepShape", " none"])
def test_unknown_shape_is_refused_naming_the_choices(env, name):
    r = _swarm(env, shape=name)
    assert r == {
        "success": False,
        "message": f"--shape: {name!r} is not one of none, concurrency-sweep, length-sweep, rate-sweep, trace-replay",
        "host": env.host,
    }
    gevent.sleep(0.3)
    assert env.shape_class is None and env.runner.state == "ready" and env.runner.user_count == 0


def test_unknown_shape_after_a_sweep_leaves_the_sweep_installed(env):
    r = _swarm(env, shape="length-sweep", length_sweep="fixed:64", stage_duration="30")
    assert r["success"], r
    sweep = env.shape_class
    assert isinstance(sweep, LengthSweepShape)
    env.runner.stop()
    assert _wait(lambda: env.runner.state == "stopped")
    r = _swarm(env, shape="nope")
    assert r["success"] is False and "'nope' is not one of" in r["message"]
    assert env.shape_class is sweep and env.runner.state == "stopped"


def test_switching_from_a_sweep_back_to_none_runs_plain_users(env):
    r = _swarm(env, shape="rate-sweep", request_rate="20", stage_duration="30", max_concurrency="2")
    assert r["success"], r
    assert isinstance(env.shape_class, RateSweepShape)
    assert _wait(lambda: env.llm.pacer is not None and env.llm.pacer.rate == 20.0)
    assert _post(env, "/stop").status_code == 200
    assert _wait(lambda: env.runner.state == "stopped")

    r = _swarm(env, shape="none", user_count="2")
    assert r["success"], r
    assert "shape class" not in r["message"]  # Locust started a user-count run, not a shape run
    assert env.shape_class is None
    assert _wait(lambda: env.runner.user_count == 2 and env.runner.state == "running")
    # closed loop again: no open-loop pacer rate, the stage is the plain run's, not the sweep's
    assert env.llm.pacer is None or env.llm.pacer.rate is None
    assert env.llm.stage_board.current.rate is None and env.llm.stage_board.current.name == "main"
