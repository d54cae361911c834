"""Choosing a sweep in the web UI's start form (Flask test client on a real Environment + WebUI)."""

from __future__ import annotations

import sys

import gevent
import pytest
from locust.env import Environment

from shapes.plugin import install
from shapes.sweep import LengthSweepShape
from tests.shapes.runners import IdleUser, runner_options
from webui.shape_form import install as install_shape_form


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["locust"])
    environment = Environment(user_classes=[IdleUser], parsed_options=runner_options(headless=False))
    environment.create_local_runner()
    environment.create_web_ui("127.0.0.1", 0, delayed_start=True)
    install(environment)
    install_shape_form(environment)  # the form's check is a web route: webui/ adds it over shapes' set_shape
    yield environment
    environment.runner.quit()


def _swarm(env, **form):
    base = {"user_count": "3", "spawn_rate": "50", "host": "http://127.0.0.1:1"}
    return env.web_ui.app.test_client().post("/swarm", data={**base, **form}).get_json()


def test_form_picks_length_sweep_with_its_settings(env):
    r = _swarm(env, shape="length-sweep", length_sweep="fixed:64,fixed:128", stage_duration="5")
    assert r["success"], r
    assert "shape class 'LengthSweepShape'" in r["message"]
    assert isinstance(env.shape_class, LengthSweepShape) and env.shape_class.runner is env.runner
    step = env.shape_class.current_step or env.shape_class.plan()[0]
    assert (step.users, step.stage.input_len) == (3, "fixed:64")  # the form's user count and SPEC


def test_form_with_bad_settings_is_refused_not_started(env):
    r = _swarm(env, shape="rate-sweep", request_rate="")
    assert r["success"] is False and "--request-rate is required" in r["message"]
    assert env.shape_class is None and env.runner.state == "ready"
    r = _swarm(env, shape="concurrency-sweep", sweep_users="1,zero")
    assert r["success"] is False and "--sweep-users: 'zero'" in r["message"]


def test_form_none_keeps_plain_user_count(env):
    r = _swarm(env, shape="none")
    assert r["success"], r
    assert env.shape_class is None
    gevent.sleep(0.5)  # the web UI spawns in a greenlet
    assert env.runner.user_count == 3
