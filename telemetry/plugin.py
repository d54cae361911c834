"""STUB — replaced by the telemetry work: install(environment) registers this package's listeners."""


def install(environment) -> None:
    return None
