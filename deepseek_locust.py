"""deepseek-locust as a Locust plugin: importing this module registers the project's options, telemetry, shapes,
routing, report and web UI on Locust's events. Wiring only; the logic lives in the packages.

The project's own ``locustfile.py`` is this import plus the three user classes. Your own locustfile, anywhere on
disk, gets everything with the same one import (the project's ``.venv`` finds this module from any folder; with
another interpreter put the checkout on ``PYTHONPATH``):

    import deepseek_locust  # noqa: F401  (options, telemetry, shapes, report, web UI)
    import users

    class MyChat(users.StreamingChatUser):   # subclass through the module: a class imported by name into your
        weight = 3                           # locustfile would run as a user class of its own

    locust -f my_locustfile.py --headless -u 16 -t 60s --host http://127.0.0.1:8000
"""

from locust import events

from shapes.options import add_arguments as add_shape_options
from shapes.plugin import install as install_shapes
from telemetry.attribution.options import add_arguments as add_attribution_options
from telemetry.attribution.plugin import install as install_attribution
from telemetry.control.client_load import install as install_client_load
from telemetry.control.routing import FALLBACK_METRICS
from telemetry.options import add_arguments as add_telemetry_options
from telemetry.outputs.report.plugin import install as install_report
from telemetry.plugin import install as install_telemetry
from telemetry.traces.options import add_arguments as add_trace_options
from telemetry.traces.plugin import install as install_traces
from users.options import add_arguments as add_user_options
from users.plugin import install as install_users
from users.routing import add_arguments as add_route_options
from webui.plugin import install as install_webui


@events.init_command_line_parser.add_listener
def _add_options(parser, **_kw):
    add_user_options(parser)
    add_route_options(parser, FALLBACK_METRICS)
    add_shape_options(parser)
    add_telemetry_options(parser)
    add_attribution_options(parser)
    add_trace_options(parser)


@events.init.add_listener
def _install(environment, **_kw):
    install_users(environment)
    install_shapes(environment)
    install_telemetry(environment)
    install_client_load(environment)
    install_traces(environment)
    install_attribution(environment)
    install_report(environment)
    install_webui(environment)
