"""STUB — replaced by the tokenizer_checks work: add_arguments(parser) registers this package's Locust options."""


def add_arguments(parser) -> None:
    return None
