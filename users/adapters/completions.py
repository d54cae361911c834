"""``completions``: streamed ``/v1/completions`` with one raw prompt; ``completions-batch``: one
non-streaming ``/v1/completions`` request carrying ``--batch-size`` prompts."""

from __future__ import annotations

from users.adapters.base import Adapter
from users.adapters.openai import OPENAI, STREAM_OPTIONS
from users.request import RequestInput


class CompletionsAdapter(Adapter):
    name = "completions"
    path = "/v1/completions"
    answer = OPENAI

    def model_input(self, texts: tuple[str, ...]) -> str:
        return texts[0]

    def body(self, inp: RequestInput) -> dict:
        return {"prompt": inp.model_input, "stream": True, "stream_options": STREAM_OPTIONS, **inp.sampling}


class BatchCompletionsAdapter(Adapter):
    name = "completions-batch"
    path = "/v1/completions"
    stream = False
    batched = True
    answer = OPENAI

    def model_input(self, texts: tuple[str, ...]) -> list[str]:
        return list(texts)

    def body(self, inp: RequestInput) -> dict:
        return {"prompt": inp.model_input, "stream": False, **inp.sampling}
