"""The end-of-run outputs of the master (or a local run): each is a sink on the summary hooks (``on_summary``,
run/hooks.py), registered when telemetry installs, so they run in this order before the sinks other packages add
(the client-load lines, the attribution lines, the HTML report ...):

1. the SLO gate (:func:`slo_gate`; a capacity search's is its ``capacity`` status): a line per failed check, the
   process exit code (``telemetry.slo.EXIT_CODE``); a line per lost worker;
2. the console table (and the speculative-decoding line, :mod:`telemetry.outputs.speculative`);
3. ``--llm-summary-json PATH``, 4. ``--llm-csv PREFIX``, 5. ``--vllm-bench-json PATH`` (built from the run's
   request log, which the summarizing role owns; the log is removed after it when only the bench file wanted it).

Each reads its option when the summary arrives (the web UI may change options between runs); a failing one is a
log line and the others still run.

    RunOutputs(environment, lambda: role.request_log).register(hooks)
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from run.hooks import SummaryHooks
from telemetry.outputs.requestlog import RequestLog, read_records
from telemetry.outputs.sinks import console_table, write_csv, write_json
from telemetry.outputs.speculative import console_lines
from telemetry.outputs.vllmbench import write_vllm_bench
from telemetry.slo import EXIT_CODE, failure_lines

log = logging.getLogger(__name__)


def slo_gate(summary: dict) -> bool:
    """The end-of-run SLO gate (False: exit code 3), logging why it failed. A capacity search's whole run mixes
    passing and failing probes by design: its gate is whether any probed load met every SLO (``capacity``)."""
    capacity = summary.get("capacity")
    if isinstance(capacity, dict) and "status" in capacity:
        if capacity["status"] == "none":
            log.error(f"CHECK FAILED: {capacity['statement']}")
            return False
        return True
    for line in failure_lines(summary["slo"]["checks"]):
        log.error(line)
    return bool(summary["slo"]["passed"])


class RunOutputs:
    """The gate, console and file sinks of one summarizing process."""

    def __init__(self, environment, request_log: Callable[[], RequestLog | None]) -> None:
        self.environment = environment
        self.request_log = request_log
        """The run's request log (closed by the time the summary arrives), None when none was kept."""

    def register(self, hooks: SummaryHooks) -> RunOutputs:
        for sink in (self.gate, self.console, self.summary_json, self.csv, self.vllm_bench):
            hooks.on_summary(sink)
        return self

    def gate(self, summary: dict) -> None:
        """The SLO verdict (lines and the exit code) and the lost workers."""
        if not slo_gate(summary):
            self.environment.process_exit_code = EXIT_CODE
        for wid in summary["workers_lost"]:
            log.warning(f"WARNING: worker {wid} was lost mid-run; the summary holds only what it reported")

    def console(self, summary: dict) -> None:
        """The table, then the speculative-decoding line and its validity warning (when the server speculated)."""
        print(console_table(summary), flush=True)
        for line in console_lines(summary):
            if line.startswith("WARNING"):
                log.warning(line)
            else:
                print(line, flush=True)

    def summary_json(self, summary: dict) -> None:
        path = getattr(self.environment.parsed_options, "llm_summary_json", None)
        if path:
            write_json(summary, path)

    def csv(self, summary: dict) -> None:
        prefix = getattr(self.environment.parsed_options, "llm_csv", None)
        if prefix:
            write_csv(summary, prefix)

    def vllm_bench(self, summary: dict) -> None:
        options = self.environment.parsed_options
        request_log = self.request_log()
        if not getattr(options, "vllm_bench_json", None) or request_log is None:
            return
        write_vllm_bench(summary, read_records(request_log.path), options, options.vllm_bench_json)
        if not getattr(options, "llm_requests_jsonl", None):
            request_log.path.unlink(missing_ok=True)  # the records were only the bench file's input
