"""Locust users for OpenAI-compatible LLM servers (STUB — replaced by the users work)."""
from locust import User

class StreamingChatUser(User):
    abstract = True

class StreamingCompletionUser(User):
    abstract = True

class BatchCompletionUser(User):
    abstract = True
