"""Gray routing by request fingerprint (seed 4.2) and tokenizer metadata headers (seed 4.3).

A request's fingerprint is ``model_id + ":" + sha256(canonical)[:16 hex]`` where ``canonical`` is
``json.dumps(input_obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` encoded as UTF-8.
Its bucket is ``int(hex16, 16) % 100``; a table of bucket ranges picks the version (and, in a load
test, the host) that serves it. The same model and input always land in the same bucket.

What ``input_obj`` is:
  * chat completions: the ``messages`` list exactly as sent (list of ``{"role", "content"}`` dicts);
  * completions: the ``prompt`` as sent (a string, or the list when a batch of prompts is sent).
Sampling parameters (max_tokens, temperature, stream) are not part of the fingerprint: the same
question goes to the same version whatever the generation settings.

    >>> fp, bucket = fingerprint("deepseek-v4", [{"role": "user", "content": "hi"}])
    >>> table = RouteTable.parse("v1=http://127.0.0.1:8000@0-79,beta=http://127.0.0.1:8001@80-99")
    >>> route = table.pick(bucket)          # Route(version="v1" or "beta", base_url=...)
    >>> headers = metadata_headers(route.version, "deepseek-v4")
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from workload.tokenizers import tokenizer_hash

BUCKETS = 100
DEFAULT_BUCKET_TABLE = "0-79=v1,80-94=beta,95-99=canary"
ROUTE_TABLE_FORM = "VERSION=URL@LO-HI[,VERSION=URL@LO-HI...] (e.g. v1=http://a:8000@0-79,beta=http://b:8000@80-99)"
ROUTE_TOKENIZERS_FORM = (
    "VERSION=TOKENIZER[,VERSION=TOKENIZER...] (a bundled name, a path or auto; e.g. v1=deepseek-v2,beta=deepseek-v3)"
)
BUCKET_TABLE_FORM = "LO-HI=VERSION[,LO-HI=VERSION...] (e.g. 0-79=v1,80-94=beta,95-99=canary)"
COMPAT_LEVELS = ("full", "backward", "forward", "none")
"""X-Compat-Level values, from the strictest: see :func:`workload.routing.compat.compat_level` for the measured rule."""
ROUTE_FALLBACK_MESSAGE = "llm_route_fallback"
"""The master -> worker message of a fallback (``--route-fallback``): ``{"from": version, "to": version}``."""
ROUTE_FALLBACK_OPTION = "llm_route_fallback_applied"
"""Attribute of the master's ``parsed_options`` that carries an applied fallback to workers that connect later (their
first spawn message holds the options; cleared at each test start)."""
TOKENIZER_HEADERS = ("X-Tokenizer-Version", "X-Tokenizer-Hash", "X-Compat-Level")

_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_RANGE_RE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$|^\s*(\d+)\s*$")


def canonical_json(input_obj: object) -> bytes:
    """The canonical UTF-8 bytes that are hashed (sorted keys, no spaces, non-ASCII kept)."""
    return json.dumps(input_obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def fingerprint(model_id: str, input_obj: object) -> tuple[str, int]:
    """``(fingerprint, bucket)``: ``model_id:<16 hex of sha256(canonical)>`` and ``int(hex, 16) % 100``."""
    digest16 = hashlib.sha256(canonical_json(input_obj)).hexdigest()[:16]
    return f"{model_id}:{digest16}", int(digest16, 16) % BUCKETS


def _parse_range(text: str, form: str) -> tuple[int, int]:
    m = _RANGE_RE.match(text)
    if not m:
        raise ValueError(f"bad bucket range {text!r}; expected {form}")
    lo, hi = (int(m.group(1)), int(m.group(2))) if m.group(1) is not None else (int(m.group(3)),) * 2
    if not 0 <= lo <= hi < BUCKETS:
        raise ValueError(f"bucket range {text.strip()!r} must satisfy 0 <= LO <= HI <= {BUCKETS - 1}; expected {form}")
    return lo, hi


def _check_cover(spans: list[tuple[int, int, str]], form: str) -> None:
    """Ranges must cover 0..99 exactly once."""
    owner: dict[int, str] = {}
    for lo, hi, version in spans:
        for b in range(lo, hi + 1):
            if b in owner:
                raise ValueError(f"bucket {b} is in both {owner[b]!r} and {version!r}; expected {form}")
            owner[b] = version
    missing = [b for b in range(BUCKETS) if b not in owner]
    if missing:
        raise ValueError(f"buckets {_compact(missing)} are not covered (ranges must cover 0-99); expected {form}")


def _compact(nums: list[int]) -> str:
    """[1, 2, 3, 7] -> '1-3,7'."""
    runs: list[list[int]] = []
    for n in nums:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in runs)


def _check_version(version: str, form: str) -> str:
    if not _VERSION_RE.match(version):
        raise ValueError(f"bad version name {version!r} (letters, digits, . _ -); expected {form}")
    return version


def _check_url(url: str, form: str) -> str:
    parts = urlsplit(url)
    try:
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError:
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok or parts.query or parts.fragment:
        raise ValueError(f"bad URL {url!r} (need http(s)://host[:port][/path]); expected {form}")
    return url.rstrip("/")


@dataclass(frozen=True)
class BucketTable:
    """Bucket ranges -> version names, covering 0..99 exactly once."""

    spans: tuple[tuple[int, int, str], ...]

    @classmethod
    def parse(cls, text: str) -> BucketTable:
        spans: list[tuple[int, int, str]] = []
        for item in _items(text, BUCKET_TABLE_FORM):
            rng, sep, version = item.partition("=")
            if not sep:
                raise ValueError(f"bad entry {item!r}; expected {BUCKET_TABLE_FORM}")
            lo, hi = _parse_range(rng, BUCKET_TABLE_FORM)
            spans.append((lo, hi, _check_version(version.strip(), BUCKET_TABLE_FORM)))
        _check_cover(spans, BUCKET_TABLE_FORM)
        return cls(tuple(sorted(spans)))

    def version(self, bucket: int) -> str:
        for lo, hi, version in self.spans:
            if lo <= bucket <= hi:
                return version
        raise ValueError(f"bucket {bucket} outside 0-{BUCKETS - 1}")

    def shares(self) -> dict[str, float]:
        """Expected share of traffic per version (0..1)."""
        out: dict[str, float] = {}
        for lo, hi, version in self.spans:
            out[version] = out.get(version, 0.0) + (hi - lo + 1) / BUCKETS
        return out


@dataclass(frozen=True)
class Route:
    version: str
    base_url: str


@dataclass(frozen=True)
class RouteTable:
    """``--route-table``: versions -> base URLs and bucket ranges; ``pick(bucket)`` gives the Route."""

    spans: tuple[tuple[int, int, Route], ...]

    @classmethod
    def parse(cls, text: str) -> RouteTable:
        spans: list[tuple[int, int, Route]] = []
        urls: dict[str, str] = {}
        for item in _items(text, ROUTE_TABLE_FORM):
            version, sep, rest = item.partition("=")
            url, at, rng = rest.rpartition("@")
            if not sep or not at:
                raise ValueError(f"bad entry {item!r}; expected {ROUTE_TABLE_FORM}")
            version = _check_version(version.strip(), ROUTE_TABLE_FORM)
            url = _check_url(url.strip(), ROUTE_TABLE_FORM)
            if urls.setdefault(version, url) != url:
                raise ValueError(
                    f"version {version!r} has two URLs ({urls[version]}, {url}); expected {ROUTE_TABLE_FORM}"
                )
            lo, hi = _parse_range(rng, ROUTE_TABLE_FORM)
            spans.append((lo, hi, Route(version, url)))
        _check_cover([(lo, hi, r.version) for lo, hi, r in spans], ROUTE_TABLE_FORM)
        return cls(tuple(sorted(spans, key=lambda s: s[0])))

    def pick(self, bucket: int) -> Route:
        for lo, hi, route in self.spans:
            if lo <= bucket <= hi:
                return route
        raise ValueError(f"bucket {bucket} outside 0-{BUCKETS - 1}")

    def route_for(self, model_id: str, input_obj: object) -> tuple[str, int, Route]:
        """Fingerprint a request and pick its route: ``(fingerprint, bucket, route)``."""
        fp, bucket = fingerprint(model_id, input_obj)
        return fp, bucket, self.pick(bucket)

    @property
    def versions(self) -> list[str]:
        return list(dict.fromkeys(r.version for _, _, r in self.spans))

    def buckets(self) -> BucketTable:
        return BucketTable(tuple((lo, hi, r.version) for lo, hi, r in self.spans))

    def moved(self, from_version: str, to_version: str) -> RouteTable:
        """The table with ``from_version``'s buckets served by ``to_version`` (a fallback): same ranges, its route."""
        target = next((r for _lo, _hi, r in self.spans if r.version == to_version), None)
        if target is None or from_version not in self.versions:
            raise ValueError(f"fallback {from_version}->{to_version}: the route table has {', '.join(self.versions)}")
        return RouteTable(tuple((lo, hi, target if r.version == from_version else r) for lo, hi, r in self.spans))


