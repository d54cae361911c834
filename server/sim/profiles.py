"""Simulator profiles: data files describing a model on some hardware (engine defaults + cost model).

A profile is ``server/sim/profiles/<name>.json`` (or any path to such a file)::

    {"name": "...", "description": "...", "served_model_name": "deepseek-ai/DeepSeek-V2-Lite",
     "engine": {"max_num_seqs": 256, "max_num_batched_tokens": 512, "block_size": 16,
                "num_gpu_blocks": 100000, "max_model_len": 32768, "enable_prefix_caching": true},
     "cost_ms": {"base": 6.0, "per_prefill_token": 0.04, "per_decode_seq": 0.05, "per_context_token": 0.0001},
     "eos_probability": 0.004, "calibration": {...free-form notes...}}

Unknown keys are rejected with a message naming them, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from server.sim.cost import CostModel

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
DEFAULT_PROFILE = "deepseek-v2-lite-a100"
ENGINE_KEYS = {
    "max_num_seqs": int,
    "max_num_batched_tokens": int,
    "block_size": int,
    "num_gpu_blocks": int,
    "max_model_len": int,
    "enable_prefix_caching": bool,
}
TOP_KEYS = {"name", "description", "served_model_name", "engine", "cost_ms", "eos_probability", "calibration"}


class ProfileError(ValueError):
    """A profile that cannot be found or does not validate."""


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    served_model_name: str
    engine: dict
    cost: CostModel
    eos_probability: float


def available() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.json"))


def load_profile(name_or_path: str) -> Profile:
    path = Path(name_or_path)
    if not (path.suffix == ".json" and path.is_file()):
        path = PROFILE_DIR / f"{name_or_path}.json"
    if not path.is_file():
        names = ", ".join(available())
        raise ProfileError(f"unknown profile {name_or_path!r}: use one of {names} or a path to a .json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ProfileError(f"profile {path}: invalid JSON ({e})") from None
    return parse_profile(data, str(path))


def parse_profile(data: dict, where: str = "profile") -> Profile:
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: expected a JSON object")
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise ProfileError(f"{where}: unknown key(s) {sorted(unknown)}; allowed {sorted(TOP_KEYS)}")
    engine = data.get("engine", {})
    bad = set(engine) - set(ENGINE_KEYS)
    if bad:
        raise ProfileError(f"{where}: unknown engine key(s) {sorted(bad)}; allowed {sorted(ENGINE_KEYS)}")
    for key, typ in ENGINE_KEYS.items():
        if key in engine and not isinstance(engine[key], typ):
            raise ProfileError(f"{where}: engine.{key} must be {typ.__name__}")
    try:
        cost = CostModel.from_dict(data.get("cost_ms", {}))
    except ValueError as e:
        raise ProfileError(f"{where}: {e}") from None
    eos_p = float(data.get("eos_probability", 0.0))
    if not 0.0 <= eos_p < 1.0:
        raise ProfileError(f"{where}: eos_probability must be in [0, 1)")
    return Profile(
        name=str(data.get("name", Path(where).stem)),
        description=str(data.get("description", "")),
        served_model_name=str(data.get("served_model_name", "sim-model")),
        engine=dict(engine),
        cost=cost,
        eos_probability=eos_p,
    )
