"""Per-process request settings, built from the parsed options at ``test_start``: ``environment.llm.settings``.

Holds what every LLM user of this process shares: the seeded Generator (``--seed`` + worker index),
the length distributions, the tokenizer, the prompt sources (one for chat, one for completions), the
model name and the request headers. Users draw from it; nothing here does I/O.

    s = RunSettings.from_options(environment.parsed_options, worker_index=0)
    s.prompt(chat=True, spec=None)   # Prompt(text, tokens) of a length drawn from --input-len
    s.max_tokens()                   # a draw from --output-len
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
from tokenizers import Tokenizer

from users.options import (
    BATCH_SIZE_DEFAULT,
    DATASET_SAMPLE_DEFAULT,
    HISTORY_DEFAULT,
    IGNORE_EOS_DEFAULT,
    INPUT_LEN_DEFAULT,
    MAX_MODEL_LEN_DEFAULT,
    OUTPUT_LEN_DEFAULT,
    PREFIX_GROUPS_DEFAULT,
    REQUEST_TIMEOUT_DEFAULT,
    RESOLVED_SALT,
    SEED_DEFAULT,
    SHARED_PREFIX_LEN_DEFAULT,
    SYNTHETIC_TEXT_DEFAULT,
    THINK_TIME_DEFAULT,
    TOKENIZER_DEFAULT,
    TURNS_DEFAULT,
    ThinkTime,
    dataset_from,
    sampling_fields,
)
from users.routing import VersionTokenizer, route_table_from, route_tokenizers_from
from users.tracing import RequestIds
from workload.datasets import Dataset, Dialog, DialogTurn, Selection, load_prompt_file, parse_length_range, select
from workload.lengths import LengthDist, parse_spec
from workload.prompts import FilePrompts, Prompt, SyntheticPrompts
from workload.routing.table import RouteTable, metadata_headers
from workload.tokenizers import AUTO, DEFAULT_TOKENIZER, chat_renderer, load_tokenizer
from workload.trace import BlockPrompts, TraceRecord


def api_key_of(options: object) -> str | None:
    """The bearer token: --api-key (or $LOCUST_API_KEY), else --api-key-file's key, else $OPENAI_API_KEY."""
    return (getattr(options, "api_key", None) or getattr(options, "api_key_file", None)
            or os.environ.get("OPENAI_API_KEY") or None)


