"""shapes.options / shapes.values: validators accept the documented forms, name option and forms when refusing."""

from __future__ import annotations

import argparse

import pytest

from shapes import values
from shapes.options import add_arguments
from shapes.values import parse_arrival, parse_length_sweep, parse_rates, parse_users_list


def test_users_list():
    assert parse_users_list("1, 2,4,64") == [1, 2, 4, 64]
    for bad in ("", "0,1", "a", "1,-2", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError, match="--sweep-users"):
            parse_users_list(bad)


def test_rates():
    assert parse_rates("2,4.5") == [2.0, 4.5]
    for bad in ("", "0", "-1", "x", "inf", "nan"):
        with pytest.raises(argparse.ArgumentTypeError, match="--request-rate"):
            parse_rates(bad)


@pytest.mark.parametrize(("parse", "option", "good", "bad"), [
    (values.parse_stage_duration, "--stage-duration", ("2.5", 2.5), "0"),
    (values.parse_stage_warmup, "--stage-warmup", ("0", 0.0), "-1"),
    (values.parse_pool, "--max-concurrency", ("8", 8), "0"),
    (values.parse_speedup, "--trace-speedup", ("0.5", 0.5), "0"),
    (values.parse_search_max_probes, "--search-max-probes", ("2", 2), "1"),
    (values.parse_search_precision, "--search-precision", ("0.1", 0.1), "-1"),
    (values.parse_gpus, "--gpus", ("8", 8), "1.5"),
    (values.parse_gpu_hour_price, "--gpu-hour-price", ("2.5", 2.5), "x"),
])
def test_each_grammar_parses_and_names_its_option(parse, option, good, bad):
    assert parse(good[0]) == good[1]
    with pytest.raises(argparse.ArgumentTypeError, match=f"^{option}: expected .*, got {bad!r}$"):
        parse(bad)


def test_arrival():
    assert parse_arrival("poisson") == ("poisson", 1.0)
    assert parse_arrival("Constant") == ("constant", 0.0)
    assert parse_arrival("gamma:0.5") == ("gamma", 0.5)
    for bad in ("gamma", "gamma:0", "gamma:-1", "gamma:x", "uniform"):
        with pytest.raises(argparse.ArgumentTypeError, match="poisson, constant or gamma:CV"):
            parse_arrival(bad)


def test_length_sweep_uses_workload_grammar():
    assert parse_length_sweep("uniform:128:1024,zipf:1.2:16:4096") == ["uniform:128:1024", "zipf:1.2:16:4096"]
    with pytest.raises(argparse.ArgumentTypeError, match="--length-sweep: bad SPEC 'zipf:1.2'"):
        parse_length_sweep("uniform:128:1024,zipf:1.2")


def _parser():
    from locust.argument_parser import LocustArgumentParser

    p = LocustArgumentParser()
    add_arguments(p)
    return p


def test_registered_options_keep_strings_and_defaults():
    ns = _parser().parse_args(["--shape", "rate-sweep", "--request-rate", "2,4", "--arrival", "gamma:2"])
    assert (ns.shape, ns.request_rate, ns.arrival, ns.max_concurrency) == ("rate-sweep", "2,4", "gamma:2", "256")
    assert _parser().parse_args([]).shape == "none"


def test_bad_option_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(["--sweep-users", "1,x"])
    assert "--sweep-users: 'x' is not a positive integer" in capsys.readouterr().err


def test_plans_fall_back_to_the_option_defaults():
    from shapes.plan import rate_plan

    parsed = _parser().parse_args(["--request-rate", "2"])
    assert rate_plan(argparse.Namespace(request_rate="2")) == rate_plan(parsed)
    step = rate_plan(parsed)[0]
    assert (step.users, step.duration, step.warmup, parsed.arrival) == (256, 60.0, 0.0, "poisson")
