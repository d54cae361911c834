"""Record a flame graph of this very process with py-spy (``py-spy record --pid <own pid>``), where the kernel lets it.

py-spy reads another process's memory (ptrace / process_vm_readv); containers often forbid that (no
CAP_SYS_PTRACE, Yama ptrace_scope). Then py-spy exits with an error, and :attr:`FlameGraph.error` holds one line
built from it — recording is a side show: the caller carries on and its exit code does not change.

    with FlameGraph("out.svg") as fg:
        work()
    fg.recorded, fg.error      # True, None — or False, "py-spy: Error: Permission denied (os error 13)"

``--nonblocking`` keeps py-spy from pausing the process at each sample, so timings taken meanwhile stay honest;
the graph shows Python frames (an ``encode`` call is one leaf: the Rust code below it is not unwound).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ATTACH_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 60.0


def py_spy_path() -> str | None:
    """py-spy beside this interpreter (the venv's bin/), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() else shutil.which("py-spy")


def first_error_line(text: str) -> str:
    """py-spy's ``Error: ...`` line and its first cause (it prints a backtrace after them) as one line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    error = next((ln for ln in lines if ln.startswith("Error")), lines[0] if lines else "no message")
    if "Caused by:" in lines:
        cause = lines[lines.index("Caused by:") + 1] if lines.index("Caused by:") + 1 < len(lines) else ""
        cause = cause.split(":", 1)[1].strip() if cause[:1].isdigit() and ":" in cause else cause
        if cause:
            error = f"{error} ({cause})"
    return error


class FlameGraph:
    """Context manager: py-spy samples this process from ``__enter__`` to ``__exit__`` into an SVG flame graph."""

    def __init__(self, out: str | Path, executable: str | None = None, rate: int = 100) -> None:
        self.out = Path(out)
        self.executable = executable if executable is not None else py_spy_path()
        self.rate = rate
        self.recorded = False
        self.error: str | None = None
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> FlameGraph:
        if self.executable is None:
            self.error = "py-spy not found (pip install -r requirements.txt)"
            return self
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.unlink(missing_ok=True)  # an old graph must not pass for a new one
        cmd = [self.executable, "record", "--pid", str(os.getpid()), "-o", str(self.out), "--format", "flamegraph",
               "--rate", str(self.rate), "--nonblocking"]
        try:
            self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as exc:
            self.error = f"cannot run py-spy: {exc}"
            return self
        self._wait_attached()
        return self

    def _wait_attached(self) -> None:
        """Until py-spy says it samples (else a SIGINT sent before its handler is set would lose the graph)."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                break
            line = proc.stdout.readline()
            if not line:  # py-spy exited: it could not attach
                return
            if "Sampling process" in line:
                return

    def __exit__(self, *exc: object) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # py-spy writes the graph on Ctrl-C
        try:
            _, err = proc.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            self.error = f"py-spy did not stop within {STOP_TIMEOUT_S:g} s"
            return
        if proc.returncode == 0 and self.out.is_file() and self.out.stat().st_size > 0:
            self.recorded = True
        else:
            self.error = f"py-spy exited with code {proc.returncode}: {first_error_line(err or '')}"

    def to_json(self) -> dict:
        return {"path": str(self.out), "recorded": self.recorded, "error": self.error, "tool": "py-spy"}

    def line(self) -> str:
        if self.recorded:
            return f"flame graph written to {self.out} (py-spy, Python frames)"
        return f"flame graph NOT recorded ({self.out}): {self.error}"
