"""Imports go one way (docs/architecture.md "Layers"): no cycle among the project's modules or packages, and no
package imports a layer above its own. The graph is built from the source with ``ast`` (every ``import``, also
inside functions and under ``TYPE_CHECKING``), tests excluded. Inside telemetry, its measurement
(``telemetry/measure/``) imports neither its live control nor its outputs.

The layers share a Locust environment's state through one typed context, ``environment.llm`` (run/context.py),
never through loose ``environment.llm_*`` attributes read back with ``getattr(..., default)``: an ``ast`` walk of
the product and the tests fails on ``getattr``/``setattr``/``hasattr`` with an ``"llm_..."`` name, on a
``.__dict__.get("llm_...")`` and on an ``x.llm_...`` attribute — except on the parsed options, whose ``llm_``
names are option destinations (``--llm-csv`` ...).

The project is checked by ``ruff check`` and not formatted by ``ruff format``: no source file carries a formatter
marker (``fmt: skip`` / ``off`` / ``on``) that nothing reads."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from tests.support import project_modules

ROOT = Path(__file__).resolve().parents[1]

LAYERS = {"run": 0, "workload": 1, "shapes": 2, "users": 3, "telemetry": 4, "webui": 5}
"""The product layers, bottom to top: a package may import its own layer and those below it."""
ONLY_WORKLOAD = ("tokenizer_checks", "server")
"""Side packages that may use only ``workload`` from the project."""


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    """The longest project module that ``name`` (a module or module.attribute) starts with."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in mods:
            return candidate
        parts.pop()
    return None


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                names = [base, *(f"{base}.{a.name}" for a in node.names)]
            else:
                continue
            for n in names:
                target = _resolve(n, mods)
                if target is not None and target != mod:
                    graph[mod].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    nodes = set(graph) | {t for ts in graph.values() for t in ts}
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[v] = min(low[v], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for a, targets in graph.items():
        for b in targets:
            pa, pb = a.split(".")[0], b.split(".")[0]
            if pa != pb:
                out[pa].add(pb)
    return out


GRAPH = import_graph(project_modules())


def test_the_graph_sees_the_project():
    # a broken walker would find no edges and pass the cycle checks vacuously
    assert "users.client" in GRAPH and "users.result" in GRAPH["users.client"]
    assert "workload.tokenizers" in GRAPH["workload.prompts"]


def test_cycle_finder_finds_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_cycle():
    assert cycles(GRAPH) == []


def test_no_package_cycle():
    assert cycles(package_graph(GRAPH)) == []


def test_layers_import_downwards_only():
    wrong = []
    for a, targets in package_graph(GRAPH).items():
        for b in targets:
            if a in LAYERS and b in LAYERS and LAYERS[b] > LAYERS[a]:
                wrong.append(f"{a} -> {b}")
            if a in ONLY_WORKLOAD and b != "workload":
                wrong.append(f"{a} -> {b}")
            if a in LAYERS and b not in LAYERS:
                wrong.append(f"{a} -> {b}")  # the product layers never reach into the CLIs, servers or scripts
    assert wrong == []


def _is_options(node: ast.AST) -> bool:
    """An expression naming the parsed options (``options``, ``parsed_options``, ``env.parsed_options``, ``opts``)."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name.endswith("options") or name == "opts"


def loose_context_uses(source: str) -> list[tuple[int, str]]:
    """(line, what) for each loose ``llm_*`` attribute of an object that is not the parsed options."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and len(node.args) >= 2:
            fn, (obj, name) = node.func, node.args[:2]
            llm = isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.startswith("llm_")
            if not llm:
                continue
            accessor = isinstance(fn, ast.Name) and fn.id in ("getattr", "setattr", "hasattr", "delattr")
            if accessor and not _is_options(obj):
                found.append((node.lineno, f"{fn.id}(..., {name.value!r})"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            owner = node.func.value
            arg = node.args[0] if node.args else None
            if (isinstance(owner, ast.Attribute) and owner.attr == "__dict__" and isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str) and arg.value.startswith("llm_")):
                found.append((node.lineno, f"__dict__.get({arg.value!r})"))
        if isinstance(node, ast.Attribute) and node.attr.startswith("llm_") and not _is_options(node.value):
            found.append((node.lineno, f".{node.attr}"))
    return found


def test_loose_context_finder_finds_each_form():
    bad = """
getattr(environment, "llm_pacer", None)
setattr(env, "llm_users", settings)
env.__dict__.get("llm_tokenizer")
self.environment.llm_stage_board.set(stage)
"""
    good = """
getattr(options, "llm_csv", None)
getattr(self.environment.parsed_options, "llm_report", None)
environment.llm.pacer
options.llm_summary_json
"""
    assert [what for _line, what in loose_context_uses(bad)] == [
        "getattr(..., 'llm_pacer')", "setattr(..., 'llm_users')", "__dict__.get('llm_tokenizer')", ".llm_stage_board"]
    assert loose_context_uses(good) == []


def test_no_loose_environment_attributes():
    files = [*project_modules().values(), *(ROOT / "tests").rglob("*.py")]
    wrong = [f"{path.relative_to(ROOT)}:{line}: {what}"
             for path in files for line, what in loose_context_uses(path.read_text(encoding="utf-8"))]
    assert wrong == [], "use the run context's field (environment.llm.<field>, run/context.py)"


def test_no_test_module_imports_another_test_modules_helpers():
    """Shared test helpers live in helper modules (tests/support.py, tests/*/helpers.py, fakes, runners), never in a
    test module that another one imports: a test file is read on its own."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[-1].startswith("test_"):
                offenders.append(f"{path.relative_to(ROOT)} imports {node.module}")
    assert offenders == []


FORMATTER_MARKER = re.compile(r"#\s*fmt:\s*(?:skip|off|on)\b")
"""A formatter's per-line or per-block marker comment (written so that this file does not match it)."""


def formatter_markers(source: str) -> list[int]:
    return [n for n, line in enumerate(source.splitlines(), 1) if FORMATTER_MARKER.search(line)]


def test_formatter_marker_finder_finds_each_form():
    marked = "x = [1,  2]  # fmt" ": skip\n#fmt" ":off\ny = 3\n# fmt" ": on\n"
    assert formatter_markers(marked) == [1, 2, 4]
    assert formatter_markers("x = 1  # the format: skip nothing\n") == []


def test_no_formatter_markers():
    files = [*project_modules().values(), *(ROOT / "tests").rglob("*.py")]
    wrong = [f"{path.relative_to(ROOT)}:{line}" for path in files
             for line in formatter_markers(path.read_text(encoding="utf-8"))]
    assert wrong == [], "the project is checked by ruff check, not formatted: drop the formatter marker"


TELEMETRY_ABOVE_MEASURE = ("telemetry.control", "telemetry.outputs", "telemetry.attribution", "telemetry.traces")
"""telemetry's parts that judge or present the run: its measurement (``telemetry.measure``) imports none of them."""


def test_telemetry_measurement_imports_no_judge_or_output():
    measure = [m for m in GRAPH if m.startswith("telemetry.measure.")]
    assert "telemetry.measure.recorder" in measure and "telemetry.measure.view" in GRAPH["telemetry.measure.runstate"]
    wrong = [f"{a} -> {b}" for a in measure for b in GRAPH[a] if b.startswith(TELEMETRY_ABOVE_MEASURE)]
    assert wrong == [], "telemetry/measure/ is below the live control and the outputs (docs/architecture.md)"
