"""workload.jsonl: the one JSON Lines reader: line numbers, blank and comment lines, the file:line refusal."""

from __future__ import annotations

import pytest

from workload.jsonl import json_lines


class InputError(ValueError):
    """A caller's own refusal (the tokenizer CLI has one)."""


def test_values_with_their_line_numbers_blank_lines_skipped():
    lines = ['{"a": 1}', "", "  ", "[2, 3]", "# not a comment here"]
    with pytest.raises(ValueError, match=r"^f\.jsonl:5: not JSON \(Expecting value\)$"):
        list(json_lines("f.jsonl", lines))
    assert list(json_lines("f.jsonl", lines[:4])) == [(1, {"a": 1}), (4, [2, 3])]
    assert list(json_lines("f.jsonl", lines, comments=True)) == [(1, {"a": 1}), (4, [2, 3])]


def test_the_refusal_takes_the_callers_error_type_and_hint():
    with pytest.raises(InputError, match=r"^log:2: not JSON \(.*\); each line is an object$"):
        list(json_lines("log", ["1", "{oops"], error=InputError, hint="each line is an object"))
