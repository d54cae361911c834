"""Request options of the LLM users (docs/architecture.md "… an option"), each with a validator.

A bad value stops Locust at start with argparse's message, e.g.
``locust: error: argument --input-len: bad length SPEC 'foo:1': ...; expected one of fixed:N, ...``
(exit code 2, no traceback). Validators return the normalized STRING, not a parsed object: values
travel to workers and through the web UI as text and are parsed again in ``test_start``.

    locust -f locustfile.py --input-len zipf:1.2:16:4096 --output-len fixed:256 --no-ignore-eos
"""

from __future__ import annotations

import argparse
import json
import secrets
from pathlib import Path

from workload.argtypes import (
    json_object,
    length_spec,
    non_negative_int,
    number,
    positive_int,
    processes,
    seconds,
    seed,
    usable_cores,
)
from workload.datasets import (
    AUTO_FORMAT,
    FORMATS,
    LENGTH_RANGE_FORM,
    load_dataset,
    load_prompt_file,
    parse_length_range,
)
from workload.prompts import SYNTHETIC_TEXTS
from workload.tokenizers import AUTO, DEFAULT_TOKENIZER, NAMES, TokenizerNotFound, load_tokenizer

INPUT_LEN_DEFAULT = "fixed:512"
"""--input-len: 512 tokens in (a typical chat prompt with context)."""
OUTPUT_LEN_DEFAULT = "fixed:256"
"""--output-len: 256 tokens out (a typical chat reply)."""
IGNORE_EOS_DEFAULT = True
"""--ignore-eos: generate exactly max_tokens."""
BATCH_SIZE_DEFAULT = 8
"""--batch-size: prompts per BatchCompletionUser request."""
REQUEST_TIMEOUT_DEFAULT = 300.0
"""--request-timeout: seconds without a byte before a request fails as 'timeout'."""
SEED_DEFAULT = 0
"""--seed: each worker draws with seed + worker index."""
PROMPT_SALT_DEFAULT = "run"
"""--prompt-salt: a fresh salt each run, so no run's prompt texts repeat an earlier run's."""
PROMPT_SALT_NONE = "none"
"""--prompt-salt none: the texts --seed alone draws, the same in every run (a warm prefix cache, on purpose)."""
RESOLVED_SALT = "llm_prompt_salt"
"""The attribute of the parsed options holding the salt this run uses (an int, or None for ``none``): set on the
master (or local runner) at test start, shipped to the workers with the options, recorded in the run record."""
SHARED_PREFIX_LEN_DEFAULT = 0
"""--shared-prefix-len: no shared system prompt."""
PREFIX_GROUPS_DEFAULT = 1
"""--prefix-groups: one shared system prompt for every user."""
TURNS_DEFAULT = ""
"""--turns: no conversations (every request stands alone)."""
THINK_TIME_DEFAULT = "fixed:0"
"""--think-time: the next turn right after the answer."""
MAX_MODEL_LEN_DEFAULT = 0
"""--max-model-len: no client-side context limit (a conversation ends at its turn count)."""
TOKENIZER_DEFAULT = AUTO
"""--tokenizer: the served model's (workload.tokenizers.choose_tokenizer), DEFAULT_TOKENIZER for an unknown one."""
NUM_REQUESTS_DEFAULT = 0
"""--num-requests: no request budget (the run ends on time or by its shape)."""
MAX_ERRORS_DEFAULT = 0
"""--max-errors: never stop for errors."""
DATASET_FORMAT_DEFAULT = AUTO_FORMAT
"""--dataset-format: detected from the first record."""
HISTORY_CHOICES = ("dataset", "live")
HISTORY_DEFAULT = "dataset"
"""--history: a replayed conversation's history carries the dataset's own answers (reproducible prompt lengths)."""
SYNTHETIC_TEXT_DEFAULT = "natural"
"""--synthetic-text: synthetic prompts are natural text and code (workload/data/natural_text.txt) completed with
pool words to the exact count."""
DATASET_SAMPLE_DEFAULT = 0
"""--dataset-sample: every record."""
TEMPERATURE_DEFAULT = None
"""--temperature: not sent (the server's default: the model's generation config, else 1.0)."""
TOP_P_DEFAULT = None
"""--top-p: not sent (the server's default)."""
EXTRA_BODY_DEFAULT = ""
"""--extra-body: nothing more in the body."""
BODY_OWN_KEYS = ("messages", "prompt", "stream", "stream_options")
"""Body fields the adapters set and --extra-body may not replace (the stream's chunk tally depends on them)."""
temperature = number(least=0.0, at_most=100.0, form="a temperature >= 0 such as 0 or 0.6")
top_p = number(above=0.0, at_most=1.0, form="a top-p in (0, 1] such as 0.95")
extra_body = json_object(BODY_OWN_KEYS)


