"""Step-time cost model: how long one engine step takes on the simulated hardware.

    t = base + per_prefill_token * prefill_tokens + per_decode_seq * decode_seqs
             + per_context_token * context_tokens            (milliseconds in the profile)

``prefill_tokens`` are the prompt (or recompute) tokens scheduled in the step, ``decode_seqs`` the
sequences decoding, ``context_tokens`` the KV length every scheduled sequence attends over (the
attention cost that grows with the context). Profiles fit the four numbers (see ``profiles/*.json``).
"""

from __future__ import annotations

from dataclasses import dataclass

from server.sim.scheduler import Step


@dataclass(frozen=True, slots=True)
class CostModel:
    base_ms: float
    per_prefill_token_ms: float
    per_decode_seq_ms: float
    per_context_token_ms: float

    @classmethod
    def from_dict(cls, d: dict) -> CostModel:
        keys = {"base", "per_prefill_token", "per_decode_seq", "per_context_token"}
        unknown = set(d) - keys
        if unknown:
            raise ValueError(f"cost_ms: unknown key(s) {sorted(unknown)}; expected {sorted(keys)}")
        missing = keys - set(d)
        if missing:
            raise ValueError(f"cost_ms: missing key(s) {sorted(missing)}")
        vals = {k: float(d[k]) for k in keys}
        if any(v < 0 for v in vals.values()):
            raise ValueError("cost_ms: values must be >= 0")
        return cls(vals["base"], vals["per_prefill_token"], vals["per_decode_seq"], vals["per_context_token"])

    def scaled(self, factor: float) -> CostModel:
        """Every step ``factor`` times as long (a slow data-parallel rank, ``--dp-skew``)."""
        return CostModel(self.base_ms * factor, self.per_prefill_token_ms * factor, self.per_decode_seq_ms * factor,
                         self.per_context_token_ms * factor)

    def step_seconds(self, step: Step) -> float:
        return self.seconds(step.prefill_tokens, step.decode_seqs, step.context_tokens)

    def seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return (
            self.base_ms
            + self.per_prefill_token_ms * prefill_tokens
            + self.per_decode_seq_ms * decode_seqs
            + self.per_context_token_ms * context_tokens
        ) / 1000.0
