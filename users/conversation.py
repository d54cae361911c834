"""Multi-turn conversations (``--turns``, ``--think-time``): one per chat user, :class:`Conversation`.

A conversation has a turn count drawn from ``--turns``. Each turn sends the whole history — the shared system
prompt of the user's prefix group (``--shared-prefix-len``), every earlier user message and every earlier
answer — plus a new user message of ``--input-len`` tokens; the user waits ``--think-time`` between turns.
A conversation ends after its last turn, before a turn whose prompt plus ``max_tokens`` would pass
``--max-model-len``, or after a failed turn (its answer is unknown); the next request starts a new one.

The answer's text is needed for the next turn, so a conversation reads its streams with
:class:`TranscriptAnswer`, whose tally also keeps the ``content`` of every chunk. Only users with ``--turns``
pay for that (a second JSON parse per event); the others keep the plain tally.

Client prompt count of turn k+1 (DeepSeek's chat template, ``workload.tokenizers.render_chat``): the history
``BOS [system] USER u1 ASSISTANT`` of turn k is followed by ``a1 EOS USER u2 ASSISTANT``, i.e. turn k's count
+ the answer's tokens + the new message's count (which includes BOS, USER and ASSISTANT: EOS takes BOS's place).
That rule holds for the DeepSeek template alone; with a tokenizer's own template
(``workload.tokenizers.chat_renderer``: V2's ``User: …``, Qwen's ``<|im_end|>``, R1's ``<think>`` generation prompt
and stripped thinking) a later turn is counted by rendering the whole history and encoding it, as vLLM does.

Replaying a dataset (``--dataset``), a conversation is a record's: its system message and user turns in order,
the history carrying the dataset's own answers (``--history dataset``, the prompt lengths reproducible) or the
model's streamed ones (``--history live``); each turn's ``max_tokens`` is its answer's length
(:meth:`RunSettings.dialog_max_tokens`), the wait before it the record's ``delay`` or ``--think-time``, and its
count the tokenizer's chat template rendered over the whole history (:meth:`RunSettings.count_messages`).

    conv = Conversation(settings, group=settings.next_group())
    inp = conv.draw(adapter, stage)      # RequestInput with meta.turn = 1, 2, ...
    ... exchange(..., Call(answer=conv.answer, meta=inp.meta)) ...
    pause = conv.after(result)           # seconds to think before the next turn (0 when a new one starts)
"""

from __future__ import annotations

from shapes.stage import Stage
from users.adapters.openai import OpenAIAnswer
from users.request import RequestInput, request_input
from users.settings import RunSettings
from users.tally import StreamTally
from workload.datasets import Dialog
from workload.prompts import Prompt
from workload.tokenizers import chat_renderer, render_chat


class TranscriptTally(StreamTally):
    """A :class:`StreamTally` that also keeps the answer text (the chunks' ``content`` / ``text``)."""

    __slots__ = ("answer",)

    def __init__(self, prompt_tokens_client: int = 0) -> None:
        super().__init__(prompt_tokens_client)
        self.answer: list[str] = []
        self.kept = self.answer  # the tally appends each chunk's answer text, decoded or scanned


class TranscriptAnswer(OpenAIAnswer):
    """The OpenAI answer shape, remembering the tally of the last request (one instance per conversation)."""

    def __init__(self) -> None:
        self.last: TranscriptTally | None = None

    def tally(self, prompt_tokens_client: int = 0) -> TranscriptTally:  # type: ignore[override]
        self.last = TranscriptTally(prompt_tokens_client)
        return self.last


