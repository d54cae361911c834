"""The start form's project options, grouped and labelled for a person: one table, applied in the browser.

Locust's form lists every extra option in one "Custom parameters" section, alphabetically, titled from its dest
("Llm Csv (Write PREFIX_llm_stats.csv ...)"). :data:`LAYOUT` says, per option (argparse dest), its group and its
label; ``/llm/form.js`` (loaded into Locust's page like the LLM tab's script) orders the fields by it with a heading
per group (CSS ``order`` in the section's flex column: React's own nodes stay where React put them), replaces each
title with the label (the help text follows under the field) and, in the shape group, shows only the fields the
chosen ``--shape`` reads (``shapes.registry.SHAPES[...].fields``). An option missing from the table (a user's
locustfile adds one) keeps Locust's title and goes under "Other". The page posts an option with a digit in its name
under a mangled key (:func:`posted_key`); a hook puts it back before /swarm reads the form.

    layout()             # [{"name": "inputLen", "group": "workload", "label": "Input length", ...}, ...]
"""

from __future__ import annotations

import json
import re

from flask import Blueprint, Response, request
from werkzeug.datastructures import ImmutableMultiDict

from shapes.registry import NONE, SHAPES

GROUPS: dict[str, str] = {
    "server": "Server",
    "workload": "Workload",
    "shape": "Load shape and run length",
    "slo": "SLOs and live detectors",
    "outputs": "Outputs and report",
    "routing": "Gray routing",
    "other": "Other",
}
"""Group key -> heading, in the form's order."""

LAYOUT: dict[str, tuple[str, str]] = {
    "model": ("server", "Model"),
    "api_key": ("server", "API key"),
    "tokenizer": ("server", "Tokenizer"),
    "request_timeout": ("server", "Request timeout (s)"),
    "input_len": ("workload", "Input length (tokens)"),
    "output_len": ("workload", "Output length (max tokens)"),
    "ignore_eos": ("workload", "Ignore EOS (generate exactly max tokens)"),
    "temperature": ("workload", "Temperature (empty: the server's)"),
    "top_p": ("workload", "Top-p (empty: the server's)"),
    "extra_body": ("workload", "Extra body fields (JSON object)"),
    "prompt_file": ("workload", "Prompt file (JSONL)"),
    "synthetic_text": ("workload", "Synthetic prompt text (natural or words)"),
    "dataset": ("workload", "Dataset (conversations to replay)"),
    "dataset_format": ("workload", "Dataset format"),
    "history": ("workload", "Replayed history (dataset or live answers)"),
    "dataset_sample": ("workload", "Dataset records to sample"),
    "dataset_shuffle": ("workload", "Shuffle the dataset"),
    "dataset_input_len": ("workload", "Dataset prompt length filter (tokens)"),
    "dataset_output_len": ("workload", "Dataset answer length filter (tokens)"),
    "batch_size": ("workload", "Prompts per batch request"),
    "seed": ("workload", "Random seed"),
    "prompt_salt": ("workload", "Prompt salt (run: fresh texts each run; none: the same every run)"),
    "align_prompts": ("workload", "Align prompts to the server's token count"),
    "shared_prefix_len": ("workload", "Shared prefix length (tokens)"),
    "prefix_groups": ("workload", "Shared prefix groups"),
    "turns": ("workload", "Turns per conversation"),
    "think_time": ("workload", "Think time between turns (s)"),
    "max_model_len": ("workload", "Context window (tokens)"),
    "shape": ("shape", "Load shape"),
    "sweep_users": ("shape", "Concurrency levels (users)"),
    "length_sweep": ("shape", "Input lengths to sweep"),
    "request_rate": ("shape", "Request rates (req/s)"),
    "arrival": ("shape", "Arrival process"),
    "max_concurrency": ("shape", "Max in-flight requests"),
    "trace": ("shape", "Trace file (Mooncake JSONL)"),
    "trace_speedup": ("shape", "Trace speed-up"),
    "search_users": ("shape", "Capacity search: users LO:HI"),
    "search_rate": ("shape", "Capacity search: req/s LO:HI"),
    "search_precision": ("shape", "Capacity search precision"),
    "search_max_probes": ("shape", "Capacity search: most probes"),
    "gpus": ("shape", "GPUs of the deployment"),
    "gpu_hour_price": ("shape", "Price per GPU-hour (USD)"),
    "stage_duration": ("shape", "Stage duration (s)"),
    "stage_warmup": ("shape", "Warm-up per stage (s)"),
    "num_requests": ("shape", "Stop after N requests"),
    "max_errors": ("shape", "Stop after N failed requests"),
    "slo_preset": ("slo", "SLO preset"),
    "slo_ttft_p99_ms": ("slo", "TTFT p99 at most (ms)"),
    "slo_ttfa_p99_ms": ("slo", "Time to first answer p99 at most (ms)"),
    "slo_itl_p95_ms": ("slo", "ITL p95 at most (ms)"),
    "slo_decode_span_p99_ms": ("slo", "Decode span p99 at most (ms)"),
    "slo_error_rate": ("slo", "Error rate at most (0..1)"),
    "llm_stop_on": ("slo", "Stop when a detector fires"),
    "batching_p99_rise": ("slo", "Batching rule: TTFT p99 rise (ratio)"),
    "batching_size_ratio": ("slo", "Batching rule: batch size fall (ratio)"),
    "batching_windows": ("slo", "Batching rule: windows in a row"),
    "imbalance_factor": ("slo", "Imbalance rule: factor over the other engines"),
    "imbalance_windows": ("slo", "Imbalance rule: windows in a row"),
    "llm_summary_json": ("outputs", "Summary JSON file"),
    "llm_csv": ("outputs", "CSV files prefix"),
    "llm_report": ("outputs", "HTML report file"),
    "llm_requests_jsonl": ("outputs", "Per-request JSONL file"),
    "vllm_bench_json": ("outputs", "vLLM bench JSON file"),
    "llm_baseline": ("outputs", "Baseline summary to compare"),
    "llm_progress_interval": ("outputs", "Progress line every (s, headless)"),
    "attribution_window": ("outputs", "Time-series window (s)"),
    "spike_factor": ("outputs", "Spike factor (× median window p99)"),
    "route_table": ("routing", "Route table"),
    "route_tokenizers": ("routing", "Tokenizer per version"),
    "route_fallback": ("routing", "Fallback rule"),
}
"""Option (argparse dest) -> (group key of GROUPS, label), in the form's order within each group."""

