"""deepseek-locust entry point: the plugin (options, telemetry, shapes, report, web UI) and the three user classes.

    locust -f locustfile.py --headless -u 16 -r 16 -t 60s --host http://127.0.0.1:8000

Your own locustfile gets the same with ``import deepseek_locust`` (see that module).
"""

import deepseek_locust  # noqa: F401  (registers the plugin on Locust's events)
from users import BatchCompletionUser, StreamingChatUser, StreamingCompletionUser  # noqa: F401
