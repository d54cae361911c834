"""The users and their own plugin only (no telemetry, shapes or routing): ``bench.client_cost --users-only``
separates the users' cost from what the other packages' listeners add per request."""

from locust import events

from users import StreamingChatUser  # noqa: F401
from users.options import add_arguments
from users.plugin import install


@events.init_command_line_parser.add_listener
def _options(parser, **_kw):
    add_arguments(parser)


@events.init.add_listener
def _install(environment, **_kw):
    install(environment)