ROUTE = "/llm/form.js"
INDEX_ENDPOINT = "locust.index"


def camel(dest: str) -> str:
    """The name Locust's page gives an option's field (it camel-cases the template's keys): ``slo_ttft_p99_ms`` ->
    ``sloTtftP99Ms``."""
    head, *rest = dest.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def posted_key(dest: str) -> str:
    """The key Locust's page posts an option's field under: its camelCase name snake-cased again by the page's own
    rule, which splits digits from letters and from each other: ``slo_ttft_p99_ms`` -> ``slo_ttft_p9_9ms``, a key
    /swarm does not know, so the value was silently dropped (every option with a digit: the p99/p95 SLOs,
    --batching-p99-rise)."""
    return re.sub(r"([a-z0-9])([A-Z0-9])", r"\1_\2", camel(dest)).lower()


def restore_posted_keys(form, dests) -> ImmutableMultiDict | None:
    """``form`` with each key :func:`posted_key` mangled put back to its option's dest; None when none was."""
    back = {posted_key(d): d for d in dests if posted_key(d) != d}
    if not any(k in back for k in form.keys()):
        return None
    return ImmutableMultiDict([(back.get(k, k), v) for k, v in form.items(multi=True)])


def layout() -> list[dict]:
    """Every option of the table, in the form's order: field name, group, label, and the shapes that read it
    (None: shown whatever the shape)."""
    readers: dict[str, list[str]] = {}
    for shape in SHAPES.values():
        for dest in shape.fields:
            readers.setdefault(dest, []).append(shape.name)
    order = {g: i for i, g in enumerate(GROUPS)}
    rows = sorted(LAYOUT.items(), key=lambda kv: order[kv[1][0]])  # stable: the table's order within a group
    return [{"name": camel(dest), "group": group, "label": label, "shapes": readers.get(dest)}
            for dest, (group, label) in rows]


