"""Locust options of the tokenizer_checks package: ``--route-table`` (gray routing by fingerprint, seed 4.2).

    locust -f locustfile.py --route-table "v1=http://127.0.0.1:8000@0-79,beta=http://127.0.0.1:8001@80-99"

The option's value stays a string (it travels to workers and through the web UI as text); read it with
:func:`route_table_from` in ``test_start``, which returns a parsed :class:`RouteTable` or None.
"""

from __future__ import annotations

import argparse

from tokenizer_checks.routing import ROUTE_TABLE_FORM, RouteTable


def route_table_arg(text: str) -> str:
    """argparse ``type``: validate a route table, keep the text (normalized: no spaces)."""
    try:
        RouteTable.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--route-table: {exc}") from None
    return ",".join(p.strip() for p in text.split(",") if p.strip())


def add_arguments(parser) -> None:
    parser.add_argument(
        "--route-table",
        type=route_table_arg,
        default=None,
        env_var="LOCUST_ROUTE_TABLE",
        include_in_web_ui=False,
        help=(
            "Gray routing (seed 4.2): send each request to the version its fingerprint bucket picks, "
            f"with X-Tokenizer-* headers, and label metrics by version. Form: {ROUTE_TABLE_FORM}. "
            "Ranges must cover buckets 0-99 once. Default: off (every request goes to --host)."
        ),
    )


def route_table_from(options) -> RouteTable | None:
    """The parsed table from Locust's parsed_options (None when --route-table is not given)."""
    text = getattr(options, "route_table", None)
    return RouteTable.parse(text) if text else None
