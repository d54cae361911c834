"""Gray routing in each process that runs users: the routing options (registered and parsed here, nowhere else),
each version's tokenizer, and a fallback applied to this process's route table.

The grammars are the bottom layer's (:mod:`workload.routing`); the master's part — judging ``--route-fallback``
and the summary's ``versions`` / ``route_fallback`` — is :mod:`telemetry.control.routing`.

Options (each validated by its argparse ``type``, kept as normalized text, parsed again at ``test_start``):

- ``--route-table``: versions -> base URLs and bucket ranges (:class:`workload.routing.table.RouteTable`);
- ``--route-tokenizers``: the tokenizer each version runs;
- ``--route-fallback``: the rule the master judges (:mod:`workload.routing.fallback`). The latency metrics a rule
  may name are the ones telemetry keeps per version and window: the wiring passes them to :func:`add_arguments`
  (this layer does not see the metrics registry).

Each version's tokenizer is resolved once per process at ``test_start``: the one ``--route-tokenizers`` names;
else ``--tokenizer`` when it names one; else (``auto``, the default) the one
:func:`workload.tokenizers.choose_tokenizer` picks for the served model of that version's backend. Its requests
carry that tokenizer's hash and the compat level measured against the table's first version
(:mod:`workload.routing.compat`); the run record lists them (the summary's ``versions.<v>.tokenizer``).

    vt = resolve_versions(table, {"beta": "deepseek-v3"}, "auto", model_of=lambda url: "deepseek-ai/DeepSeek-V2")
    vt["beta"].headers("beta")   # X-Tokenizer-Version / -Hash / X-Compat-Level
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from workload.routing.compat import measure
from workload.routing.fallback import FALLBACK_FORM, FallbackRule
from workload.routing.table import (
    ROUTE_TABLE_FORM,
    ROUTE_TOKENIZERS_FORM,
    RouteTable,
    metadata_headers,
    parse_route_tokenizers,
)
from workload.tokenizers import AUTO, TokenizerNotFound, choose_tokenizer, load_tokenizer, tokenizer_hash

log = logging.getLogger(__name__)

ROUTE_TABLE_DEFAULT = None
"""--route-table: off (every request goes to --host)."""
ROUTE_TOKENIZERS_DEFAULT = None
"""--route-tokenizers: every version uses the --tokenizer auto choice for its backend's served model."""
ROUTE_FALLBACK_DEFAULT = None
"""--route-fallback: no fallback rule."""


# ---- the options: argparse types ---------------------------------------------------------------------------------
def route_table_arg(text: str) -> str:
    """argparse ``type``: validate a route table, keep the text (normalized: no spaces)."""
    try:
        RouteTable.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--route-table: {exc}") from None
    return ",".join(p.strip() for p in text.split(",") if p.strip())


def route_tokenizers_arg(text: str) -> str:
    """argparse ``type``: ``VERSION=TOKENIZER,...``, each tokenizer loadable (``auto`` allowed); the text normalized."""
    try:
        pairs = parse_route_tokenizers(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--route-tokenizers: {exc}") from None
    for version, name in pairs.items():
        if name == AUTO:
            continue
        try:
            load_tokenizer(name)
        except (TokenizerNotFound, OSError, ValueError) as e:
            raise argparse.ArgumentTypeError(f"--route-tokenizers: version {version!r}: {e}; "
                                             f"expected {ROUTE_TOKENIZERS_FORM}") from None
    return ",".join(f"{v}={t}" for v, t in pairs.items())


def route_fallback_type(metrics: frozenset[str] | None) -> Callable[[str], str]:
    """argparse ``type`` of --route-fallback: a fallback rule whose latency metrics are among ``metrics`` (None: any
    name), kept as text with single spaces."""

    def route_fallback_arg(text: str) -> str:
        try:
            return FallbackRule.parse(text, metrics).text
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"--route-fallback: {exc}") from None

    return route_fallback_arg


def add_arguments(parser, fallback_metrics: frozenset[str] | None) -> None:
    """Register every routing option; ``fallback_metrics``: the latency metrics a fallback rule may name (the ones
    telemetry keeps per version and window, ``telemetry.control.routing.FALLBACK_METRICS``)."""
    add = parser.add_argument
    add(
        "--route-table",
        type=route_table_arg,
        default=ROUTE_TABLE_DEFAULT,
        env_var="LOCUST_ROUTE_TABLE",
        include_in_web_ui=False,
        help=(
            "Gray routing (seed 4.2): send each request to the version its fingerprint bucket picks, "
            f"with X-Tokenizer-* headers, and label metrics by version. Form: {ROUTE_TABLE_FORM}. "
            "Ranges must cover buckets 0-99 once. Default: off (every request goes to --host)."
        ),
    )
    add(
        "--route-tokenizers",
        type=route_tokenizers_arg,
        default=ROUTE_TOKENIZERS_DEFAULT,
        env_var="LOCUST_ROUTE_TOKENIZERS",
        include_in_web_ui=False,
        help=(
            "With --route-table: the tokenizer each version runs; its prompts are cut and counted with it, its "
            "requests carry its X-Tokenizer-Hash and the X-Compat-Level measured against the first version's "
            f"tokenizer (workload/routing/compat.py). Form: {ROUTE_TOKENIZERS_FORM}. A version not named (or named "
            "auto) uses the --tokenizer auto choice for its backend's served model."
        ),
    )
    add(
        "--route-fallback",
        type=route_fallback_type(fallback_metrics),
        metavar="RULE",
        env_var="LOCUST_ROUTE_FALLBACK",
        default=ROUTE_FALLBACK_DEFAULT,
        include_in_web_ui=False,
        help="With --route-table: a fallback that acts. The master judges the rule on each version's live windows "
        "and, when it holds, moves FROM's buckets to TO for the rest of the run (logged, "
        "llm_route_fallback_total{from,to}, the summary's route_fallback). Form: " + FALLBACK_FORM.replace("%", "%%")
        + "; +P%% compares FROM with TO in the same window, X is ms (latency) or %% (error_rate); windows are "
        "--attribution-window seconds unless 'of S s' says. Default: none",
    )


