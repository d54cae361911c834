"""Locust users for OpenAI-compatible LLM servers, timed per token on the client.

    from users import StreamingChatUser, StreamingCompletionUser, BatchCompletionUser

See :mod:`users.base` for the users, :mod:`users.adapters` for the endpoints they name (one adapter each:
path, body, how the answer is read), :mod:`users.request` for the input drawn once per request,
:mod:`users.client` for the request/timing path, :mod:`users.sse` for the SSE framer and
:mod:`users.tally` for how chunks are classified.
"""

from users.base import BatchCompletionUser, LLMUser, StreamingChatUser, StreamingCompletionUser

__all__ = ["LLMUser", "StreamingChatUser", "StreamingCompletionUser", "BatchCompletionUser"]
