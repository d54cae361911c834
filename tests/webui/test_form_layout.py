"""The start form's grouping table: every option the form shows has a group and a label, every option a shape
reads sits in the shape group, and the script Locust's page loads carries the table (the browser half:
tests/webui/test_form_browser.py)."""

from __future__ import annotations

import json
import re

from locust.argument_parser import default_args_dict, get_parser, ui_extra_args_dict

import locustfile  # noqa: F401  (registers the project's options)
from shapes.registry import SHAPES
from webui.form_layout import GROUPS, LAYOUT, camel, layout, script


def test_every_form_option_has_a_group_and_a_label_and_the_table_names_only_real_options():
    shown = set(ui_extra_args_dict([]))
    assert shown - set(LAYOUT) == set(), "add these options to webui/form_layout.py's LAYOUT"
    registered = {a.dest for a in get_parser()._actions if a.option_strings} - set(default_args_dict())
    assert set(LAYOUT) - registered == set()
    assert {g for g, _ in LAYOUT.values()} <= set(GROUPS) and all(label for _, label in LAYOUT.values())
    labels = [label for _, label in LAYOUT.values()]
    assert len(labels) == len(set(labels))


def test_shape_fields_sit_with_the_shape_and_know_which_shapes_read_them():
    for shape in SHAPES.values():
        for dest in set(shape.fields) & set(LAYOUT):
            assert LAYOUT[dest][0] == "shape", dest
    rows = {r["name"]: r for r in layout()}
    assert rows["requestRate"]["shapes"] == ["rate-sweep"] and rows["inputLen"]["shapes"] is None
    assert set(rows["stageWarmup"]["shapes"]) == set(SHAPES)
    groups = [r["group"] for r in layout()]
    assert groups == sorted(groups, key=list(GROUPS).index)  # grouped, in GROUPS' order


def test_field_names_are_the_ones_locust_gives_the_inputs():
    assert camel("slo_ttft_p99_ms") == "sloTtftP99Ms" and camel("input_len") == "inputLen" and camel("seed") == "seed"
    table = json.loads(re.search(r"var L = (\[.*?\]), GROUPS", script()).group(1))
    assert table == layout()
