"""What the two test servers share (server/core/): one fault vocabulary, one chunk framing."""

from __future__ import annotations

import pytest

from server.core.faults import ALIASES, KINDS, parse_faults
from server.core.http import chunk
from server.sim.cli import build_parser
from server.sim.faults import DEFAULT_KINDS


def test_fault_lists_resolve_other_names_and_refuse_unknown_kinds_naming_the_accepted_ones() -> None:
    assert parse_faults(" cut, hang ,nodone") == ("cut", "stall", "nodone")
    assert set(ALIASES.values()) <= set(KINDS)
    for bad in ("boom", "", "cut,,boom"):
        with pytest.raises(ValueError, match=",".join(KINDS)):
            parse_faults(bad)
    with pytest.raises(ValueError, match="'nodone'"):
        parse_faults("cut,nodone", served=("cut",))


def test_both_servers_take_the_same_fault_names() -> None:
    from server.scripted.app import _parse as scripted_args

    every = ",".join([*KINDS, *ALIASES])
    assert scripted_args(["--fault", every]).fault == parse_faults(every)
    assert build_parser().parse_args(["--fault-kinds", every]).fault_kinds == parse_faults(every)
    # the simulator's default draws stay what they were (a kind is drawn by its index in this tuple)
    assert build_parser().parse_args([]).fault_kinds == DEFAULT_KINDS == ("500", "429", "cut", "junk", "stall")


def test_a_chunk_is_its_hex_length_and_the_bytes() -> None:
    assert chunk(b"data: x\n\n") == b"9\r\ndata: x\n\n\r\n"
    assert chunk(b"a" * 26) == b"1a\r\n" + b"a" * 26 + b"\r\n"
