"""``chat``: streamed ``/v1/chat/completions`` with one user message."""

from __future__ import annotations

from users.adapters.base import Adapter
from users.adapters.openai import OPENAI, STREAM_OPTIONS
from users.request import RequestInput


class ChatAdapter(Adapter):
    name = "chat"
    path = "/v1/chat/completions"
    chat = True
    answer = OPENAI

    def model_input(self, texts: tuple[str, ...]) -> list[dict]:
        return [{"role": "user", "content": texts[0]}]

    def body(self, inp: RequestInput) -> dict:
        return {"messages": inp.model_input, "stream": True, "stream_options": STREAM_OPTIONS, **inp.sampling}
