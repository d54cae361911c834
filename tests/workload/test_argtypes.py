"""workload.argtypes: every shared option type accepts its form and, refusing, names the form it expects."""

from __future__ import annotations

import argparse

import pytest

from workload import argtypes as t

CASES = [
    # (type, accepted text -> value, rejected texts, fragment of the message naming the accepted form)
    (t.positive_int, {"1": 1, " 64 ": 64}, ("0", "-3", "1.5", "x", ""), "a positive integer (a whole number >= 1)"),
    (t.non_negative_int, {"0": 0, "7": 7}, ("-1", "2.0", "many"), "an integer >= 0"),
    (t.seed, {"0": 0, "42": 42}, ("-1", "x"), "a seed: an integer >= 0"),
    (t.port, {"0": 0, "9646": 9646, "65535": 65535}, ("-1", "65536", "http"), "a TCP port number 0..65535"),
    (t.positive_number, {"2": 2.0, "0.25": 0.25}, ("0", "-1", "inf", "nan", "x"), "a number > 0"),
    (t.seconds, {"30": 30.0, "2.5": 2.5}, ("0", "-1", "inf", "1e8", "soon"), "a number of seconds > 0"),
    (t.non_negative_seconds, {"0": 0.0, "10": 10.0}, ("-0.5", "nan", "x"), "a number of seconds >= 0"),
    (t.milliseconds, {"800": 800.0, "0.5": 0.5}, ("0", "-800", "fast"), "a number of milliseconds > 0"),
    (t.fraction, {"0": 0.0, "0.05": 0.05, "1": 1.0}, ("-0.1", "1.5", "half"), "a fraction between 0 and 1"),
    (t.url_or_off, {"off": "off", "OFF": "OFF", "http://h:8000/metrics": "http://h:8000/metrics",
                    "https://h/metrics": "https://h/metrics"}, ("h:8000/metrics", "ftp://h", ""),
     "an http(s):// URL or 'off'"),
    (t.length_spec, {"fixed:512": "fixed:512", "uniform:1:8": "uniform:1:8"}, ("foo:1", "uniform:8"),
     "expected one of fixed:N"),
]


@pytest.mark.parametrize("check, accepted, rejected, form", CASES, ids=[c[0].__name__ for c in CASES])
def test_type_accepts_its_form_and_names_it_when_refusing(check, accepted, rejected, form):
    for text, value in accepted.items():
        assert check(text) == value
    for text in rejected:
        with pytest.raises(argparse.ArgumentTypeError) as e:
            check(text)
        assert form in str(e.value) and repr(text) in str(e.value)


def test_factories_bound_both_ends():
    size_ratio = t.number(above=0.0, at_most=1.0, form="a ratio in (0, 1]")
    assert size_ratio("1") == 1.0
    for bad in ("0", "1.01"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"expected a ratio in \(0, 1\], got"):
            size_ratio(bad)
    small = t.integer(least=2, at_most=3, form="2 or 3")
    assert [small("2"), small("3")] == [2, 3]
    with pytest.raises(argparse.ArgumentTypeError, match="expected 2 or 3, got '4'"):
        small("4")


def test_as_text_validates_but_keeps_the_string():
    keep = t.as_text(t.seconds)
    assert keep(" 60 ") == "60" and keep.__name__ == "seconds"
    with pytest.raises(argparse.ArgumentTypeError, match="seconds > 0"):
        keep("0")


def test_argparse_reports_the_option_and_the_form(capsys):
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=t.positive_int)
    with pytest.raises(SystemExit):
        parser.parse_args(["--batch-size", "0"])
    err = capsys.readouterr().err
    assert "argument --batch-size: expected a positive integer (a whole number >= 1), got '0'" in err


def test_output_path_fails_at_start_for_a_file_the_run_could_not_write_at_its_end(tmp_path):
    assert t.output_path(str(tmp_path / "s.json")) == str(tmp_path / "s.json")
    assert t.output_path(str(tmp_path / "run")) == str(tmp_path / "run")  # a --llm-csv prefix
    assert t.output_path("") == ""  # not set
    assert t.output_path(str(tmp_path / "new" / "deeper" / "s.json"))  # missing folders: the writers create them
    (tmp_path / "plain").write_text("")
    refused = {
        str(tmp_path / "plain" / "s.json"): f"expected a path under a folder ({str(tmp_path / 'plain')!r} is a file)",
        str(tmp_path): "expected a file path, not a folder",
    }
    for text, says in refused.items():
        with pytest.raises(argparse.ArgumentTypeError) as e:
            t.output_path(text)
        assert str(e.value).startswith(says) and str(e.value).endswith(f"got {text!r}"), str(e.value)
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / "s.json").write_text("{}")
    (tmp_path / "ro" / "s.json").chmod(0o444)
    import os  # noqa: PLC0415

    if os.geteuid() != 0:  # root writes anything: the permission check only bites for other users
        with pytest.raises(argparse.ArgumentTypeError, match="is not writable"):
            t.output_path(str(tmp_path / "ro" / "s.json"))
