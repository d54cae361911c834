"""Locust's gevent monkey-patching must run before selenium imports urllib3/ssl (else a RecursionError in ssl)."""

import locust  # noqa: F401
