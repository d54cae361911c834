"""Length distributions: the SPEC grammar (README "Length SPECs"), used by --input-len, --output-len and sweeps.

    fixed:N | uniform:LO:HI | normal:MEAN:STD[:LO:HI] | lognormal:MEDIAN:SIGMA[:LO:HI]
    | zipf:ALPHA:LO:HI | file:PATH      (a bare integer N means fixed:N)

Every draw is an int >= 1 and goes through an injected ``numpy.random.Generator``:

    dist = parse_spec("zipf:1.2:16:4096")
    rng = np.random.default_rng(seed + worker_index)
    dist.sample(rng)          # one length
    dist.sample(rng, 1000)    # an int64 array

Bounds are inclusive. ``normal`` and ``lognormal`` are truncated to [LO, HI] by resampling (default
LO = 1, HI = unbounded), so the shape inside the bounds is kept. ``zipf`` is bounded, with
P(L) proportional to (L - LO + 1) ** -ALPHA for any ALPHA > 0. ``file:PATH`` is empirical: a text file
with one length per line, or a JSONL file whose lines are numbers, objects with a ``length`` /
``input_len`` / ``prompt_len`` field, or datasets (``prompt`` or ShareGPT ``conversations``) whose
prompt token counts (default tokenizer) become the lengths.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

FORMS = (
    "fixed:N, uniform:LO:HI, normal:MEAN:STD[:LO:HI], lognormal:MEDIAN:SIGMA[:LO:HI], zipf:ALPHA:LO:HI, file:PATH"
    " (or a bare integer N)"
)
_MAX_LEN = 10_000_000


class LengthDist:
    """A distribution of positive integer lengths."""

    spec: str

    def sample(self, rng: np.random.Generator, n: int | None = None) -> int | np.ndarray:
        draws = self._draw(rng, 1 if n is None else n)
        return int(draws[0]) if n is None else draws

    def _draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        raise NotImplementedError

    @property
    def max(self) -> int:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.spec


@dataclass(frozen=True)
class Fixed(LengthDist):
    spec: str
    n: int

    def _draw(self, rng, n):
        return np.full(n, self.n, dtype=np.int64)

    @property
    def max(self) -> int:
        return self.n


@dataclass(frozen=True)
class Uniform(LengthDist):
    spec: str
    lo: int
    hi: int

    def _draw(self, rng, n):
        return rng.integers(self.lo, self.hi, size=n, endpoint=True, dtype=np.int64)

    @property
    def max(self) -> int:
        return self.hi


@dataclass(frozen=True)
class Truncated(LengthDist):
    """Normal or lognormal draws, rounded, resampled until inside [lo, hi]."""

    spec: str
    draw: Callable[[np.random.Generator, int], np.ndarray] = field(repr=False)
    lo: int
    hi: int

    def _draw(self, rng, n):
        out = np.empty(0, dtype=np.int64)
        for _ in range(1000):
            x = np.rint(self.draw(rng, max(2 * (n - len(out)), 16)))
            x = x[(x >= self.lo) & (x <= self.hi)].astype(np.int64)
            out = np.concatenate([out, x])
            if len(out) >= n:
                return out[:n]
        raise ValueError(f"{self.spec}: almost no mass inside [{self.lo}, {self.hi}]")

    @property
    def max(self) -> int:
        return self.hi


@dataclass(frozen=True)
class Empirical(LengthDist):
    """Bounded Zipf (as weights over LO..HI) or a file's lengths (equal weights)."""

    spec: str
    values: np.ndarray = field(repr=False)
    cdf: np.ndarray | None = field(default=None, repr=False)

    def _draw(self, rng, n):
        if self.cdf is None:
            return self.values[rng.integers(0, len(self.values), size=n)]
        idx = np.searchsorted(self.cdf, rng.random(n), side="right")
        return self.values[np.minimum(idx, len(self.values) - 1)]

    @property
    def max(self) -> int:
        return int(self.values.max())


