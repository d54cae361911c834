"""``locust -f FILE --help`` lists FILE's own options (this project's ~60) besides Locust's.

Locust answers ``-h``/``--help`` before it imports the locustfile (``locust.argument_parser.
parse_locustfile_option``), so at that point no ``init_command_line_parser`` listener is registered and a
locustfile's custom arguments never appear in the help (locust issue 2917). ``make install`` writes a line into the
venv's ``deepseek_locust.pth`` that calls :func:`boot` at interpreter start: for the ``locust`` command asked for its
help, and only then, it imports the locustfile(s) first, so their listeners add their options to the help Locust
prints. Any other command, or a locustfile that fails to import, is left to Locust as before. Standard library only:
this runs before anything else in the process.
"""

from __future__ import annotations

import importlib.util
import os
import sys

PTH_LINE = ('import os, sys; exec("try:\\n from deepseek_locust_help import boot\\nexcept ImportError:\\n pass\\n'
            'else:\\n boot()") '
            'if os.path.basename((getattr(sys, "argv", None) or [""])[0]) == "locust" else None')
"""The venv's .pth line: one ``os.path.basename`` for every other interpreter start, nothing imported."""


def locustfiles(args: list[str], env: dict[str, str]) -> list[str]:
    """The ``.py`` files that ``-f``/``--locustfile`` (or LOCUST_LOCUSTFILE, else ``locustfile.py``) names."""
    value = env.get("LOCUST_LOCUSTFILE", "locustfile.py")
    for i, a in enumerate(args):
        if a in ("-f", "--locustfile") and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith("--locustfile="):
            value = a.split("=", 1)[1]
        elif a.startswith("-f") and len(a) > 2 and not a.startswith("--"):
            value = a[2:].lstrip("=")
    return [p for p in (s.strip() for s in value.split(",")) if p.endswith(".py") and os.path.isfile(p)]


def boot(argv: list[str] | None = None) -> list[str]:
    """Import the locustfiles when ``argv`` is ``locust ... --help``; returns the files imported."""
    argv = sys.argv if argv is None else argv
    if not argv or os.path.basename(argv[0]) != "locust" or not {"-h", "--help"} & set(argv[1:]):
        return []
    done = []
    for path in locustfiles(argv[1:], dict(os.environ)):
        folder = os.path.dirname(os.path.abspath(path))
        if folder not in sys.path:
            sys.path.insert(0, folder)  # as Locust's own load_locustfile does
        try:
            spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
            module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 — Locust reports a broken locustfile itself when it runs it
            continue
        done.append(path)
    return done