def parse_route_tokenizers(text: str) -> dict[str, str]:
    """``--route-tokenizers``: ``{version: tokenizer}`` (names or paths; each version once)."""
    out: dict[str, str] = {}
    for item in _items(text, ROUTE_TOKENIZERS_FORM):
        version, sep, tok = item.partition("=")
        version, tok = version.strip(), tok.strip()
        if not sep or not tok:
            raise ValueError(f"bad entry {item!r}; expected {ROUTE_TOKENIZERS_FORM}")
        _check_version(version, ROUTE_TOKENIZERS_FORM)
        if version in out:
            raise ValueError(f"version {version!r} is given twice; expected {ROUTE_TOKENIZERS_FORM}")
        out[version] = tok
    return out


def _items(text: str, form: str) -> list[str]:
    items = [p.strip() for p in (text or "").split(",") if p.strip()]
    if not items:
        raise ValueError(f"empty table; expected {form}")
    return items


@lru_cache(maxsize=32)
def _cached_hash(tokenizer: str) -> str:
    return tokenizer_hash(tokenizer)


def metadata_headers(version: str, tokenizer: str, compat_level: str = "backward") -> dict[str, str]:
    """The gray-routing headers: X-Tokenizer-Version, X-Tokenizer-Hash (sha256 of tokenizer.json), X-Compat-Level."""
    if compat_level not in COMPAT_LEVELS:
        raise ValueError(f"compat level {compat_level!r} not one of {', '.join(COMPAT_LEVELS)}")
    return {
        "X-Tokenizer-Version": version,
        "X-Tokenizer-Hash": _cached_hash(tokenizer),
        "X-Compat-Level": compat_level,
    }
