"""Print the project's Locust options as a Markdown table (the README's "Options" section).

    python -m scripts.options_table > /tmp/options.md
"""

from __future__ import annotations

import sys

FIRST_OWN_OPTION = "--model"


def project_options() -> list[tuple[str, str, str, str]]:
    """(flags, default, env var, help) of every option the project registers, in registration order."""
    from locust.argument_parser import get_parser

    import locustfile  # noqa: F401  (registers the init_command_line_parser listener)

    rows, own = [], False
    for action in get_parser()._actions:
        if not action.option_strings:
            continue
        own = own or action.option_strings[0] == FIRST_OWN_OPTION
        if own:
            default = "" if action.default in (None, "") else str(action.default)
            help_text = (action.help or "").replace("%%", "%").replace("|", "\\|").replace("\n", " ")
            rows.append((" / ".join(action.option_strings), default, getattr(action, "env_var", "") or "", help_text))
    return rows


def main() -> int:
    print("| option | default | env | what it does |")
    print("|---|---|---|---|")
    for flags, default, env, help_text in project_options():
        print(f"| `{flags}` | {f'`{default}`' if default else ''} | `{env}` | {help_text} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