@dataclass
class RunSettings:
    rng: np.random.Generator
    input_len: LengthDist
    output_len: LengthDist
    tokenizer: Tokenizer
    tokenizer_name: str = DEFAULT_TOKENIZER
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    ignore_eos: bool = IGNORE_EOS_DEFAULT
    batch_size: int = BATCH_SIZE_DEFAULT
    request_timeout: float = REQUEST_TIMEOUT_DEFAULT
    prompt_texts: list[str] | None = None
    align_prompts: bool = False
    opens_thinking: bool = False
    """The served model's chat template opens ``<think>`` in the prompt (R1): chat replies start as reasoning."""
    route_table: RouteTable | None = None
    route_tokenizers: dict[str, str] = field(default_factory=dict)
    """``--route-tokenizers`` as given (version -> name, path or auto)."""
    versions: dict[str, VersionTokenizer] = field(default_factory=dict)
    """Each route version's tokenizer, resolved at test start (users/routing.py); empty: every version counts
    with ``tokenizer``."""
    request_ids: RequestIds = field(default_factory=RequestIds)
    """This process's X-Request-Id / traceparent source (:mod:`users.tracing`), shared by its users."""
    shared_prefix_len: int = SHARED_PREFIX_LEN_DEFAULT
    prefix_groups: int = PREFIX_GROUPS_DEFAULT
    turns: LengthDist | None = None
    """Turns per conversation (``--turns``); None: every request stands alone."""
    think_time: ThinkTime = field(default_factory=lambda: ThinkTime.parse(THINK_TIME_DEFAULT))
    max_model_len: int = MAX_MODEL_LEN_DEFAULT
    seed: int = SEED_DEFAULT
    worker_index: int = 0
    synthetic_text: str = SYNTHETIC_TEXT_DEFAULT
    """``--synthetic-text``: natural text or pool words for synthetic prompts (shared prefixes and trace blocks
    stay pool words)."""
    dataset: Dataset | None = None
    """``--dataset``: conversations to replay (chat users) or first turns to send (completions users)."""
    history_live: bool = HISTORY_DEFAULT == "live"
    """``--history live``: a replayed conversation's history carries the model's answers, not the dataset's."""
    dataset_lengths: bool = True
    """A replayed turn's max_tokens is its dataset answer's token count (False: ``--output-len`` was changed from
    its default and overrides)."""
    dataset_sample: int = DATASET_SAMPLE_DEFAULT
    dataset_shuffle: bool = False
    dataset_input_len: tuple[int, int | None] | None = None
    dataset_output_len: tuple[int, int | None] | None = None
    extra: dict = field(default_factory=dict)
    """What --temperature, --top-p and --extra-body add to every body (:func:`users.options.sampling_fields`)."""
    workers: int = 1
    """Processes sharing the dataset (a worker: the master's --expect-workers); each replays a disjoint share."""
    _selection: Selection | None = field(default=None, repr=False)
    _next_dialog: int = field(default=0, repr=False)
    salt: int | None = None
    """The run's prompt salt (``--prompt-salt``, resolved once on the master): it enters every text's draw — the
    words, the shared system prompt, a trace's blocks — never the lengths or any other draw. None: the texts
    ``--seed`` alone draws."""
    text_rng: np.random.Generator | None = field(default=None, repr=False)
    """Draws the words of the prompts; ``rng`` itself when there is no salt (the texts of ``--seed`` alone)."""
    _users: int = field(default=0, repr=False)
    _prefixes: dict[int, str] = field(default_factory=dict, repr=False)
    _sources: dict[tuple[str, bool], SyntheticPrompts | FilePrompts] = field(default_factory=dict, repr=False)
    _prefix_texts: dict[tuple[str, int], str] = field(default_factory=dict, repr=False)
    _specs: dict[str, LengthDist] = field(default_factory=dict, repr=False)
    _blocks: dict[bool, BlockPrompts] = field(default_factory=dict, repr=False)

    @classmethod
    def from_options(cls, opts: object, worker_index: int = 0, workers: int = 1) -> RunSettings:
        """Build from Locust's parsed options (values are strings/numbers; specs are parsed here); ``workers``:
        the processes sharing a dataset (a worker passes the master's ``--expect-workers``)."""

        def get(name: str, default: object) -> object:
            value = getattr(opts, name, None)
            return default if value is None else value

        prompt_file = get("prompt_file", "")
        dataset = dataset_from(opts)
        prompt_texts = load_prompt_file(prompt_file) if prompt_file else None
        return cls(
            rng=np.random.default_rng(int(get("seed", SEED_DEFAULT)) + int(worker_index)),
            input_len=parse_spec(str(get("input_len", INPUT_LEN_DEFAULT))),
            output_len=parse_spec(str(get("output_len", OUTPUT_LEN_DEFAULT))),
            tokenizer=load_tokenizer(_first_guess(str(get("tokenizer", TOKENIZER_DEFAULT)))),
            tokenizer_name=_first_guess(str(get("tokenizer", TOKENIZER_DEFAULT))),
            model=get("model", None) or None,  # type: ignore[arg-type]
            api_key=api_key_of(opts),
            ignore_eos=bool(get("ignore_eos", IGNORE_EOS_DEFAULT)),
            batch_size=int(get("batch_size", BATCH_SIZE_DEFAULT)),
            request_timeout=float(get("request_timeout", REQUEST_TIMEOUT_DEFAULT)),
            prompt_texts=prompt_texts,
            align_prompts=bool(get("align_prompts", False)),
            route_table=route_table_from(opts),
            route_tokenizers=route_tokenizers_from(opts),
            request_ids=RequestIds(int(worker_index)),
            shared_prefix_len=int(get("shared_prefix_len", SHARED_PREFIX_LEN_DEFAULT)),
            prefix_groups=int(get("prefix_groups", PREFIX_GROUPS_DEFAULT)),
            turns=parse_spec(str(turns)) if (turns := get("turns", TURNS_DEFAULT)) else None,
            think_time=ThinkTime.parse(str(get("think_time", THINK_TIME_DEFAULT))),
            max_model_len=int(get("max_model_len", MAX_MODEL_LEN_DEFAULT)),
            seed=int(get("seed", SEED_DEFAULT)),
            worker_index=int(worker_index),
            synthetic_text=str(get("synthetic_text", SYNTHETIC_TEXT_DEFAULT)),
            dataset=dataset,
            history_live=str(get("history", HISTORY_DEFAULT)) == "live",
            dataset_lengths=str(get("output_len", OUTPUT_LEN_DEFAULT)) == OUTPUT_LEN_DEFAULT,
            dataset_sample=int(get("dataset_sample", DATASET_SAMPLE_DEFAULT)),
            dataset_shuffle=bool(get("dataset_shuffle", False)),
            extra=sampling_fields(opts),
            dataset_input_len=parse_length_range(str(get("dataset_input_len", ""))),
            dataset_output_len=parse_length_range(str(get("dataset_output_len", ""))),
            workers=max(1, int(workers)),
            salt=None if (salt := get(RESOLVED_SALT, None)) is None else int(salt),  # type: ignore[call-overload]
        )

    def __post_init__(self) -> None:
        if self.text_rng is None:
            self.text_rng = self.rng if self.salt is None else np.random.default_rng(self._salted(self.worker_index))

    def _salted(self, *keys: int) -> list[int]:
        """The entropy of a text draw: ``--seed``, the draw's own keys, then the run's salt when it has one."""
        return [self.seed, *keys, *(() if self.salt is None else (self.salt,))]

    def next_group(self) -> int:
        """The prefix group of the next user started in this process: users are spread over the groups in
        turn (a worker starts at its index, so the groups stay even across workers)."""
        g = (self.worker_index + self._users) % max(self.prefix_groups, 1)
        self._users += 1
        return g

    def system_prompt(self, group: int, tokenizer: str | None = None) -> str:
        """Shared system prompt of a group: ``--shared-prefix-len`` tokens, the same text in every process
        (drawn from ``--seed`` and the group alone); "" without ``--shared-prefix-len``. ``tokenizer``: a route
        version's (its words), default the process's."""
        if self.shared_prefix_len <= 0:
            return ""
        if tokenizer is not None and tokenizer != self.tokenizer_name:
            key = (tokenizer, group)
            if key not in self._prefix_texts:
                words = SyntheticPrompts(load_tokenizer(tokenizer), chat=False)
                self._prefix_texts[key] = words.words(np.random.default_rng(self._salted(0x5E7F1C, group)),
                                                      self.shared_prefix_len)
            return self._prefix_texts[key]
        text = self._prefixes.get(group)
        if text is None:
            words = SyntheticPrompts(self.tokenizer, chat=False)
            rng = np.random.default_rng(self._salted(0x5E7F1C, group))
            text = self._prefixes[group] = words.words(rng, self.shared_prefix_len)
        return text

    def system_tokens(self, chat: bool, tokenizer: str | None = None) -> int:
        """What the shared system prompt adds to a prompt's count: its ``--shared-prefix-len`` words, and for chat
        what the tokenizer's chat template puts around a system message (``TokenCounter.system_overhead``)."""
        if self.shared_prefix_len <= 0:
            return 0
        return self.shared_prefix_len + (self.source(True, tokenizer).count.system_overhead if chat else 0)

    def use_tokenizer(self, name: str) -> None:
        """Count with another tokenizer (``auto`` resolved at test start): prompt sources are rebuilt."""
        if name != self.tokenizer_name:
            self.tokenizer, self.tokenizer_name = load_tokenizer(name), name
            self._selection = None  # the length filters count with the tokenizer
            self._sources.clear()
            self._prefixes.clear()
            self._blocks.clear()
            self._prefix_texts.clear()

    def source(self, chat: bool, tokenizer: str | None = None) -> SyntheticPrompts | FilePrompts:
        """The prompt source counting with ``tokenizer`` (a route version's), default the process's."""
        name = tokenizer or self.tokenizer_name
        src = self._sources.get((name, chat))
        if src is None:
            tok = self.tokenizer if name == self.tokenizer_name else load_tokenizer(name)
            render = chat_renderer(name) if chat else None  # the tokenizer's own chat template, as vLLM renders
            if self.prompt_texts is not None:
                src = FilePrompts(self.prompt_texts, tok, chat, render)
            elif self.dataset is not None:  # completions users: the selected records' first user turns
                src = FilePrompts([d.turns[0].text for d in self.selection().dialogs], tok, chat, render)
            else:
                src = SyntheticPrompts(tok, chat, render=render, text=self.synthetic_text)
            self._sources[(name, chat)] = src
        return src

    def length_dist(self, spec: str | None) -> LengthDist:
        """The stage's input SPEC when it has one, else ``--input-len``."""
        if not spec:
            return self.input_len
        dist = self._specs.get(spec)
        if dist is None:
            dist = self._specs[spec] = parse_spec(spec)
        return dist

    def prompt(self, chat: bool, spec: str | None = None, tokenizer: str | None = None) -> Prompt:
        """A prompt of a length drawn from ``rng``; synthetic words come from ``text_rng`` (a file's record is a
        draw, from ``rng``)."""
        source, n = self.source(chat, tokenizer), self.length_dist(spec).sample(self.rng)
        return source.build(self.text_rng if isinstance(source, SyntheticPrompts) else self.rng, n)  # type: ignore[arg-type]

    def tokenizer_of(self, version: str | None) -> str:
        """The tokenizer a route version's prompts are cut and counted with."""
        vt = self.versions.get(version) if version is not None else None
        return vt.name if vt is not None else self.tokenizer_name

    def draw_tokenizers(self) -> list[str]:
        """The tokenizers the versions of the current route table run, when they are not all the process's one:
        a request is then drawn with one of them and kept when its fingerprint picks a version that runs it
        (users/request.py); empty: draw with the process's tokenizer."""
        if self.route_table is None or not self.versions:
            return []
        names = list(dict.fromkeys(self.tokenizer_of(v) for v in self.route_table.versions))
        return [] if names == [self.tokenizer_name] else names

    def fall_back(self, from_version: str, to_version: str) -> bool:
        """Move ``from_version``'s buckets to ``to_version`` (a fallback the master decided); False when the table
        has no such versions (or has moved them already)."""
        if self.route_table is None or from_version not in self.route_table.versions:
            return False
        try:
            self.route_table = self.route_table.moved(from_version, to_version)
        except ValueError:
            return False
        return True

    def trace_prompt(self, chat: bool, record: TraceRecord) -> Prompt:
        """The prompt of a trace line (``--trace``): its hash ids' blocks, the same bytes in every process."""
        blocks = self._blocks.get(chat)
        if blocks is None:
            blocks = self._blocks[chat] = BlockPrompts(self.tokenizer, chat, self.seed, salt=self.salt,
                                                       render=chat_renderer(self.tokenizer_name))
        return blocks.build(record, self.text_rng)  # type: ignore[arg-type]

    # --- --dataset: the conversations this process replays -------------------------------------------------

    def count_messages(self, messages: list[dict]) -> int:
        """Prompt tokens of a chat history as vLLM counts them: the tokenizer's chat template over every message,
        encoded without added special tokens."""
        rendered = chat_renderer(self.tokenizer_name)(messages)
        return len(self.tokenizer.encode(rendered, add_special_tokens=False).ids)

    def answer_tokens(self, turn: DialogTurn) -> int | None:
        """The output length a turn's record gives: ``output_tokens`` when it names one, else its answer's
        token count; None when the record has neither."""
        if turn.output_tokens is not None:
            return turn.output_tokens
        if turn.answer is not None:
            return max(1, self.count_text(turn.answer))
        return None

    def dialog_max_tokens(self, turn: DialogTurn) -> int:
        """max_tokens of a replayed turn: the dataset's length, unless ``--output-len`` overrides or none is given."""
        n = self.answer_tokens(turn) if self.dataset_lengths else None
        return n if n is not None else self.max_tokens()

    def measure_dialog(self, d: Dialog) -> tuple[int, int | None]:
        """(longest prompt: the last turn with its whole history and the dataset's answers, longest answer) in
        tokens, for the length filters."""
        messages = [{"role": "system", "content": d.system}] if d.system else []
        for t in d.turns[:-1]:
            messages += [{"role": "user", "content": t.text}, {"role": "assistant", "content": t.answer or ""}]
        messages.append({"role": "user", "content": d.turns[-1].text})
        outs = [n for t in d.turns if (n := self.answer_tokens(t)) is not None]
        return self.count_messages(messages), max(outs) if outs else None

    def selection(self) -> Selection:
        """This process's share of the selected records (filters measured with the current tokenizer)."""
        if self._selection is None:
            assert self.dataset is not None
            self._selection = select(
                self.dataset, seed=self.seed, sample=self.dataset_sample, shuffle=self.dataset_shuffle,
                place=self.worker_index, workers=self.workers, measure=self.measure_dialog,
                input_range=self.dataset_input_len, output_range=self.dataset_output_len,
            )
            self._next_dialog = 0
        return self._selection

    def next_dialog(self) -> Dialog:
        """The next conversation to replay: this process's share in order, from the start again after the last."""
        dialogs = self.selection().dialogs
        d = dialogs[self._next_dialog % len(dialogs)]
        self._next_dialog += 1
        return d

    def dataset_record(self) -> dict | None:
        """The run record's ``dataset``: path, format, records, sha256, and the selection (selected, skipped)."""
        if self.dataset is None:
            return None
        sel = self.selection()
        return {**self.dataset.record(), "selected": sel.selected, "skipped": dict(sorted(sel.skipped.items()))}

    def max_tokens(self) -> int:
        return int(self.output_len.sample(self.rng))

    def count_text(self, text: str) -> int:
        """Output tokens of a text (fallback when the server sends no usage)."""
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def headers(self, stream: bool) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "text/event-stream" if stream else "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def route(self, input_obj: object) -> tuple[str, str, dict[str, str]] | None:
        """With ``--route-table``: (version, base URL, metadata headers) that the request's fingerprint picks."""
        if self.route_table is None:
            return None
        _fp, _bucket, r = self.route_table.route_for(self.model or "", input_obj)
        vt = self.versions.get(r.version)
        headers = vt.headers(r.version) if vt is not None else metadata_headers(r.version, self.tokenizer_name)
        return r.version, r.base_url, headers

    def sampling(self, max_tokens: int) -> dict:
        """The length controls of a request body, then the sampling fields of --temperature, --top-p and
        --extra-body (``extra``: they win)."""
        body: dict = {"max_tokens": max_tokens}
        if self.ignore_eos:
            body["ignore_eos"] = True
            body["min_tokens"] = max_tokens
        if self.model:
            body["model"] = self.model
        if self.extra:
            body.update(self.extra)
        return body


def _first_guess(option: str) -> str:
    """The tokenizer before the served model is known: ``auto`` starts as the fallback."""
    return DEFAULT_TOKENIZER if option == AUTO else option
