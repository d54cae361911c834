"""docs/summary.schema.json is the summary's contract: a real run's summary validates against it, the schema is not
vacuous (broken summaries fail it), and it names every metric of the registry."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from tests.support import ROOT
from tests.users.e2e import run_locust, scripted

SCHEMA = json.loads((ROOT / "docs" / "summary.schema.json").read_text())


@pytest.fixture(scope="module")
def summary(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("schema")
    with scripted("--ttft-ms", "20", "--itl-ms", "4", "--tokens-per-chunk", "2") as (host, _stats):
        run = run_locust(host, ["-r", "4", "--shape", "concurrency-sweep", "--sweep-users", "1,4",
                                "--stage-duration", "2", "--stage-warmup", "1", "--input-len", "fixed:64",
                                "--output-len", "fixed:16", "-t", "30s"], tmp)
    assert run.rc == 0, run.output
    assert run.summary is not None
    return run.summary


def test_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.slow
def test_real_run_summary_validates(summary):
    jsonschema.Draft202012Validator(SCHEMA).validate(summary)
    assert summary["requests"]["ok"] > 0 and len(summary["stages"]) == 4  # two stages, each with its warm-up


@pytest.mark.parametrize(
    "breakage",
    [
        lambda s: s.pop("ttft_ms"),
        lambda s: s["ttst_ms"].update(p99="12 ms"),
        lambda s: s["requests"]["errors"].update(nonsense=1),
        lambda s: s["stages"][0].pop("itl_ms"),
        lambda s: s.update(surprise=True),
        lambda s: s["tokens"].update(source="guess"),
    ],
    ids=["missing-metric", "string-quantile", "unknown-error-kind", "stage-missing-metric", "unknown-key", "bad-enum"],
)
@pytest.mark.slow
def test_broken_summaries_fail(summary, breakage):
    broken = copy.deepcopy(summary)
    breakage(broken)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(SCHEMA).validate(broken)


def test_schema_names_every_registry_metric():
    from telemetry.metrics import CLIENT_METRICS

    top = set(SCHEMA["properties"])
    stage = set(SCHEMA["$defs"]["stage"]["required"])
    for m in CLIENT_METRICS:
        assert (m.summary_key in top) == m.top, m.key
        assert (m.summary_key in stage) == m.per_stage, m.key
