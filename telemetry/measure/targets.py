"""The servers a run scrapes: ``--server-metrics-url``'s grammar (``URL[,URL...]``, an item ``role=URL``).

    metrics_targets("prefill=http://p:8000/metrics,decode=http://d:8000/metrics", None)
    -> [Target("prefill", "http://p:8000/metrics", "prefill"), Target("decode", ..., "decode")]
    metrics_targets(None, "http://127.0.0.1:8000/v1")  -> [Target("127.0.0.1:8000", ".../metrics")]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from urllib.parse import urlsplit

ROLES = ("prefill", "decode")
"""The ``role=`` names a target may carry (disaggregated prefill/decode)."""
GRAMMAR = "URL[,URL...] (an item may be role=URL, role prefill or decode) or 'off'"


@dataclass(frozen=True)
class Target:
    """One server's /metrics: ``name`` (its role, else host:port), ``url``, ``role`` (prefill, decode or None)."""

    name: str
    url: str
    role: str | None = None


def metrics_url(option: str | None, host: str | None) -> str | None:
    """The first target's URL (``--server-metrics-url``; ``off`` -> None; default ``<host>/metrics``)."""
    targets = metrics_targets(option, host)
    return targets[0].url if targets else None


def _host_metrics(host: str | None) -> str | None:
    if not host:
        return None
    base = host.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base + "/metrics"


def parse_targets(text: str) -> list[Target]:
    """``URL[,URL...]`` with items ``role=URL`` (role prefill or decode) -> targets; ValueError names a bad item."""
    items = [i.strip() for i in text.split(",") if i.strip()]
    if not items:
        raise ValueError("expected URL[,URL...] (an item may be role=URL, role prefill or decode)")
    out: list[Target] = []
    for item in items:
        role, sep, url = item.partition("=")
        if not sep or "://" in role:
            role, url = None, item
        elif role not in ROLES:
            raise ValueError(f"{item!r}: role must be one of {', '.join(ROLES)}")
        if not url.startswith(("http://", "https://")) or not urlsplit(url).netloc:
            raise ValueError(f"{item!r}: expected an http(s) URL")
        name = role or urlsplit(url).netloc
        taken = {t.name for t in out}
        if name in taken:
            name = next(f"{name}#{i}" for i in range(2, len(items) + 2) if f"{name}#{i}" not in taken)
        out.append(Target(name, url, role))
    return out


def metrics_targets(option: str | None, host: str | None) -> list[Target]:
    """``--server-metrics-url``: its targets; ``off`` -> none; default the one ``<host>/metrics``."""
    if option and option.strip().lower() == "off":
        return []
    if option:
        return parse_targets(option)
    url = _host_metrics(host)
    return [Target(urlsplit(url).netloc, url)] if url else []


def targets_or_off(text: str) -> str:
    """``--server-metrics-url``'s type: ``off`` or a target list :func:`parse_targets` accepts."""
    if str(text).strip().lower() != "off":
        try:
            parse_targets(str(text))
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"expected {GRAMMAR}: {e}") from None
    return text
