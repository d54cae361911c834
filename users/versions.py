"""Each gray-routed version's tokenizer (``--route-tokenizers``), resolved once per process at ``test_start``.

A version runs the tokenizer ``--route-tokenizers`` names; else ``--tokenizer`` when it names one; else (``auto``,
the default) the one :func:`workload.tokenizers.choose_tokenizer` picks for the served model of that version's
backend. Its requests carry that tokenizer's hash and the compat level measured against the table's first version
(:mod:`workload.compat`); the run record lists them (the summary's ``versions.<v>.tokenizer``).

    vt = resolve_versions(table, {"beta": "deepseek-v3"}, "auto", model_of=lambda url: "deepseek-ai/DeepSeek-V2")
    vt["beta"].headers("beta")   # X-Tokenizer-Version / -Hash / X-Compat-Level
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from workload.compat import measure
from workload.routing import RouteTable, metadata_headers
from workload.tokenizers import AUTO, choose_tokenizer, load_tokenizer, tokenizer_hash


@lru_cache(maxsize=32)
def _measure(old: str, new: str) -> dict:
    return measure(load_tokenizer(old), load_tokenizer(new))


@dataclass(frozen=True)
class VersionTokenizer:
    """One version's tokenizer and what its requests say about it."""

    name: str
    source: str
    """``route-tokenizers``, ``option`` (--tokenizer), ``model`` / ``hub`` / ``fallback`` (auto, its backend's)."""
    model: str | None
    reference: str
    """The first version's tokenizer, which the compat level is measured against."""

    @property
    def hash(self) -> str:
        return tokenizer_hash(self.name)

    @property
    def drift(self) -> dict:
        return _measure(self.reference, self.name)

    @property
    def compat_level(self) -> str:
        return str(self.drift["level"])

    def headers(self, version: str) -> dict[str, str]:
        return metadata_headers(version, self.name, self.compat_level)

    def record(self) -> dict:
        d = self.drift
        return {"name": self.name, "hash": self.hash, "source": self.source, "model": self.model,
                "compat_level": d["level"], "compared_with": self.reference,
                "mean_token_ratio": d["mean_token_ratio"]}  # fmt: skip


def resolve_versions(table: RouteTable, named: dict[str, str], tokenizer_option: str,
                     model_of: Callable[[str], str | None]) -> dict[str, VersionTokenizer]:
    """``{version: VersionTokenizer}`` for every version of the table; ``model_of(base_url)`` is asked only for the
    versions that choose by their backend's served model."""
    urls = {r.version: r.base_url for _lo, _hi, r in table.spans}
    chosen: dict[str, tuple[str, str, str | None]] = {}
    for version in table.versions:
        name = named.get(version, AUTO)
        if name != AUTO:
            chosen[version] = (name, "route-tokenizers", None)
        elif tokenizer_option != AUTO:
            chosen[version] = (tokenizer_option, "option", None)
        else:
            model = model_of(urls[version])
            c = choose_tokenizer(AUTO, model)
            chosen[version] = (c.name, c.source, model)
    reference = chosen[table.versions[0]][0]
    return {v: VersionTokenizer(n, src, m, reference) for v, (n, src, m) in chosen.items()}
