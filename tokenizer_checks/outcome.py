"""What a check command returns: the JSON object, the human-readable lines, and the thresholds it crossed.

The CLI prints ``data`` as one JSON object with ``--json`` (else ``lines``) and exits 1 when any
threshold given on the command line was crossed (``Outcome.failed``), 0 otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Outcome:
    data: dict
    lines: list[str] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)

    def check(self, name: str, value: float, limit: float | None, crossed_when: str = "above") -> None:
        """Record a threshold given on the command line (``limit`` None = not given, nothing recorded)."""
        if limit is None:
            return
        crossed = value > limit if crossed_when == "above" else value < limit
        self.checks.append({"name": name, "limit": limit, "value": value, "crossed": crossed})
        if crossed:
            word = "above" if crossed_when == "above" else "below"
            self.lines.append(f"CHECK FAILED: {name} = {value:g} is {word} the limit {limit:g}")

    @property
    def failed(self) -> bool:
        return any(c["crossed"] for c in self.checks)

    def to_json(self) -> dict:
        return {**self.data, "checks": self.checks, "passed": not self.failed}
