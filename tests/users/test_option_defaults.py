"""The request defaults are defined once: an empty options object falls back to exactly what the options parse to."""

from __future__ import annotations

import argparse

from locust.argument_parser import LocustArgumentParser

from users import options
from users.settings import RunSettings


def _fields(s: RunSettings) -> tuple:
    return (str(s.input_len), str(s.output_len), s.ignore_eos, s.batch_size, s.request_timeout, s.rng.random())


def test_settings_fallbacks_are_the_option_defaults() -> None:
    parser = LocustArgumentParser()
    options.add_arguments(parser)
    parsed = parser.parse_args([])
    assert (parsed.input_len, parsed.output_len, parsed.batch_size, parsed.request_timeout, parsed.seed) == (
        options.INPUT_LEN_DEFAULT, options.OUTPUT_LEN_DEFAULT, options.BATCH_SIZE_DEFAULT,
        options.REQUEST_TIMEOUT_DEFAULT, options.SEED_DEFAULT)
    assert _fields(RunSettings.from_options(argparse.Namespace())) == _fields(RunSettings.from_options(parsed))
    assert ("fixed:512", "fixed:256", 300.0) == (options.INPUT_LEN_DEFAULT, options.OUTPUT_LEN_DEFAULT,
                                                 options.REQUEST_TIMEOUT_DEFAULT)  # the reference chat scenario
