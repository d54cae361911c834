"""The start form's option check: every option the form carries goes through its own argparse ``type`` (and
``choices``) before Locust copies it into ``parsed_options``, so a bad value is refused with the command line's
one-line message (``--input-len: expected fixed:N | ..., got 'foo:1'``) and nothing starts.

Locust's ``/swarm`` copies the form's fields as strings and never calls the options' validators; without this
check ``input_len=foo:1`` started a run that users/plugin.py stopped at once, the reason only in the log.

    message = refusal(request.form)   # None when every value parses
"""

from __future__ import annotations

import argparse

from locust.argument_parser import default_args_dict, get_parser


def _checked_actions() -> dict[str, argparse.Action]:
    """dest -> action of every registered option that is not Locust's own and has a ``type`` or ``choices``
    (the project's options and any a user's locustfile adds; Locust's own form fields are Locust's to check)."""
    locust_own = set(default_args_dict())
    return {
        a.dest: a
        for a in get_parser()._actions
        if a.option_strings and a.dest not in locust_own and (callable(a.type) or a.choices is not None)
        and not getattr(a, "is_secret", False)  # a refusal quotes the value: never a secret's
    }


def _check(action: argparse.Action, text: str) -> str | None:
    flag = action.option_strings[0]
    try:
        value = action.type(text) if callable(action.type) else text
    except (argparse.ArgumentTypeError, ValueError, TypeError) as e:
        detail = str(e) or f"invalid value {text!r}"
        return detail if detail.startswith(f"{flag}: ") else f"{flag}: {detail}"  # some types name their flag
    if action.choices is not None and value not in action.choices:
        return f"{flag}: {text!r} is not one of {', '.join(map(str, action.choices))}"
    return None


def refusal(form) -> str | None:
    """The first invalid option of ``form`` (a Flask form), as ``--flag: <why, with the accepted forms>``; None
    when all parse. An empty field of an option without a default is "not set" and passes."""
    actions = _checked_actions()
    for key in form.keys():
        action = actions.get(key)
        if action is None:
            continue
        for text in form.getlist(key):
            if text == "" and action.default in (None, ""):
                continue
            if action.nargs in ("*", "+") and "," in text:  # Locust splits a multiple field at commas
                bad = next((m for t in text.split(",") if (m := _check(action, t))), None)
            else:
                bad = _check(action, text)
            if bad is not None:
                return bad
    return None