class Conversation:
    """One user's conversation state."""

    def __init__(self, settings: RunSettings, group: int = 0) -> None:
        self.settings = settings
        self.group = group
        self.answer = TranscriptAnswer()
        self.messages: list[dict] = []
        self.turn = 0
        """Turns sent in the current conversation (0: none yet / the next request starts a new one)."""
        self.turns = 0
        """Turns the current conversation has."""
        self.tokens = 0
        """Client prompt count of the last turn sent."""
        self.answer_tokens = 0
        """Tokens of the last answer (client tokenizer)."""
        self.dialog: Dialog | None = None
        """The dataset record being replayed (``--dataset``)."""

    def draw(self, adapter, stage: Stage) -> RequestInput:
        """The next turn's input (a new conversation's first turn when the last one ended)."""
        s = self.settings
        if s.dataset is not None:
            return self._draw_dialog(stage)
        max_tokens = s.max_tokens()
        p = s.prompt(True, stage.input_len)
        going_on = 0 < self.turn < self.turns
        tokens = self._count_next(p) if going_on else 0
        if not going_on or (s.max_model_len and tokens + max_tokens > s.max_model_len):
            self.turns = max(1, int(s.turns.sample(s.rng))) if s.turns is not None else 1
            self.turn = 0
            system = s.system_prompt(self.group)
            self.messages = [{"role": "system", "content": system}] if system else []
            tokens = p.tokens + (s.system_tokens(True) if system else 0)
        self.messages.append({"role": "user", "content": p.text})
        self.turn += 1
        self.tokens = tokens
        model_input = list(self.messages)
        picked = s.route(model_input)
        return request_input((p.text,), tokens, max_tokens, s.sampling(max_tokens), stage, model_input, picked,
                             turn=self.turn)

    def _start_dialog(self) -> None:
        d = self.dialog = self.settings.next_dialog()
        self.turn, self.turns = 0, len(d.turns)
        self.messages = [{"role": "system", "content": d.system}] if d.system else []

    def _draw_dialog(self, stage: Stage) -> RequestInput:
        """The next user turn of the record being replayed (the next record's first when it is over). A turn whose
        prompt plus max_tokens would pass ``--max-model-len`` ends the record; the next one starts."""
        s = self.settings
        if self.dialog is None or self.turn >= self.turns:
            self._start_dialog()
        for _ in range(2):
            assert self.dialog is not None
            t = self.dialog.turns[self.turn]
            max_tokens = s.dialog_max_tokens(t)
            messages = [*self.messages, {"role": "user", "content": t.text}]
            tokens = s.count_messages(messages)
            if self.turn == 0 or not s.max_model_len or tokens + max_tokens <= s.max_model_len:
                break
            self._start_dialog()
        self.messages = messages
        self.turn += 1
        self.tokens = tokens
        model_input = list(messages)
        picked = s.route(model_input)
        return request_input((t.text,), tokens, max_tokens, s.sampling(max_tokens), stage, model_input, picked,
                             turn=self.turn)

    def _count_next(self, p: Prompt) -> int:
        """The client count of the next turn: by the DeepSeek rule above, or rendered with the tokenizer's own
        chat template and encoded (the whole history: exact whatever the template does around the turns)."""
        s = self.settings
        render = chat_renderer(s.tokenizer_name)
        if render is render_chat:
            return self.tokens + self.answer_tokens + p.tokens
        rendered = render([*self.messages, {"role": "user", "content": p.text}])
        return len(s.tokenizer.encode(rendered, add_special_tokens=False).ids)

    def after(self, ok: bool) -> float:
        """Take the answer of the turn just sent into the history; the seconds to wait before the next turn
        (0 when the conversation is over: the next request starts a new one)."""
        tally = self.answer.last
        self.answer.last = None
        if not ok or tally is None:
            self.turn = 0
            self.dialog = None
            return 0.0
        text = "".join(tally.answer)
        d = self.dialog
        if d is not None and not self.settings.history_live and d.turns[self.turn - 1].answer is not None:
            text = d.turns[self.turn - 1].answer  # the dataset's own answer: reproducible prompt lengths
        self.messages.append({"role": "assistant", "content": text})
        self.answer_tokens = self.settings.count_text(text) if text else 0
        if self.turn >= self.turns:
            self.turn = 0
            self.dialog = None
            return 0.0
        delay = d.turns[self.turn].delay_s if d is not None else None
        return delay if delay is not None else self.settings.think_time.sample(self.settings.rng)
