"""STUB — replaced by the shapes work: add_arguments(parser) registers this package's Locust options."""


def add_arguments(parser) -> None:
    return None