SCRIPT = """(function () {
  // Groups the start form's project options (webui/form_layout.py): order, headings, labels, shape fields.
  var L = __LAYOUT__, GROUPS = __GROUPS__, NONE = __NONE__, SECTION = "MuiAccordionDetails-root";
  function item(container, name) {
    var input = container.querySelector('[name="' + name + '"]');
    var el = input;
    while (el && el.parentElement !== container) { el = el.parentElement; }
    return el;
  }
  function relabel(el, f) {
    var title = el.querySelector(".MuiFormControlLabel-label") || el.querySelector("label");
    if (!title || title.dataset.llmLabel) { return; }
    var m = title.textContent.match(/^[^(]*\\(([\\s\\S]*)\\)$/);
    title.textContent = f.label;
    title.dataset.llmLabel = "1";
    var legend = el.querySelector("legend span");
    if (legend) { legend.textContent = f.label; }
    var p = document.createElement("p");
    p.className = "llm-help";
    p.textContent = m ? m[1] : "";
    p.style.cssText = "margin:4px 14px 0;font-size:12px;opacity:0.7;flex-basis:100%";
    if (el.classList.contains("MuiFormControlLabel-root")) { el.style.flexWrap = "wrap"; }  // a checkbox's row
    el.appendChild(p);
  }
  function showShapeFields(container) {
    var select = container.querySelector('[name="shape"]');
    var shape = select ? select.value : NONE;
    L.forEach(function (f) {
      if (!f.shapes) { return; }
      var el = item(container, f.name);
      if (el) { el.style.display = f.shapes.indexOf(shape) >= 0 ? "" : "none"; }
    });
  }
  function sync() {
    var first = document.querySelector('[name="' + L[0].name + '"]');
    if (!first) { return; }
    var container = first;
    var inSection = function (el) { return el.parentElement && el.parentElement.classList.contains(SECTION); };
    while (container && !inSection(container)) {
      container = container.parentElement;
    }
    if (!container) { return; }
    if (container.dataset.llmGrouped !== "1") {
      container.dataset.llmGrouped = "1";
      var known = {}, seen = {}, n = 0;
      L.forEach(function (f) { known[f.name] = f; });
      Object.keys(GROUPS).forEach(function (g, gi) {
        var h = document.createElement("h3");
        h.dataset.llmGroup = g;
        h.textContent = GROUPS[g];
        h.style.cssText = "order:" + (gi * 1000) + ";margin:12px 0 -8px;font-size:16px;font-weight:600";
        container.appendChild(h);
      });
      var groupIndex = {};
      Object.keys(GROUPS).forEach(function (g, gi) { groupIndex[g] = gi; });
      L.forEach(function (f) {
        var el = item(container, f.name);
        if (!el) { return; }
        n += 1;
        el.style.order = String(groupIndex[f.group] * 1000 + n);
        el.dataset.llmField = f.group;
        seen[f.group] = true;
        relabel(el, f);
      });
      Array.prototype.forEach.call(container.children, function (el) {
        if (!el.dataset.llmField && !el.dataset.llmGroup) {
          el.style.order = String(groupIndex.other * 1000 + 1);
          el.dataset.llmField = "other";
          seen.other = true;
        }
      });
      Array.prototype.forEach.call(container.querySelectorAll("h3[data-llm-group]"), function (h) {
        if (!seen[h.dataset.llmGroup]) { h.style.display = "none"; }
      });
      var select = container.querySelector('[name="shape"]');
      if (select) { select.addEventListener("change", function () { showShapeFields(container); }); }
    }
    showShapeFields(container);
  }
  setInterval(sync, 300);
})();
"""


def script() -> str:
    return (SCRIPT.replace("__LAYOUT__", json.dumps(layout())).replace("__GROUPS__", json.dumps(GROUPS))
            .replace("__NONE__", json.dumps(NONE)))


def _add_script(response: Response) -> Response:
    """Load the script into Locust's own page (its index.html)."""
    if request.endpoint != INDEX_ENDPOINT or response.status_code != 200 or response.mimetype != "text/html":
        return response
    html = response.get_data(as_text=True)
    tag = f'<script src=".{ROUTE}"></script>'
    if tag not in html and "</body>" in html:
        response.set_data(html.replace("</body>", f"{tag}</body>", 1))
    return response


def install(environment) -> None:
    """``/llm/form.js`` and its tag in Locust's page, and the start form's option names put right before any other
    hook reads the form (call it first), on this process's web UI (none: nothing)."""
    web_ui = getattr(environment, "web_ui", None)
    if web_ui is None:
        return

    def restore_option_names() -> None:
        if request.method == "POST" and request.path.rstrip("/").endswith("/swarm") and environment.parsed_options:
            fixed = restore_posted_keys(request.form, vars(environment.parsed_options))
            if fixed is not None:
                request.form = fixed

    web_ui.app.before_request(restore_option_names)
    bp = Blueprint("llm_form", __name__)
    body = script()
    bp.add_url_rule(ROUTE, "script", lambda: Response(body, mimetype="text/javascript"))
    web_ui.app.register_blueprint(bp)
    web_ui.app.after_request(_add_script)
