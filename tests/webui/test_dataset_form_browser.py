"""The dataset fields of the start form, in headless Chromium against the simulator.

They sit in the form's Workload group with plain labels; a dataset path that does not exist is refused under the
form (the option's name and why) and nothing starts; a ShareGPT file typed in with a format and a sample size is
what the run replays: the run record names the file, the format and the sampled records.
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from tests.webui.chromium import (
    form_field,
    press_start,
    require_chromium,
    start_from_ui,
    type_into,
    wait_for,
    web_ui_on_sim,
)

pytestmark = pytest.mark.slow
FIELDS = {"dataset": "Dataset (conversations to replay)", "datasetFormat": "Dataset format",
          "datasetSample": "Dataset records to sample"}


def _sharegpt(n: int) -> list[dict]:
    return [{"id": f"c{i}", "conversations": [{"from": "human", "value": f"question {i}: how does a KV cache fill?"},
                                              {"from": "gpt", "value": f"answer {i}: block by block."}]}
            for i in range(n)]


def _state(web: str) -> dict:
    with urllib.request.urlopen(web + "/stats/requests", timeout=10) as r:
        return json.loads(r.read())


def test_dataset_fields_refuse_a_missing_file_then_replay_the_one_typed_in(tmp_path):
    require_chromium()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    data = tmp_path / "chats.json"
    data.write_text(json.dumps(_sharegpt(5)))
    env = {"LOCUST_PROMETHEUS_PORT": "0", "LOCUST_OUTPUT_LEN": "fixed:8"}
    with web_ui_on_sim(tmp_path, "StreamingChatUser", env) as (driver, web, proc):
        driver.get(web + "/")
        box = wait_for(lambda: form_field(driver, "dataset"), 30, "the dataset field")
        for name, label in FIELDS.items():
            shown = driver.execute_script(
                "var f = document.querySelector('[name=' + arguments[0] + ']').closest('.MuiFormControl-root');"
                "return [f.querySelector('label').textContent, f.closest('[data-llm-field]').dataset.llmField];", name)
            assert shown == [label, "workload"], (name, shown)

        type_into(box, str(tmp_path / "missing.json"))
        press_start(driver)
        body = wait_for(lambda: "--dataset:" in (t := driver.find_element(By.TAG_NAME, "body").text) and t, 20,
                        "the refusal under the form")
        assert "no such dataset file" in body and "missing.json" in body, body[-2000:]
        assert _state(web)["state"] == "ready"

        type_into(box, str(data))
        Select(form_field(driver, "datasetFormat")).select_by_value("sharegpt")
        type_into(form_field(driver, "datasetSample"), "3")
        start_from_ui(driver, 1, 1)
        wait_for(lambda: _state(web)["state"] == "running", 30, "the run")
        time.sleep(2)
        urllib.request.urlopen(urllib.request.Request(f"{web}/stop", method="POST"), timeout=10).read()
        wait_for(lambda: _state(web)["state"] == "stopped", 30, "the run to stop")
        with urllib.request.urlopen(web + "/llm/summary.json", timeout=30) as r:
            summary = json.loads(r.read())
        record = summary["run"]["dataset"]
        got = (record["path"], record["format"], record["records"], record["selected"])
        assert got == (str(data), "sharegpt", 5, 3), record
        assert summary["requests"]["ok"] > 0 and "Traceback" not in proc.output(), proc.output()[-3000:]
