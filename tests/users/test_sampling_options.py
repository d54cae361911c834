"""--temperature, --top-p and --extra-body: parsed at start (a bad value is one argparse line), merged into every
body each adapter builds, recorded in the run record."""

from __future__ import annotations

import argparse

import pytest
from locust.argument_parser import LocustArgumentParser

from shapes.stage import Stage
from users.adapters import ADAPTERS
from users.options import add_arguments, prompt_source, sampling_fields
from users.request import draw
from users.routing import add_arguments as add_route_arguments
from users.settings import RunSettings


def parse(*argv: str) -> argparse.Namespace:
    p = LocustArgumentParser()
    add_arguments(p)
    add_route_arguments(p, None)
    return p.parse_args(list(argv))


def test_unset_sends_nothing_and_set_reaches_every_adapters_body() -> None:
    assert sampling_fields(parse()) == {}
    o = parse("--temperature", "0", "--top-p", "0.9", "--extra-body", '{"top_k": 20, "temperature": 0.25}',
              "--input-len", "16", "--output-len", "8", "--model", "m")
    s = RunSettings.from_options(o)
    for adapter in ADAPTERS.values():
        body = adapter.body(draw(s, adapter, Stage("main")))
        assert (body["temperature"], body["top_p"], body["top_k"]) == (0.25, 0.9, 20), adapter.name  # extra wins
        assert body["max_tokens"] == 8 and body["stream"] is adapter.stream


@pytest.mark.parametrize(("argv", "says"), [
    (["--extra-body", "{top_k: 1}"], "not JSON"),
    (["--extra-body", "[1, 2]"], "a JSON object"),
    (["--extra-body", '{"stream": false}'], "the client sets them), got stream"),
    (["--temperature", "-1"], "a temperature >= 0"),
    (["--top-p", "0"], "a top-p in (0, 1]"),
])
def test_a_bad_value_is_one_line_at_start(argv, says, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        parse(*argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and says in err and "Traceback" not in err
    assert f"argument {argv[0]}" in err


def test_prompt_source_names_the_texts_origin(tmp_path) -> None:
    assert prompt_source(parse()) == "synthetic-natural"
    assert prompt_source(parse("--synthetic-text", "words")) == "synthetic-words"
    f = tmp_path / "p.jsonl"
    f.write_text('{"prompt": "hello there"}\n')
    assert prompt_source(parse("--prompt-file", str(f))) == "prompt-file"