def prompt_source(options) -> str:
    """Where the run's prompt texts come from: ``dataset``, ``prompt-file``, ``trace`` (its hash-id blocks of pool
    words) or ``synthetic-natural`` / ``synthetic-words`` (--synthetic-text)."""
    for name, source in (("dataset", "dataset"), ("prompt_file", "prompt-file"), ("trace", "trace")):
        if getattr(options, name, None):
            return source
    return f"synthetic-{getattr(options, 'synthetic_text', None) or SYNTHETIC_TEXT_DEFAULT}"


SYNTHETIC_SOURCES = ("synthetic-natural", "synthetic-words", "trace")
"""Prompt sources whose text no user wrote: a speculative decoder's acceptance measured on them is not the
acceptance of real traffic."""


def sampling_fields(options) -> dict:
    """What --temperature, --top-p and --extra-body add to every request body (--extra-body wins on a shared key,
    as ``vllm bench serve --extra-body`` does)."""
    body: dict = {}
    for name in ("temperature", "top_p"):
        if (value := getattr(options, name, None)) is not None and value != "":
            body[name] = float(value)
    if text := getattr(options, "extra_body", None):
        body.update(json.loads(extra_body(str(text))))
    return body


def prompt_salt(value: str) -> str:
    """--prompt-salt: ``run``, ``none`` or a salt (an integer >= 0, e.g. a run record's ``prompt_salt``)."""
    text = str(value).strip().lower()
    if text in (PROMPT_SALT_DEFAULT, PROMPT_SALT_NONE) or (text.isdigit() and int(text) < 2**63):
        return text
    raise argparse.ArgumentTypeError(f"bad --prompt-salt {value!r}; expected {PROMPT_SALT_DEFAULT} (a fresh salt "
                                     f"each run), {PROMPT_SALT_NONE} (the same texts every run) or an integer >= 0")


def resolve_prompt_salt(value: object) -> int | None:
    """The salt a run uses: a fresh random one for ``run``, None for ``none``, else the integer given."""
    text = prompt_salt(str(value if value is not None else PROMPT_SALT_DEFAULT))
    if text == PROMPT_SALT_DEFAULT:
        return secrets.randbits(62)
    return None if text == PROMPT_SALT_NONE else int(text)


def tokenizer_name(value: str) -> str:
    if value == AUTO:
        return value
    try:
        load_tokenizer(value)
    except (TokenizerNotFound, OSError, ValueError) as e:
        raise argparse.ArgumentTypeError(f"{e}; or {AUTO} (the served model's, the default)") from None
    return value


def api_key_file(value: str) -> str | None:
    """argparse ``type``: the key itself, read once at start from the file's first non-empty line (the value
    then travels to the workers as --api-key's does; the path need not exist on their machines)."""
    if not value:
        return None
    try:
        lines = Path(value).expanduser().read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise argparse.ArgumentTypeError(f"cannot read {value!r}: {type(e).__name__}") from None
    key = next((line.strip() for line in lines if line.strip()), None)
    if key is None:
        raise argparse.ArgumentTypeError(f"{value!r} is empty (expected the key on its first line)")
    return key


def prompt_file(value: str) -> str:
    if not value:
        return value
    try:
        load_prompt_file(value)
    except (ValueError, OSError) as e:
        raise argparse.ArgumentTypeError(
            f'{e} (expected a JSONL file of {{"prompt": ...}} or ShareGPT records)'
        ) from None
    return str(Path(value).expanduser())


def dataset_path(value: str) -> str:
    """argparse ``type``: an existing dataset file (its records are checked at start with --dataset-format:
    :func:`check_dataset_options`)."""
    if not value:
        return value
    p = Path(value).expanduser()
    if not p.is_file():
        raise argparse.ArgumentTypeError(f"no such dataset file {value!r}")
    return str(p)


