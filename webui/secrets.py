"""Secrets in the web UI (``--api-key`` and any option registered ``is_secret=True``): the start page never
carries their values, and the start form's blank secret field keeps the value given at start.

Locust renders a secret option as a password field but still puts its value in the page (the form's default);
here the page gets an empty default instead, and ``/swarm`` drops a secret field left blank so Locust does not
overwrite the start value with "". A value typed in the field still replaces it.

    install(environment)   # on the process that serves the web UI
"""

from __future__ import annotations

from flask import request
from locust.argument_parser import get_parser
from werkzeug.datastructures import ImmutableMultiDict


def secret_options() -> set[str]:
    """The dests of every registered option marked ``is_secret``."""
    return set(get_parser().secret_args_included_in_web_ui)


def _mask(web_ui) -> None:
    for name in secret_options():
        option = (web_ui.template_args.get("extra_options") or {}).get(name)
        if option is not None:
            option["default_value"] = ""


def _masked(web_ui, update):
    def update_template_args() -> None:
        update()
        _mask(web_ui)

    return update_template_args


def _keep_blank_secrets() -> None:
    if request.method != "POST" or not request.path.rstrip("/").endswith("/swarm"):
        return
    secret = secret_options()
    items = list(request.form.items(multi=True))
    kept = [(k, v) for k, v in items if not (k in secret and v == "")]
    if len(kept) != len(items):
        request.form = ImmutableMultiDict(kept)


def install(web_ui) -> None:
    web_ui.update_template_args = _masked(web_ui, web_ui.update_template_args)
    _mask(web_ui)  # Locust filled the page's arguments when it made the web UI
    web_ui.app.before_request(_keep_blank_secrets)
