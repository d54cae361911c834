"""Compare two runs: ``python -m telemetry.compare BASE NEW [--fail-on SPEC] [--markdown]``.

BASE and NEW are summary JSON files (``--llm-summary-json``), or two directories of them (paired by file name).
For the whole run, each stage (matched by name) and each route version, one row per figure: p50 and p99 (ms) of
every client metric the summary has in that scope (``<key>_p50``, ``<key>_p99`` for each key of
:data:`telemetry.metrics.CLIENT_METRICS`: ``ttft``, ``itl``, ``tpot``, ``e2e``, ``decode_span``, ``ttfa``, ...),
output tok/s, goodput (req/s), failed requests, the capacity found (``--shape slo-search``: users or req/s), server KV
usage (mean) and preemptions, the speculative decoder's acceptance rate (``spec_acceptance_rate``, whole run: a
quantization change that drops DeepSeek MTP's acceptance fails ``--fail-on spec_acceptance_rate=-10%``),
with the base value, the new one and the change (absolute and %).

``--fail-on "ttft_p99=+10%,output_tok_s=-5%"`` exits 3 (Locust plugins' convention for a failed check) when a
figure moved past its bound in that direction in any scope: ``+10%`` fails a rise of more than 10 %, ``-5%`` a
fall of more than 5 %, ``+2`` (no %) a rise of more than 2 in the figure's own unit. Each breach is printed naming
the figure and the scope; a gated figure missing from either run (a stage without TTFTs, a stage only one run
has) fails the same way, named. Bad input (a missing file, not a summary, a bad SPEC) is one line on stderr and exit 2.

    python -m telemetry.compare results/before.json results/after.json --fail-on ttft_p99=+10% --markdown
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from telemetry.metrics import CLIENT_METRICS

EXIT_BREACH = 3
EXIT_USAGE = 2


def _q(key: str, field: str) -> Callable[[dict], float | None]:
    return lambda d: (d.get(key) or {}).get(field)


def _version_server(d: dict, key: str, field: str | None = None) -> float | None:
    """A route version's own backend figure (``versions.<v>.server``, --route-table), None without one."""
    value = (d.get("server") or {}).get(key) if isinstance(d.get("server"), dict) else None
    return (value or {}).get(field) if field is not None and isinstance(value, dict) else value


def _capacity(s: dict) -> float | None:
    """A capacity search's load found (``capacity.users`` or ``capacity.rate``); 0 when no load in its range met the
    SLOs (so a fall to none fails ``capacity=-N%``); None for a run that is not a search."""
    c = s.get("capacity")
    if not isinstance(c, dict) or "status" not in c:
        return None
    if c["status"] == "none":
        return 0.0
    return c.get("users") if c.get("axis") == "users" else c.get("rate")


QUANTILES = ("p50", "p99")
"""The quantiles compared for each client metric."""

FIGURES: dict[str, tuple[str, Callable[[dict], float | None], Callable[[dict], float | None]]] = {
    # name: (unit, from the whole run, from a stage or version)
    **{f"{m.key}_{p}": ("ms", _q(m.summary_key, p), _q(m.summary_key, p))
       for m in CLIENT_METRICS if m.top or m.per_stage or m.versions for p in QUANTILES},
    "output_tok_s": ("tok/s", lambda s: (s.get("tokens") or {}).get("output_per_s"), lambda d: d.get("output_per_s")),
    "goodput_rps": ("req/s", lambda s: s.get("goodput_rps"), lambda d: None),
    "failed": ("requests", lambda s: (s.get("requests") or {}).get("failed"), lambda d: d.get("failed")),
    "server_kv_mean": ("ratio", lambda s: ((s.get("server") or {}).get("kv_cache_usage") or {}).get("mean"),
                       lambda d: d.get("server_kv_usage_mean", _version_server(d, "kv_cache_usage", "mean"))),
    "capacity": ("users or req/s", _capacity, lambda d: None),
    "preemptions": ("count", lambda s: (s.get("server") or {}).get("preemptions"),
                    lambda d: d.get("preemptions", _version_server(d, "preemptions"))),
    "spec_acceptance_rate": ("ratio", lambda s: (s.get("speculative") or {}).get("acceptance_rate"), lambda d: None),
    "engine_queue_p99": ("ms", lambda s: None, lambda d: (d.get("queue_time_ms") or {}).get("p99")),
    "engine_finished": ("requests", lambda s: None, lambda d: d.get("requests_finished")),
}
"""What a row compares; --fail-on names these."""


