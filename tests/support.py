"""Helpers for integration tests: free ports, real processes stopped by PID, HTTP readiness.

    port = free_port()
    with Proc([sys.executable, "-m", "server.sim", "--port", str(port)], name="sim") as sim:
        wait_http(f"http://127.0.0.1:{port}/health", proc=sim)
        ...
    # leaving the block sends SIGTERM (then SIGKILL) to the process group; sim.output() has its log
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from server.core.ports import free_port  # noqa: F401  (the tests' one port picker)

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
LOCUST = str(Path(PY).parent / "locust")


class Proc:
    """A child process in its own process group, with stdout+stderr captured to a temp file."""

    def __init__(self, argv: list[str], name: str = "proc", env: dict | None = None, cwd: Path | str = ROOT):
        self.name = name
        self._log = tempfile.NamedTemporaryFile(prefix=f"{name}-", suffix=".log", delete=False)
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", **(env or {})}
        self.popen = subprocess.Popen(
            argv, stdout=self._log, stderr=subprocess.STDOUT, cwd=str(cwd), env=full_env, start_new_session=True
        )
        self.pid = self.popen.pid

    def output(self) -> str:
        self._log.flush()
        return Path(self._log.name).read_text(errors="replace")

    def wait(self, timeout: float) -> int:
        """Wait for exit; on timeout stop it and raise with its output."""
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            tail = self.output()[-4000:]
            raise AssertionError(f"{self.name} did not exit within {timeout}s; output:\n{tail}") from None

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def stop(self, timeout: float = 10.0) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.pid, signal.SIGKILL)
                self.popen.wait(timeout=5)

    def __enter__(self) -> Proc:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@contextmanager
def locust_cluster(master_args: list[str] | tuple[str, ...], workers: int = 2, worker_args: tuple[str, ...] = (),
                   locustfile: str = "locustfile.py", master_env: dict | None = None,
                   worker_env=None) -> Iterator[tuple[Proc, list[Proc]]]:
    """A Locust master (``master_args`` after its bind options and ``--expect-workers``) and ``workers`` workers on
    127.0.0.1, every one stopped by PID on the way out. ``worker_env(i)`` gives worker ``i`` its own environment."""
    port = free_port()
    master = Proc([LOCUST, "-f", locustfile, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port",
                   str(port), "--expect-workers", str(workers), *master_args], name="master", env=master_env)
    procs: list[Proc] = []
    try:
        for i in range(workers):
            procs.append(Proc([LOCUST, "-f", locustfile, "--worker", "--master-host", "127.0.0.1", "--master-port",
                               str(port), *worker_args], name=f"worker{i}",
                              env=worker_env(i) if worker_env else None))
        yield master, procs
    finally:
        master.stop()
        for w in procs:
            w.stop()


def wait_http(url: str, timeout: float = 30.0, proc: Proc | None = None) -> None:
    """Poll until ``url`` answers 200; fail early (with its output) if ``proc`` exits."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise AssertionError(f"{proc.name} exited ({proc.popen.returncode}) before {url} was up:\n{proc.output()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError) as e:  # not up yet
            last = e
        time.sleep(0.2)
    raise AssertionError(f"{url} not ready after {timeout}s ({last})" + (f"\n{proc.output()}" if proc else ""))


@contextmanager
def stamped_pair(sockets=None) -> Iterator[tuple]:
    """A connected TCP pair on 127.0.0.1, ``(reader, writer)``: the reader kernel-stamped (``SO_TIMESTAMPNS``) and its
    stamps already flowing. Linux turns receive stamping on for the host in deferred work after the first socket
    asks, so the packets of the next moments may come unstamped (a netstamp test failed 2 runs of 15 that way when
    nothing else on the machine had asked): probe bytes are sent and read until one carries a stamp (up to 2 s).
    ``sockets``: the socket module (``socket``, or ``gevent.socket`` for gevent's sockets)."""
    import socket as _socket  # noqa: PLC0415

    from workload import netstamp  # noqa: PLC0415

    mod = sockets or _socket
    listener = mod.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    reader = mod.create_connection(listener.getsockname())
    writer, _ = listener.accept()
    listener.close()
    with reader, writer:
        assert netstamp.enable(reader)
        raw = getattr(reader, "_sock", reader)  # gevent's socket wraps the OS one
        deadline = time.monotonic() + 2.0
        while True:
            writer.sendall(b".")
            while True:  # gevent's OS socket does not block: read the probe once it is there, leave nothing behind
                try:
                    _data, ancillary, _flags, _addr = raw.recvmsg(16, netstamp.ANCILLARY_SIZE)
                    break
                except BlockingIOError:
                    time.sleep(0.001)
            if ancillary:
                break
            if time.monotonic() > deadline:
                raise AssertionError("the kernel never stamped a packet within 2 s of SO_TIMESTAMPNS")
            time.sleep(0.01)
        yield reader, writer


def wait_until(cond, timeout: float = 5.0, interval: float = 0.05) -> bool:
    """Poll ``cond()`` until it is true (True) or ``timeout`` seconds pass (False), yielding to gevent between tries:
    in-process Locust runners (greenlets) make progress while a test waits for them."""
    import gevent  # noqa: PLC0415  (only the in-process runner tests need it)

    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        gevent.sleep(interval)
    return True


def start_sim(*flags: str, profile: str = "cpu-tiny", port: int | None = None, timeout: float = 60.0,
              prefix: tuple[str, ...] = ()) -> tuple[Proc, str]:
    """A simulator (``server.sim``) on 127.0.0.1, healthy, and its base URL; the caller stops it (``with proc:``).
    ``prefix`` runs it under a command (e.g. a higher priority)."""
    port = port or free_port()
    proc = Proc([*prefix, PY, "-m", "server.sim", "--host", "127.0.0.1", "--port", str(port), "--profile", profile,
                 *flags], name="sim")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/health", timeout=timeout, proc=proc)
    except BaseException:
        proc.stop()
        raise
    return proc, url


def http_get(url: str, data: bytes | None = None, timeout: float = 10.0) -> bytes:
    """The body of a GET (a POST when ``data`` is given); an HTTP error status raises."""
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def get_json(url: str, data: bytes | None = None, timeout: float = 10.0):
    import json  # noqa: PLC0415

    return json.loads(http_get(url, data, timeout))


def prometheus_config(path: Path, jobs: dict[str, int | list[int]], interval: str = "1s") -> Path:
    """A Prometheus config at ``path`` scraping 127.0.0.1:port of each job every ``interval`` (rules evaluated as
    often)."""
    lines = ["global:", f"  scrape_interval: {interval}", f"  evaluation_interval: {interval}", "scrape_configs:"]
    for job, ports in jobs.items():
        targets = ", ".join(f"'127.0.0.1:{p}'" for p in ([ports] if isinstance(ports, int) else ports))
        lines += [f"  - job_name: {job}", f"    static_configs: [{{targets: [{targets}]}}]"]
    path.write_text("\n".join(lines) + "\n")
    return path


SKIP_FOLDERS = {"tests", "results", "node_modules"}
"""Folders that hold no project module (besides hidden ones: .venv, .git, .cache ...)."""


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every project module (tests excluded) by dotted name -> its file: what the layer rules walk."""
    out: dict[str, Path] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIP_FOLDERS]
        for f in files:
            if f.endswith(".py"):
                rel = (Path(folder) / f).relative_to(root)
                out[".".join(rel.with_suffix("").parts).removesuffix(".__init__")] = root / rel
    return out