# ---- the options: parsed from Locust's parsed_options ------------------------------------------------------------
def route_table_from(options) -> RouteTable | None:
    """The parsed table from Locust's parsed_options (None when --route-table is not given)."""
    text = getattr(options, "route_table", None)
    return RouteTable.parse(str(text)) if text else None


def route_tokenizers_from(options) -> dict[str, str]:
    """``{version: tokenizer option}`` of --route-tokenizers; ValueError when it names a version the route table
    does not have (or is given without a route table)."""
    text = getattr(options, "route_tokenizers", None)
    if not text:
        return {}
    pairs = parse_route_tokenizers(str(text))
    table = route_table_from(options)
    if table is None:
        raise ValueError("--route-tokenizers needs --route-table")
    unknown = [v for v in pairs if v not in table.versions]
    if unknown:
        raise ValueError(f"--route-tokenizers names {', '.join(map(repr, unknown))}, not in --route-table "
                         f"(versions: {', '.join(table.versions)})")
    return pairs


def route_fallback_from(options) -> FallbackRule | None:
    """--route-fallback parsed and checked against --route-table's versions (None when not given); ValueError
    naming the problem otherwise."""
    text = getattr(options, "route_fallback", None)
    if not text:
        return None
    rule = FallbackRule.parse(str(text))
    table = route_table_from(options)
    if table is None:
        raise ValueError("--route-fallback needs --route-table")
    unknown = [v for v in (rule.source, rule.target) if v not in table.versions]
    if unknown:
        raise ValueError(f"--route-fallback names {', '.join(map(repr, unknown))}, not in --route-table "
                         f"(versions: {', '.join(table.versions)})")
    return rule


def check_route_options(options) -> None:
    """The route options that name versions (--route-tokenizers, --route-fallback) against --route-table;
    ValueError naming the first problem."""
    route_tokenizers_from(options)
    route_fallback_from(options)


# ---- each version's tokenizer ------------------------------------------------------------------------------------
@lru_cache(maxsize=32)
def _measure(old: str, new: str) -> dict:
    return measure(load_tokenizer(old), load_tokenizer(new))


@dataclass(frozen=True)
class VersionTokenizer:
    """One version's tokenizer and what its requests say about it."""

    name: str
    source: str
    """``route-tokenizers``, ``option`` (--tokenizer), ``model`` / ``hub`` / ``fallback`` (auto, its backend's)."""
    model: str | None
    reference: str
    """The first version's tokenizer, which the compat level is measured against."""

    @property
    def hash(self) -> str:
        return tokenizer_hash(self.name)

    @property
    def drift(self) -> dict:
        return _measure(self.reference, self.name)

    @property
    def compat_level(self) -> str:
        return str(self.drift["level"])

    def headers(self, version: str) -> dict[str, str]:
        return metadata_headers(version, self.name, self.compat_level)

    def record(self) -> dict:
        d = self.drift
        return {"name": self.name, "hash": self.hash, "source": self.source, "model": self.model,
                "compat_level": d["level"], "compared_with": self.reference,
                "mean_token_ratio": d["mean_token_ratio"]}


def resolve_versions(table: RouteTable, named: dict[str, str], tokenizer_option: str,
                     model_of: Callable[[str], str | None]) -> dict[str, VersionTokenizer]:
    """``{version: VersionTokenizer}`` for every version of the table; ``model_of(base_url)`` is asked only for the
    versions that choose by their backend's served model."""
    urls = {r.version: r.base_url for _lo, _hi, r in table.spans}
    chosen: dict[str, tuple[str, str, str | None]] = {}
    for version in table.versions:
        name = named.get(version, AUTO)
        if name != AUTO:
            chosen[version] = (name, "route-tokenizers", None)
        elif tokenizer_option != AUTO:
            chosen[version] = (tokenizer_option, "option", None)
        else:
            model = model_of(urls[version])
            c = choose_tokenizer(AUTO, model)
            chosen[version] = (c.name, c.source, model)
    reference = chosen[table.versions[0]][0]
    return {v: VersionTokenizer(n, src, m, reference) for v, (n, src, m) in chosen.items()}


# ---- a fallback, applied here ------------------------------------------------------------------------------------
def apply_fallback(environment, data: dict | None) -> bool:
    """Move ``data["from"]``'s buckets to ``data["to"]`` in this process's route table; False when nothing moved."""
    settings = environment.llm.settings
    if settings is None or not isinstance(data, dict):
        return False
    moved = settings.fall_back(str(data.get("from")), str(data.get("to")))
    if moved:
        log.warning("LLM users: route fallback %s -> %s applied (%s's buckets now go to %s)",
                    data["from"], data["to"], data["from"], data["to"])
    return moved