def length_range(text: str) -> str:
    """argparse ``type``: a dataset length filter ``LO:HI`` (tokens); empty = no filter."""
    try:
        parse_length_range(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return str(text or "").strip()


def dataset_from(options):
    """The dataset --dataset names, read with --dataset-format (None without --dataset); ValueError
    ``file:line: why`` on a bad record."""
    path = getattr(options, "dataset", None)
    if not path:
        return None
    return load_dataset(path, str(getattr(options, "dataset_format", None) or DATASET_FORMAT_DEFAULT))


def check_dataset_options(options) -> None:
    """Every record of --dataset read with --dataset-format at start; ValueError naming file:line."""
    if getattr(options, "dataset", None):
        for other, why in (("turns", "the records set the turns"), ("prompt_file", "both are prompt sources")):
            if getattr(options, other, None):
                raise ValueError(f"--dataset and --{other.replace('_', '-')} exclude each other ({why})")
    dataset_from(options)
    for name in ("dataset_input_len", "dataset_output_len"):
        parse_length_range(getattr(options, name, None) or "")


def think_time(text: str) -> str:
    """argparse ``type``: a think-time SPEC in seconds (``fixed:S`` | ``uniform:LO:HI``), normalized."""
    try:
        return str(ThinkTime.parse(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--think-time: {e}") from None


def turns_spec(text: str) -> str:
    """argparse ``type``: a turn-count SPEC (the length SPEC forms, at least 1 turn); empty = off."""
    if not str(text).strip():
        return ""
    return length_spec(text)


class ThinkTime:
    """Seconds a conversation's user waits between turns: ``fixed:S`` or ``uniform:LO:HI`` (S, LO, HI >= 0)."""

    FORM = "fixed:S or uniform:LO:HI, seconds >= 0 (e.g. fixed:2, uniform:1:5)"

    def __init__(self, lo: float, hi: float) -> None:
        self.lo, self.hi = lo, hi

    @classmethod
    def parse(cls, text: str) -> ThinkTime:
        kind, _, rest = str(text).strip().partition(":")
        try:
            values = [float(v) for v in rest.split(":")] if rest else [float(kind)]
        except ValueError:
            raise ValueError(f"bad think-time {text!r}; expected {cls.FORM}") from None
        if rest and kind == "fixed" and len(values) == 1:
            lo = hi = values[0]
        elif rest and kind == "uniform" and len(values) == 2:
            lo, hi = values
        elif not rest and len(values) == 1:
            lo = hi = values[0]
        else:
            raise ValueError(f"bad think-time {text!r}; expected {cls.FORM}")
        if not (0 <= lo <= hi) or hi != hi or hi > 1e6:
            raise ValueError(f"bad think-time {text!r}; expected {cls.FORM}")
        return cls(lo, hi)

    def sample(self, rng) -> float:
        return self.lo if self.hi == self.lo else float(rng.uniform(self.lo, self.hi))

    def __str__(self) -> str:
        return f"fixed:{self.lo:g}" if self.lo == self.hi else f"uniform:{self.lo:g}:{self.hi:g}"


def _processes_auto(parser) -> None:
    """Locust's own ``--processes`` (it forks the workers) also takes ``auto``: one process per usable core."""
    for action in parser._actions:
        if action.dest == "processes":
            action.type = processes
            action.metavar = "<int>|auto"
            action.help = (f"{action.help} 'auto': one per usable core ({usable_cores()} here); -1: one per CPU of "
                           f"the machine (Locust's)")


def add_arguments(parser) -> None:
    _processes_auto(parser)
    add = parser.add_argument
    add(
        "--model",
        default=None,
        env_var="LOCUST_MODEL",
        help="Model name sent in requests (default: first id of GET /v1/models)",
    )
    add(
        "--api-key",
        default=None,
        env_var="LOCUST_API_KEY",
        is_secret=True,
        help="Bearer token for the server (default: $OPENAI_API_KEY); never logged",
    )
    add(
        "--api-key-file",
        type=api_key_file,
        default=None,
        metavar="PATH",
        env_var="LOCUST_API_KEY_FILE",
        is_secret=True,
        include_in_web_ui=False,  # its value is the key itself, read at start
        help="Read the bearer token from the first line of PATH (read at start; --api-key wins); never logged",
    )
    add(
        "--input-len",
        type=length_spec,
        default=INPUT_LEN_DEFAULT,
        env_var="LOCUST_INPUT_LEN",
        help="Prompt length SPEC in tokens: fixed:N | uniform:LO:HI | normal:MEAN:STD[:LO:HI] | "
        "lognormal:MEDIAN:SIGMA[:LO:HI] | zipf:ALPHA:LO:HI | file:PATH",
    )
    add(
        "--output-len",
        type=length_spec,
        default=OUTPUT_LEN_DEFAULT,
        env_var="LOCUST_OUTPUT_LEN",
        help="Output length SPEC (max_tokens per request), same forms as --input-len",
    )
    add(
        "--ignore-eos",
        action=argparse.BooleanOptionalAction,
        default=IGNORE_EOS_DEFAULT,
        env_var="LOCUST_IGNORE_EOS",
        help="Ask the server to ignore EOS and generate exactly max_tokens (min_tokens = max_tokens)",
    )
    add(
        "--tokenizer",
        type=tokenizer_name,
        default=TOKENIZER_DEFAULT,
        env_var="LOCUST_TOKENIZER",
        help=f"Tokenizer for prompts and counts: {AUTO} (default: the served model's, e.g. DeepSeek-V2-Lite -> "
        f"deepseek-v2; {DEFAULT_TOKENIZER} with a warning for an unknown model), a path to tokenizer.json or a "
        f"model folder, a Hugging Face id (loaded by transformers; the hub only without HF_HUB_OFFLINE=1) or one "
        f"of {', '.join(NAMES)}",
    )
    add(
        "--prompt-file",
        type=prompt_file,
        default="",
        env_var="LOCUST_PROMPT_FILE",
        help='JSONL prompts ({"prompt": ...} or ShareGPT conversations) instead of synthetic ones',
    )
    add(
        "--synthetic-text",
        choices=SYNTHETIC_TEXTS,
        default=SYNTHETIC_TEXT_DEFAULT,
        env_var="LOCUST_SYNTHETIC_TEXT",
        help="What synthetic prompts are made of, at the same exact token counts: natural (English and Chinese "
        "prose and code shipped with the project, completed with single-token words) or words (random "
        "single-token words only)",
    )
    add(
        "--dataset",
        type=dataset_path,
        default="",
        env_var="LOCUST_DATASET",
        help="Replay a dataset's conversations (chat users: each user walks a conversation's user turns in order "
        "with the growing history; completions users send the records' first user turns in order): ShareGPT "
        "(JSON array or JSONL), OpenAI messages JSONL, vLLM bench custom JSONL, AIPerf single/multi-turn JSONL. "
        "Each turn's max_tokens is the dataset answer's token count (or the record's output_tokens) unless "
        "--output-len is changed from its default; think time from the record's delay, else --think-time",
    )
    add(
        "--dataset-format",
        choices=(AUTO_FORMAT, *FORMATS),
        default=DATASET_FORMAT_DEFAULT,
        env_var="LOCUST_DATASET_FORMAT",
        help="--dataset's format; auto: detected from the first record",
    )
    add(
        "--history",
        choices=HISTORY_CHOICES,
        default=HISTORY_DEFAULT,
        env_var="LOCUST_HISTORY",
        help="A replayed conversation's history: the dataset's own assistant answers (dataset: reproducible "
        "prompt lengths) or the model's streamed answers (live)",
    )
    add(
        "--dataset-sample",
        type=non_negative_int,
        default=DATASET_SAMPLE_DEFAULT,
        env_var="LOCUST_DATASET_SAMPLE",
        help="Replay N records drawn with --seed (the same N in every worker, each worker a disjoint share); "
        "0 = all",
    )
    add(
        "--dataset-shuffle",
        action="store_true",
        default=False,
        env_var="LOCUST_DATASET_SHUFFLE",
        help="Replay the records in an order shuffled with --seed (default: file order)",
    )
    add(
        "--dataset-input-len",
        type=length_range,
        default="",
        env_var="LOCUST_DATASET_INPUT_LEN",
        help=f"Keep records whose longest prompt (last turn, whole history, chat template) is within "
        f"{LENGTH_RANGE_FORM}, counted with the served model's tokenizer; skipped records are counted",
    )
    add(
        "--dataset-output-len",
        type=length_range,
        default="",
        env_var="LOCUST_DATASET_OUTPUT_LEN",
        help=f"Keep records whose longest answer is within {LENGTH_RANGE_FORM} tokens (records without answers "
        "pass); skipped records are counted",
    )
    add(
        "--temperature",
        type=temperature,
        default=TEMPERATURE_DEFAULT,
        env_var="LOCUST_TEMPERATURE",
        help="Sampling temperature sent in every request (default: not sent, the server's); 0 = greedy. "
        "Speculative decoding's acceptance depends on it",
    )
    add(
        "--top-p",
        type=top_p,
        default=TOP_P_DEFAULT,
        env_var="LOCUST_TOP_P",
        help="Nucleus sampling top_p sent in every request (default: not sent, the server's)",
    )
    add(
        "--extra-body",
        type=extra_body,
        default=EXTRA_BODY_DEFAULT,
        metavar="JSON",
        env_var="LOCUST_EXTRA_BODY",
        help="A JSON object merged into every request body, e.g. '{\"top_k\": 20, \"seed\": 7}' (as vllm bench "
        f"serve --extra-body; it wins over --temperature/--top-p; not {', '.join(BODY_OWN_KEYS)})",
    )
    add(
        "--batch-size",
        type=positive_int,
        default=BATCH_SIZE_DEFAULT,
        env_var="LOCUST_BATCH_SIZE",
        help="Prompts per request for BatchCompletionUser",
    )
    add(
        "--request-timeout",
        type=seconds,
        default=REQUEST_TIMEOUT_DEFAULT,
        env_var="LOCUST_REQUEST_TIMEOUT",
        help="Fail a request (kind 'timeout') when no byte arrives for this many seconds",
    )
    add(
        "--seed",
        type=seed,
        default=SEED_DEFAULT,
        env_var="LOCUST_SEED",
        help="Random seed; each worker uses seed + worker index. It fixes the lengths and the draw; the prompt "
        "texts also take --prompt-salt",
    )
    add(
        "--prompt-salt",
        type=prompt_salt,
        default=PROMPT_SALT_DEFAULT,
        env_var="LOCUST_PROMPT_SALT",
        help=f"What makes the prompt texts this run's own: {PROMPT_SALT_DEFAULT} (default) a fresh random salt, so "
        "a repeat run against the same server finds none of the last run's prompts in its prefix cache; "
        f"{PROMPT_SALT_NONE}: the texts --seed alone draws, the same every run (a warm-cache repeat, on purpose); or "
        "an integer to redo a run's texts (its run record's prompt_salt)",
    )
    add(
        "--align-prompts",
        action="store_true",
        default=False,
        env_var="LOCUST_ALIGN_PROMPTS",
        help="Re-cut synthetic prompts so the server's /tokenize count matches the drawn length",
    )
    add(
        "--shared-prefix-len",
        type=non_negative_int,
        default=SHARED_PREFIX_LEN_DEFAULT,
        env_var="LOCUST_SHARED_PREFIX_LEN",
        help="Start every prompt with a shared system prompt of exactly this many tokens (chat: a system "
        "message; completions: the prompt's head), before the --input-len part; 0 = none",
    )
    add(
        "--prefix-groups",
        type=positive_int,
        default=PREFIX_GROUPS_DEFAULT,
        env_var="LOCUST_PREFIX_GROUPS",
        help="Number of different shared system prompts; users are spread over them in turn",
    )
    add(
        "--turns",
        type=turns_spec,
        default=TURNS_DEFAULT,
        env_var="LOCUST_TURNS",
        help="Multi-turn conversations (chat users): turns per conversation, a length SPEC (fixed:4, "
        "uniform:2:8); each turn sends the whole history, previous answers included, plus a new user "
        "message of --input-len tokens. Default: off",
    )
    add(
        "--think-time",
        type=think_time,
        default=THINK_TIME_DEFAULT,
        env_var="LOCUST_THINK_TIME",
        help=f"Seconds between a conversation's turns: {ThinkTime.FORM}",
    )
    add(
        "--max-model-len",
        type=non_negative_int,
        default=MAX_MODEL_LEN_DEFAULT,
        env_var="LOCUST_MAX_MODEL_LEN",
        help="The server's context window in tokens: a conversation ends before a turn whose prompt plus "
        "max_tokens would pass it; 0 = no limit",
    )
    add(
        "--num-requests",
        type=non_negative_int,
        default=NUM_REQUESTS_DEFAULT,
        env_var="LOCUST_NUM_REQUESTS",
        help="End the run after exactly N LLM requests have been sent and finished, across all workers "
        "(vllm bench's --num-prompts); 0 = no budget",
    )
    add(
        "--max-errors",
        type=non_negative_int,
        default=MAX_ERRORS_DEFAULT,
        env_var="LOCUST_MAX_ERRORS",
        help="Stop the run once N LLM requests have failed (checked every second on the master; the summary's "
        "run.stopped_by says why); 0 = never",
    )
