"""fingerprint command: reproducible against sha256sum, version from the bucket table, 4.3 headers."""

from __future__ import annotations

import hashlib

from tests.tokenizer_checks.helpers import run_json
from workload.tokenizers import tokenizer_json_bytes


def test_fingerprint_against_hand_computed_sha256(capsys, tmp_path):
    # printf '%s' '[{"content":"你好 world","role":"user"}]' | sha256sum
    expected = "bce6d041a2e5883e9bfd995d90f871794cf440e3cdaa05e6c3850dc3c4d33706"
    req = tmp_path / "req.json"
    req.write_text('[ {"role": "user", "content": "你好 world"} ]', encoding="utf-8")
    code, d = run_json(capsys, "fingerprint", "--model-id", "deepseek-v4", "--input", f"@{req}")
    assert code == 0
    assert d["sha256"] == expected and d["canonical"] == '[{"content":"你好 world","role":"user"}]'
    assert d["fingerprint"] == "deepseek-v4:" + expected[:16]
    assert d["bucket"] == int(expected[:16], 16) % 100 == 10 and d["version"] == "v1"
    assert d["headers"]["X-Tokenizer-Hash"] == hashlib.sha256(tokenizer_json_bytes("deepseek-v4")).hexdigest()
    assert d["headers"]["X-Tokenizer-Version"] == "v1" and d["headers"]["X-Compat-Level"] == "backward"


def test_table_picks_the_version(capsys):
    # "Hello" hashes to bucket 61
    code, d = run_json(capsys, "fingerprint", "--model-id", "m", "--input", '"Hello"', "--table", "0-60=a,61-99=b",
                       "--tokenizer", "deepseek-v3", "--compat-level", "full")
    assert (d["bucket"], d["version"]) == (61, "b")
    assert d["headers"]["X-Compat-Level"] == "full"
    code, d = run_json(capsys, "fingerprint", "--model-id", "m", "--input", '"Hello"', "--table", "0-61=a,62-99=b")
    assert d["version"] == "a"
