"""``locust -f locustfile.py --help`` lists the project's options: Locust answers --help before it imports the
locustfile, so the venv's .pth line (written by ``make install``) imports it first for that command only."""

from __future__ import annotations

import argparse
import os
import subprocess
import sysconfig
from pathlib import Path

import pytest

from deepseek_locust_help import PTH_LINE, boot, locustfiles
from scripts.options_table import project_options
from tests.support import LOCUST, ROOT


@pytest.mark.slow
def test_locust_help_lists_every_project_option():
    pth = Path(sysconfig.get_paths()["purelib"]) / "deepseek_locust.pth"
    assert PTH_LINE in pth.read_text().splitlines(), f"{pth} lacks the help line: run make install"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([LOCUST, "-f", "locustfile.py", "--help"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60).stdout
    shown = [flags.split(" / ")[0] for flags, _d, _e, help_text in project_options() if help_text != argparse.SUPPRESS]
    assert len(shown) > 40
    missing = [f for f in shown if f not in out]
    assert not missing, f"not in `locust --help`: {missing}"
    assert "--host" in out  # Locust's own options are still there


def test_make_install_writes_the_line():
    assert "h.PTH_LINE" in (ROOT / "Makefile").read_text()


def test_boot_imports_the_locustfile_only_for_locust_help(tmp_path, monkeypatch):
    lf = tmp_path / "mine.py"
    lf.write_text("import sys\nsys.modules['__help_probe__'] = True\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(__import__("sys").modules, "__help_probe__", raising=False)
    assert boot(["/x/locust", "-f", "mine.py", "--headless"]) == []
    assert boot(["/x/python", "-f", "mine.py", "--help"]) == []
    assert boot(["/x/locust", "-f", "mine.py", "--help"]) == ["mine.py"]
    assert __import__("sys").modules.pop("__help_probe__") is True
    (tmp_path / "broken.py").write_text("raise RuntimeError('no')\n")
    assert boot(["/x/locust", "--locustfile=broken.py,mine.py", "-h"]) == ["mine.py"]  # Locust reports the broken one


def test_locustfiles_reads_every_spelling_of_the_option(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("a.py", "b.py", "locustfile.py"):
        (tmp_path / name).write_text("")
    assert locustfiles([], {}) == ["locustfile.py"]
    assert locustfiles([], {"LOCUST_LOCUSTFILE": "a.py"}) == ["a.py"]
    assert locustfiles(["-f", "a.py"], {}) == ["a.py"]
    assert locustfiles(["-fb.py"], {}) == ["b.py"]
    assert locustfiles(["--locustfile", "a.py,b.py,missing.py,pkg"], {}) == ["a.py", "b.py"]