def _int(s: str, what: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise ValueError(f"{what} must be an integer, got {s!r}") from None
    if not 1 <= v <= _MAX_LEN:
        raise ValueError(f"{what} must be in 1..{_MAX_LEN}, got {v}")
    return v


def _float(s: str, what: str, positive: bool = True) -> float:
    try:
        v = float(s)
    except ValueError:
        raise ValueError(f"{what} must be a number, got {s!r}") from None
    if not math.isfinite(v) or (positive and v <= 0):
        raise ValueError(f"{what} must be a finite number > 0, got {s!r}")
    return v


def _bounds(args: list[str], spec: str) -> tuple[int, int]:
    lo = _int(args[0], "LO") if args else 1
    hi = _int(args[1], "HI") if len(args) > 1 else _MAX_LEN
    if lo > hi:
        raise ValueError(f"LO must be <= HI in {spec!r}")
    return lo, hi


def _argc(args: list[str], allowed: tuple[int, ...], form: str) -> None:
    if len(args) not in allowed:
        raise ValueError(f"expected {form}")


def _fixed(args: list[str], spec: str) -> LengthDist:
    _argc(args, (1,), "fixed:N")
    return Fixed(spec, _int(args[0], "N"))


def _uniform(args: list[str], spec: str) -> LengthDist:
    _argc(args, (2,), "uniform:LO:HI")
    lo, hi = _bounds(args, spec)
    return Uniform(spec, lo, hi)


def _normal(args: list[str], spec: str) -> LengthDist:
    _argc(args, (2, 4), "normal:MEAN:STD[:LO:HI]")
    mean, std = _float(args[0], "MEAN"), _float(args[1], "STD")
    lo, hi = _bounds(args[2:], spec)
    return Truncated(spec, lambda rng, n: rng.normal(mean, std, n), lo, hi)


def _lognormal(args: list[str], spec: str) -> LengthDist:
    _argc(args, (2, 4), "lognormal:MEDIAN:SIGMA[:LO:HI]")
    median, sigma = _float(args[0], "MEDIAN"), _float(args[1], "SIGMA")
    lo, hi = _bounds(args[2:], spec)
    mu = math.log(median)
    return Truncated(spec, lambda rng, n: rng.lognormal(mu, sigma, n), lo, hi)


def _zipf(args: list[str], spec: str) -> LengthDist:
    _argc(args, (3,), "zipf:ALPHA:LO:HI")
    alpha = _float(args[0], "ALPHA")
    lo, hi = _bounds(args[1:], spec)
    if hi - lo > 1_000_000:
        raise ValueError("zipf: HI - LO must be at most 1000000")
    values = np.arange(lo, hi + 1, dtype=np.int64)
    weights = (values - lo + 1).astype(np.float64) ** -alpha
    cdf = np.cumsum(weights)
    return Empirical(spec, values, cdf / cdf[-1])


def _file(args: list[str], spec: str) -> LengthDist:
    path = Path(":".join(args)).expanduser()  # a path may hold ':'
    if not args or not path.is_file():
        raise ValueError(f"file:PATH: no such file {str(path)!r}")
    values = [v for v in (_length_of(line) for line in path.read_text(encoding="utf-8").splitlines()) if v]
    if not values:
        raise ValueError(f"file:PATH: no lengths found in {str(path)!r}")
    return Empirical(spec, np.asarray(values, dtype=np.int64))


def _length_of(line: str) -> int | None:
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError:
        raise ValueError(f"file:PATH: cannot read a length from line {line[:60]!r}") from None
    if isinstance(obj, bool):
        raise ValueError(f"file:PATH: cannot read a length from line {line[:60]!r}")
    if isinstance(obj, int | float):
        return _int(str(int(obj)), "length")
    if isinstance(obj, dict):
        for key in ("length", "input_len", "prompt_len"):
            if key in obj:
                return _int(str(int(obj[key])), key)
        from workload.datasets import prompt_of  # noqa: PLC0415  (tokenizer only when a dataset is given)

        text = prompt_of(obj)
        if text is not None:
            from workload.tokenizers import load_tokenizer  # noqa: PLC0415

            return len(load_tokenizer().encode(text, add_special_tokens=False).ids) or None
    raise ValueError(f"file:PATH: cannot read a length from line {line[:60]!r}")


PARSERS: dict[str, Callable[[list[str], str], LengthDist]] = {
    "fixed": _fixed,
    "uniform": _uniform,
    "normal": _normal,
    "lognormal": _lognormal,
    "zipf": _zipf,
    "file": _file,
}


def parse_spec(spec: str) -> LengthDist:
    """Parse a SPEC; raise ValueError naming the expected forms."""
    text = str(spec).strip()
    if text.isdigit():
        text = f"fixed:{text}"
    kind, _, rest = text.partition(":")
    parser = PARSERS.get(kind.lower())
    if parser is None:
        raise ValueError(f"unknown length SPEC {spec!r}; expected one of {FORMS}")
    try:
        return parser(rest.split(":") if rest else [], text)
    except ValueError as e:
        raise ValueError(f"bad length SPEC {spec!r}: {e}; expected one of {FORMS}") from None
