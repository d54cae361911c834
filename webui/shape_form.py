"""Choosing a sweep in Locust's web UI: the ``--shape`` drop-down of the start form.

Locust's ``/swarm`` handler starts a shape run only if ``environment.shape_class`` is already set when it
looks, and it copies the form's custom fields into ``parsed_options`` as strings. A ``before_request``
hook therefore reads the form first: it checks every option's value (webui/option_form.py) and the sweep
settings (answering the form with the error message instead of starting) and installs or removes the sweep
shape. With ``--class-picker`` Locust's own shape picker decides instead (it lists the three sweeps too).

    ShapeFormHook(environment, web_ui, lambda name: set_shape(environment, name)).register()
    # or install(environment): the same, on the master or a local run with a web UI
"""

from __future__ import annotations

import argparse
import logging

from flask import jsonify, request
from locust.runners import WorkerRunner

from shapes.plan import PlanError
from shapes.plugin import set_shape
from shapes.registry import NONE, SHAPES, shape_names
from webui.option_form import refusal

logger = logging.getLogger(__name__)

_FORM_TO_OPTION = {"user_count": "num_users", "spawn_rate": "spawn_rate"}


def form_options(parsed_options, form, fields: tuple[str, ...] | None = None) -> argparse.Namespace:
    """A copy of ``parsed_options`` with the values typed in the start form.

    ``fields``: the options to take from the form (a shape's ``fields``); None: every option the form has.
    """
    values = dict(vars(parsed_options)) if parsed_options is not None else {}
    for key in form.keys():
        name = _FORM_TO_OPTION.get(key, key)
        if fields is not None and name not in fields:
            continue
        if name in values or key in _FORM_TO_OPTION or fields is not None:
            values[name] = form.get(key)
    return argparse.Namespace(**values)


class ShapeFormHook:
    def __init__(self, environment, web_ui, install_shape) -> None:
        self.environment = environment
        self.web_ui = web_ui
        self.install_shape = install_shape
        """install_shape(name or None) sets or clears environment.shape_class."""

    def register(self) -> ShapeFormHook:
        self.web_ui.app.before_request(self.before_request)
        return self

    def before_request(self):
        if request.method != "POST" or not request.path.rstrip("/").endswith("/swarm"):
            return None
        if (bad := refusal(request.form)) is not None:  # every option's own type, before Locust copies it
            return self._refuse(bad)
        if self.web_ui.userclass_picker_is_active or "shape" not in request.form:
            return None
        name = request.form.get("shape") or NONE
        if name != NONE:
            shape = SHAPES.get(name)
            if shape is None:
                return self._refuse(f"--shape: {name!r} is not one of {', '.join(shape_names())}")
            try:
                steps = shape.plan(form_options(self.environment.parsed_options, request.form, shape.fields))
            except PlanError as e:
                return self._refuse(str(e))
            logger.info("web UI: --shape %s with %d stages", name, len(steps))
        self.install_shape(None if name == NONE else name)
        return None

    def _refuse(self, message: str):
        logger.error("web UI start refused: %s", message)
        return jsonify({"success": False, "message": message, "host": self.environment.host})


def install(environment) -> ShapeFormHook | None:
    """Check the start form's ``--shape`` choice on this process's web UI (none on a worker)."""
    web_ui = getattr(environment, "web_ui", None)
    if web_ui is None or isinstance(environment.runner, WorkerRunner):
        return None
    return ShapeFormHook(environment, web_ui, lambda name: set_shape(environment, name)).register()
