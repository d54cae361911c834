"""STUB — replaced by the shapes work: install(environment) registers this package's listeners."""


def install(environment) -> None:
    return None
LLMShape = None  # STUB — shapes work defines the real shape class
