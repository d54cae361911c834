"""The summary's ``speculative`` section: how well the server's speculative decoding (DeepSeek's MTP, ngram, EAGLE)
guessed during the run, from two sources.

- the server's counters (``vllm:spec_decode_num_drafts``, ``_num_draft_tokens``, ``_num_accepted_tokens``,
  ``_num_accepted_tokens_per_pos{position}``, per ``engine``; telemetry/measure/scraper.py): their increase over
  the run and over each stage;
- the in-band records of our own requests (``--per-request-spec-decode-metrics``: each request's ``spec_steps``,
  ``spec_drafted``, ``spec_accepted``; the recorder sums them per stage).

    acceptance rate        = accepted draft tokens / draft tokens
    mean acceptance length = 1 + accepted draft tokens / verify steps (tokens a step emits, the bonus token included)
    acceptance at position i = steps accepting draft position i / verify steps

The headline figures are the counters' when the server exports them (``source: "server_counters"``), else the
in-band records' (``"in_band"``); the section is None when neither saw a draft. Acceptance depends on the text and
the temperature: the section records both (``prompt_source``, ``temperature``) and warns when the prompts were
synthetic — their acceptance is not that of real traffic.

    section = speculative_section(view, summary)     # dict or None
    print(console_lines(summary))
"""

from __future__ import annotations

import math

from telemetry.measure.recorder import Recorder
from telemetry.measure.view import RunView
from telemetry.outputs.fleet import counter_delta
from users.options import SYNTHETIC_SOURCES, prompt_source, sampling_fields

FIELDS = ("drafts", "draft_tokens", "accepted")
"""The counters' fields (telemetry.measure.scraper.SPEC_COUNTERS), summed over engines."""
IN_BAND = ("spec_steps", "spec_drafted", "spec_accepted")
"""The in-band record's client metrics (telemetry.metrics), summed over requests."""


def _flat(series: list[dict]) -> list[dict]:
    """Per scrape: the spec counters summed over engines (``pos<i>`` per position); scrapes without them dropped."""
    out = []
    for s in series:
        spec = s.get("spec")
        if not spec:
            continue
        row: dict = {"t": s["t"]}
        for engine in spec.values():
            for f in FIELDS:
                if engine.get(f) is not None:
                    row[f] = row.get(f, 0.0) + engine[f]
            for i, v in enumerate(engine.get("per_position") or ()):
                row[f"pos{i}"] = row.get(f"pos{i}", 0.0) + v
        out.append(row)
    return out


def figures(steps: float | None, drafted: float | None, accepted: float | None,
            per_position: list[float] | None = None) -> dict | None:
    """Acceptance rate, mean acceptance length and acceptance per position from totals; None without a draft."""
    if not drafted or accepted is None:
        return None
    return {
        "steps": int(steps) if steps is not None else None,
        "draft_tokens": int(drafted),
        "accepted_tokens": int(accepted),
        "acceptance_rate": accepted / drafted,
        "mean_acceptance_length": 1.0 + accepted / steps if steps else None,
        "acceptance_per_position": [p / steps for p in per_position] if steps and per_position else [],
    }


def counter_figures(series: list[dict], start_s: float, end_s: float) -> dict | None:
    """The counters' increase over ``[start_s, end_s]`` as :func:`figures`."""
    flat = _flat(series)
    if not flat:
        return None
    positions = sorted(int(k[3:]) for k in set().union(*flat) if k.startswith("pos"))
    per = [counter_delta(flat, f"pos{i}", start_s, end_s) or 0.0 for i in positions]
    steps, drafted, accepted = (counter_delta(flat, f, start_s, end_s) for f in FIELDS)
    return figures(steps, drafted, accepted, per)


def in_band_figures(cells: list) -> dict | None:
    """The in-band records' sums over ``cells`` as :func:`figures` (no per-position split: the counters have it)."""
    sketches = [Recorder.merged_sketch(cells, k) for k in IN_BAND]
    if not sketches[1].count:
        return None
    out = figures(*(s.sum for s in sketches))
    if out is not None:
        out["requests"] = sketches[1].count
    return out


def _per_engine(series: list[dict]) -> dict[str, dict]:
    """The run's counter increase per ``engine`` label (data-parallel engines each export their own)."""
    engines = sorted({e for s in series for e in (s.get("spec") or {})})
    out = {}
    for e in engines:
        one = [{"t": s["t"], "spec": {e: s["spec"][e]}} for s in series if e in (s.get("spec") or {})]
        if (f := counter_figures(one, one[0]["t"], one[-1]["t"])) is not None:
            out[e] = f
    return out


def warning_for(source: str) -> str | None:
    """The validity warning for a prompt source whose text no user wrote."""
    if source not in SYNTHETIC_SOURCES:
        return None
    return (f"speculative acceptance was measured on {source} prompts: it is the acceptance of that text, not of "
            "your traffic (DeepSeek MTP has measured 10 % on one text and 49 % on another); measure it with "
            "--prompt-file or --dataset")


def _headline(counters: dict | None, in_band: dict | None) -> tuple[str | None, dict | None]:
    if counters is not None:
        return "server_counters", counters
    return ("in_band", in_band) if in_band is not None else (None, None)


def speculative_section(view: RunView, _summary: dict | None = None) -> dict | None:
    """The summary's ``speculative`` (None when neither the counters nor the in-band records saw a draft)."""
    series = view.server_series
    t0 = series[0]["t"] if series else 0.0
    t1 = series[-1]["t"] if series else 0.0
    warmup = view.warmup_stages()
    counters = counter_figures(series, t0, t1)
    in_band = in_band_figures([c for k, c in view.merged.cells.items() if k[1] not in warmup])
    source, head = _headline(counters, in_band)
    if head is None:
        return None
    stages = []
    spans = view.stage_spans()
    for i, (st, start, end) in enumerate(spans):
        last = i == len(spans) - 1  # the last stage's counters run to the final scrape at quit
        s_source, s_head = _headline(counter_figures(series, start, math.inf if last else end),
                                     in_band_figures(view.merged.select(stage=st.name)))
        stages.append({"name": st.name, "source": s_source,
                       **{k: (s_head or {}).get(k) for k in ("acceptance_rate", "mean_acceptance_length")},
                       "acceptance_per_position": (s_head or {}).get("acceptance_per_position") or []})
    prompts = prompt_source(view.options)
    return {
        "source": source,
        "acceptance_rate": head["acceptance_rate"],
        "mean_acceptance_length": head["mean_acceptance_length"],
        "acceptance_per_position": head["acceptance_per_position"],
        "counters": counters,
        "engines": _per_engine(series),
        "in_band": in_band,
        "stages": stages,
        "prompt_source": prompts,
        "temperature": sampling_fields(view.options).get("temperature"),
        "warning": warning_for(prompts),
    }


def console_lines(summary: dict) -> list[str]:
    """The console's speculative lines (none without the section)."""
    s = summary.get("speculative")
    if not s:
        return []
    per = ", ".join(f"{p:.0%}" for p in s["acceptance_per_position"])
    mal = s["mean_acceptance_length"]
    temp = s["temperature"]
    line = (f"speculative decoding ({s['source']}): acceptance {s['acceptance_rate']:.1%}"
            + (f", mean acceptance length {mal:.2f}" if mal is not None else "")
            + (f", per position {per}" if per else "")
            + f"; prompts {s['prompt_source']}, temperature {'server default' if temp is None else f'{temp:g}'}")
    return [line] + ([f"WARNING: {s['warning']}"] if s["warning"] else [])
