"""STUB — replaced by the users work: install(environment) registers this package's listeners."""


def install(environment) -> None:
    return None
