"""The self-contained HTML report (``--llm-report PATH``, and ``/llm/report`` in the web UI).

    from telemetry.outputs.report import render
    html = render(summary)      # one page, inline SVG plots, no external resources
"""

from telemetry.outputs.report.render import render

__all__ = ["render"]