class CompareError(Exception):
    """Bad input: said in one line, exit 2."""


@dataclass(frozen=True)
class Bound:
    figure: str
    sign: int
    """+1: fail on a rise past the limit; -1: on a fall."""
    limit: float
    percent: bool

    def breached(self, base: float | None, new: float | None) -> bool:
        if base is None or new is None:
            return False
        delta = (new - base) * self.sign
        if self.percent:
            if base == 0:
                return delta > 0
            return delta / abs(base) * 100.0 > self.limit
        return delta > self.limit

    def text(self) -> str:
        return f"{self.figure}={'+' if self.sign > 0 else '-'}{self.limit:g}{'%' if self.percent else ''}"


SPEC = re.compile(r"^\s*([a-z0-9_]+)\s*=\s*([+-])\s*([0-9]*\.?[0-9]+)\s*(%?)\s*$")


def parse_fail_on(text: str) -> list[Bound]:
    bounds = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = SPEC.match(part)
        if not m:
            raise CompareError(f"--fail-on: bad bound {part!r}; expected FIGURE=+N% or FIGURE=-N% (or without %)")
        if m.group(1) not in FIGURES:
            raise CompareError(f"--fail-on: unknown figure {m.group(1)!r}; one of {', '.join(FIGURES)}")
        bounds.append(Bound(m.group(1), 1 if m.group(2) == "+" else -1, float(m.group(3)), m.group(4) == "%"))
    return bounds


@dataclass(frozen=True)
class Row:
    scope: str
    figure: str
    base: float | None
    new: float | None

    @property
    def delta(self) -> float | None:
        return None if self.base is None or self.new is None else self.new - self.base

    @property
    def percent(self) -> float | None:
        d = self.delta
        return None if d is None or not self.base else d / abs(self.base) * 100.0


def load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise CompareError(f"{path}: {e.strerror or e}") from None
    except ValueError as e:
        raise CompareError(f"{path}: not JSON ({e})") from None
    if not isinstance(data, dict) or "requests" not in data or "schema" not in data:
        raise CompareError(f"{path}: not a deepseek-locust summary (no 'schema'/'requests')")
    return data


def _scopes(s: dict) -> dict[str, tuple[dict, bool]]:
    out: dict[str, tuple[dict, bool]] = {"run": (s, True)}
    for st in s.get("stages") or []:
        if not st.get("warmup"):
            out[f"stage {st['name']}"] = (st, False)
    for v, d in (s.get("versions") or {}).items():
        out[f"version {v}"] = (d, False)
    engines = (s.get("server") or {}).get("engines") or []
    for e in engines:  # each replica's data-parallel rank: its own server figures
        name = f"{e['target']}/{e['engine']}" if len({x.get("target") for x in engines}) > 1 else e["engine"]
        out[f"engine {name}"] = ({**e, "server_kv_usage_mean": (e.get("kv_cache_usage") or {}).get("mean")}, False)
    return out


def rows(base: dict, new: dict) -> list[Row]:
    b, n = _scopes(base), _scopes(new)
    out = []
    for scope in [*b, *(k for k in n if k not in b)]:  # a scope in one run only: its figures are missing in the other
        (bd, btop), (nd, _) = b.get(scope, ({}, scope == "run")), n.get(scope, ({}, scope == "run"))
        for fig, (_unit, top, part) in FIGURES.items():
            take = top if btop else part
            bv, nv = take(bd), take(nd)
            if bv is None and nv is None:
                continue
            out.append(Row(scope, fig, bv, nv))
    return out


