"""Real Locust runners in the test's process: the options the shapes package reads, a user that does nothing, and
a wait that lets gevent run."""

from __future__ import annotations

from argparse import Namespace

from locust import User, constant, task
from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments

from shapes.options import add_arguments


class IdleUser(User):
    wait_time = constant(0.05)

    @task
    def nothing(self):
        pass


def runner_options(**kw) -> Namespace:
    """Locust's own defaults plus this package's options (and a --seed, which the users package owns)."""
    parser = get_empty_argument_parser()
    setup_parser_arguments(parser)
    add_arguments(parser)
    ns = parser.parse_args(["--headless", "--arrival", "constant", "--max-concurrency", "8"])
    ns.seed = 5
    vars(ns).update(kw)
    return ns
