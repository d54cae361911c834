"""shapes.registry: one registered entry is all a shape needs to be offered by --shape, planned, picked in the
web UI's start form, implied by its option and warned about when -u is given."""

from __future__ import annotations

import argparse
import logging
import sys

import pytest
from locust.argument_parser import LocustArgumentParser
from locust.env import Environment

from shapes.options import add_arguments
from shapes.plan import PlanError, Step
from shapes.plugin import install
from shapes.registry import SHAPES, Shape, implied_shapes, register, shape_names
from shapes.stage import Stage
from shapes.sweep import ConcurrencySweepShape, SweepShape
from tests.shapes.test_propagation import _Idle, _options
from webui.shape_form import install as install_shape_form


def toy_plan(options) -> list[Step]:
    """One stage at --toy-level users."""
    level = getattr(options, "toy_level", None)
    if not str(level or "").isdigit() or int(level) < 1:
        raise PlanError(f"--toy-level: {level!r} is not a user count")
    n = int(level)
    return [Step(Stage(f"toy={n}", users=n), users=n, spawn_rate=float(n), duration=5.0)]


class ToySweepShape(SweepShape):
    plan_name = "toy-sweep"
    build = staticmethod(toy_plan)


@pytest.fixture
def toy():
    shape = register(Shape(ToySweepShape, help="--toy-level", implied_by="toy_level", fields=("toy_level",),
                           users_from="--toy-level"))
    yield shape
    del SHAPES["toy-sweep"]


def test_registered_shapes_are_the_choices_in_order():
    assert shape_names() == ("none", "concurrency-sweep", "length-sweep", "rate-sweep", "trace-replay", "slo-search")
    assert all(name == entry.name == entry.shape_class.plan_name for name, entry in SHAPES.items())


def test_toy_shape_is_a_choice_of_shape_with_its_help(toy):
    parser = LocustArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["--shape", "toy-sweep"]).shape == "toy-sweep"
    shape_action = next(a for a in parser._actions if "--shape" in a.option_strings)
    assert "toy-sweep (--toy-level)" in shape_action.help
    assert "rate-sweep (open loop, --request-rate)" in shape_action.help


def test_toy_shape_plan_is_looked_up_by_name(toy):
    steps = SHAPES["toy-sweep"].plan(argparse.Namespace(toy_level="3"))
    assert [(s.stage.name, s.users) for s in steps] == [("toy=3", 3)]
    with pytest.raises(PlanError, match="--toy-level"):
        SHAPES["toy-sweep"].plan(argparse.Namespace(toy_level="x"))


def test_toy_option_alone_implies_the_toy_shape_and_u_is_warned_about(toy, caplog):
    assert implied_shapes(argparse.Namespace(toy_level="2", sweep_users=None)) == ["toy-sweep"]
    env = Environment(user_classes=[_Idle], parsed_options=_options(toy_level="2", num_users=5))
    env.create_local_runner()
    with caplog.at_level(logging.WARNING):
        install(env)  # no KeyError: the -u hint comes from the entry
    assert isinstance(env.shape_class, ToySweepShape)
    assert "-u/--users is ignored by --shape toy-sweep (users: --toy-level)" in caplog.text
    env.runner.quit()


def test_two_implying_options_are_refused(toy, caplog):
    env = Environment(user_classes=[_Idle], parsed_options=_options(toy_level="2", sweep_users="1,2"))
    env.create_local_runner()
    with pytest.raises(SystemExit):
        install(env)
    assert "several sweeps asked for (concurrency-sweep, toy-sweep)" in caplog.text


def test_web_ui_form_picks_the_toy_shape_with_its_field(toy, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["locust"])
    env = Environment(user_classes=[_Idle], parsed_options=_options(headless=False, toy_level=None))
    env.create_local_runner()
    env.create_web_ui("127.0.0.1", 0, delayed_start=True)
    install(env)
    install_shape_form(env)  # the form's check is a web route (webui/shape_form.py)
    client = env.web_ui.app.test_client()
    base = {"user_count": "1", "spawn_rate": "1", "host": "http://127.0.0.1:1"}
    r = client.post("/swarm", data={**base, "shape": "toy-sweep", "toy_level": "zero"}).get_json()
    assert r["success"] is False and "--toy-level: 'zero'" in r["message"] and env.shape_class is None
    r = client.post("/swarm", data={**base, "shape": "toy-sweep", "toy_level": "4"}).get_json()
    assert r["success"], r
    assert isinstance(env.shape_class, ToySweepShape)
    r = client.post("/swarm", data={**base, "shape": "no-such"}).get_json()
    choices = "none, concurrency-sweep, length-sweep, rate-sweep, trace-replay, slo-search, toy-sweep"
    assert r["success"] is False and f"not one of {choices}" in r["message"]
    env.runner.quit()


def test_register_refuses_a_taken_name_and_an_unsaid_user_count():
    with pytest.raises(ValueError, match="taken"):
        register(Shape(ConcurrencySweepShape, help="", implied_by="sweep_users", fields=(), users_from="x"))
    with pytest.raises(ValueError, match="users_from"):
        register(Shape(ToySweepShape, help="", implied_by="toy_level", fields=("toy_level",)))
    assert "toy-sweep" not in SHAPES
