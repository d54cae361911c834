"""Server alignment: do the client and the server count prompt tokens alike?

At test start a few synthetic prompts are counted by the server's ``POST /tokenize`` (vLLM's endpoint;
``{"prompt": ...}`` for completions, ``{"messages": [...]}`` for chat). A mismatch above 1% is logged
with its ratio; with ``--align-prompts`` the synthetic prompts are re-cut so that the SERVER's count
equals the drawn length (a line ``server = a * client + b`` fitted on the samples). A server without
``/tokenize`` (404, 405) is skipped quietly.

    report = check(post_json, source, rng, model="m")   # post_json(path, obj) -> (status, dict | None)
    report.ratio, report.fit
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from workload.prompts import SyntheticPrompts

log = logging.getLogger(__name__)
SAMPLE_LENGTHS = (32, 128, 512)
THRESHOLD = 0.01

PostJson = Callable[[str, dict], tuple[int, dict | None]]


@dataclass(frozen=True)
class AlignReport:
    client: tuple[int, ...]
    server: tuple[int, ...]

    @property
    def ratio(self) -> float:
        """Mean |server - client| / mean client."""
        c, s = np.asarray(self.client, float), np.asarray(self.server, float)
        return float(np.abs(s - c).mean() / c.mean())

    @property
    def fit(self) -> tuple[float, float]:
        """(a, b) with server ≈ a * client + b."""
        a, b = np.polyfit(np.asarray(self.client, float), np.asarray(self.server, float), 1)
        return float(a), float(b)


def check(
    post_json: PostJson,
    source: SyntheticPrompts,
    rng: np.random.Generator,
    model: str | None = None,
    align: bool = False,
) -> AlignReport | None:
    chat = source.count.chat
    client, server = [], []
    for n in SAMPLE_LENGTHS:
        p = source.build(rng, n)
        body: dict = {"messages": [{"role": "user", "content": p.text}]} if chat else {"prompt": p.text}
        if model:
            body["model"] = model
        status, answer = post_json("/tokenize", body)
        if status in (0, 404, 405, 501):  # 0: unreachable (already reported by the model look-up)
            log.debug("server has no /tokenize (HTTP %s): alignment skipped", status)
            return None
        if status != 200 or not isinstance(answer, dict) or not isinstance(answer.get("count"), int):
            log.warning("server /tokenize answered HTTP %s: prompt token alignment skipped", status)
            return None
        client.append(p.tokens)
        server.append(answer["count"])
    report = AlignReport(tuple(client), tuple(server))
    kind = "chat" if chat else "completion"
    if report.ratio > THRESHOLD:
        log.warning(
            "prompt token mismatch (%s): the server counts %s where the client counts %s (mismatch ratio %.2f%%)%s",
            kind,
            list(server),
            list(client),
            100 * report.ratio,
            "; re-cutting prompts to the server's count (--align-prompts)" if align else "; --align-prompts re-cuts",
        )
        if align:
            source.align(*report.fit)
    return report