def breaches(table: list[Row], bounds: list[Bound]) -> list[str]:
    """A gated figure that one run lacks fails too: a bound that cannot be checked does not hold."""
    lines = [f"FAIL {bd.figure}: in neither run, bound {bd.text()}" for bd in bounds
             if not any(r.figure == bd.figure for r in table)]
    for r in table:
        for bd in bounds:
            if bd.figure == r.figure and (r.base is None or r.new is None):
                side = "the new run" if r.new is None else "the baseline"
                lines.append(f"FAIL {r.figure} in {r.scope}: missing in {side}, bound {bd.text()}")
            elif bd.figure == r.figure and bd.breached(r.base, r.new):
                pct = f" ({r.percent:+.1f}%)" if r.percent is not None else ""
                moved = f"{fmt_value(r.base)} -> {fmt_value(r.new)}{pct}"
                lines.append(f"FAIL {r.figure} in {r.scope}: {moved}, bound {bd.text()}")
    return lines


def fmt_value(v: float | None) -> str:
    if v is None:
        return "-"
    if isinstance(v, int):
        return str(v)
    return f"{v:.4g}" if abs(v) < 1 else f"{v:.1f}"


def render(table: list[Row], markdown: bool, title: str) -> str:
    head = ["scope", "figure", "base", "new", "delta", "delta %"]
    body = [[r.scope, r.figure, fmt_value(r.base), fmt_value(r.new), fmt_value(r.delta) if r.delta is not None else "-",
             f"{r.percent:+.1f}%" if r.percent is not None and math.isfinite(r.percent) else "-"]
            for r in table]
    if markdown:
        lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines)
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    fmt = "  ".join(f"{{:{'<' if i < 2 else '>'}{w}}}" for i, w in enumerate(widths))
    return "\n".join([title, fmt.format(*head), *(fmt.format(*row) for row in body)])


def pairs(base: Path, new: Path) -> list[tuple[str, Path, Path]]:
    if base.is_dir() != new.is_dir():
        raise CompareError(f"compare two files or two directories, not {base} with {new}")
    if not base.is_dir():
        return [(f"{base} -> {new}", base, new)]
    names = sorted(p.name for p in base.glob("*.json") if (new / p.name).is_file())
    if not names:
        raise CompareError(f"no summary JSON file name is in both {base} and {new}")
    return [(name, base / name, new / name) for name in names]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m telemetry.compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("base", type=Path, help="baseline summary JSON (or a directory of them)")
    ap.add_argument("new", type=Path, help="new summary JSON (or a directory of them, paired by file name)")
    ap.add_argument("--fail-on", default="", metavar="SPEC",
                    help=f"exit {EXIT_BREACH} when a figure moves past its bound, e.g. ttft_p99=+10%%,"
                         f"output_tok_s=-5%%; figures: {', '.join(FIGURES)}")
    ap.add_argument("--markdown", action="store_true", help="Markdown tables (for a CI comment)")
    args = ap.parse_args(argv)
    try:
        bounds = parse_fail_on(args.fail_on)
        failed: list[str] = []
        for title, b, n in pairs(args.base, args.new):
            table = rows(load(b), load(n))
            print(render(table, args.markdown, title))
            print()
            failed += breaches(table, bounds)
    except CompareError as e:
        print(f"compare: {e}", file=sys.stderr)
        return EXIT_USAGE
    for line in failed:
        print(line)
    if bounds:
        print(f"{len(failed)} bound(s) crossed" if failed else f"all {len(bounds)} bound(s) held")
    return EXIT_BREACH if failed else 0


if __name__ == "__main__":
    sys.exit(main())
