"""The length SPEC grammar: every form, its bounds, its shape, seeding and the error messages."""

from __future__ import annotations

import json

import numpy as np
import pytest

from workload.lengths import FORMS, parse_spec


def draws(spec: str, n: int = 20000, seed: int = 1) -> np.ndarray:
    return parse_spec(spec).sample(np.random.default_rng(seed), n)


def test_fixed_and_bare_integer() -> None:
    assert set(draws("fixed:512", 100)) == {512}
    assert str(parse_spec("512")) == "fixed:512"
    assert parse_spec("fixed:7").sample(np.random.default_rng(0)) == 7


def test_uniform_is_inclusive_and_flat() -> None:
    x = draws("uniform:10:13")
    assert set(x) == {10, 11, 12, 13}
    assert np.allclose(np.bincount(x)[10:] / len(x), 0.25, atol=0.02)


def test_normal_truncated_keeps_bounds_and_centre() -> None:
    x = draws("normal:100:50:60:140")
    assert x.min() >= 60 and x.max() <= 140
    assert abs(np.median(x) - 100) <= 3
    y = draws("normal:100:10")
    assert abs(y.mean() - 100) < 0.5 and abs(y.std() - 10) < 0.5


def test_lognormal_median_and_bounds() -> None:
    x = draws("lognormal:200:0.5")
    assert abs(np.median(x) - 200) < 6
    z = draws("lognormal:200:1.5:50:400")
    assert z.min() >= 50 and z.max() <= 400


@pytest.mark.parametrize("alpha", [0.5, 1.0, 1.2, 2.5])
def test_zipf_bounded_follows_the_power_law(alpha: float) -> None:
    x = draws(f"zipf:{alpha}:16:64", n=60000)
    assert x.min() >= 16 and x.max() <= 64
    ranks = np.arange(1, 50)
    p = ranks**-alpha / (ranks**-alpha).sum()
    observed = np.bincount(x - 16, minlength=49)[:49] / len(x)
    assert np.abs(observed - p).max() < 0.01
    assert observed[0] > observed[1] > observed[5]


def test_file_lengths_plain_and_jsonl(tmp_path) -> None:
    plain = tmp_path / "lens.txt"
    plain.write_text("# comment\n10\n20\n\n30\n")
    assert set(draws(f"file:{plain}", 3000)) == {10, 20, 30}
    jl = tmp_path / "lens.jsonl"
    jl.write_text("\n".join(json.dumps(o) for o in [{"input_len": 5}, {"prompt": "hello world"}, 9]))
    assert set(draws(f"file:{jl}", 3000)) == {5, 2, 9}  # "hello world" is 2 DeepSeek tokens


def test_seeded_generator_repeats_and_workers_differ() -> None:
    d = parse_spec("uniform:1:1000000")
    a = d.sample(np.random.default_rng(5 + 0), 50)
    b = d.sample(np.random.default_rng(5 + 0), 50)
    c = d.sample(np.random.default_rng(5 + 1), 50)
    assert (a == b).all() and not (a == c).all()


@pytest.mark.parametrize(
    "spec",
    [
        "foo:1",
        "fixed",
        "fixed:0",
        "fixed:x",
        "uniform:5",
        "uniform:9:3",
        "normal:1",
        "normal:10:-1",
        "lognormal:0:1",
        "zipf:0:1:10",
        "zipf:1.2:10",
        "file:/no/such/file",
        "",
        "normal:nan:1",
    ],
)
def test_bad_specs_name_the_expected_forms(spec: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_spec(spec)
    assert FORMS in str(e.value)
