"""The attribution defaults are defined once: the rules' dataclass defaults, the options' defaults and the
fallbacks for absent options are the same numbers."""

from __future__ import annotations

import argparse

import pytest

from telemetry import options as telemetry_options
from telemetry.attribution import options
from telemetry.attribution.batching import BatchingRule
from telemetry.attribution.section import AttributionConfig
from telemetry.attribution.spikes import SpikeRule


def _parsed() -> argparse.Namespace:
    class Parser(argparse.ArgumentParser):  # Locust's extra keywords, ignored
        def add_argument(self, *a, env_var=None, include_in_web_ui=True, is_secret=False, **kw):
            return super().add_argument(*a, **kw)

    p = Parser()
    options.add_arguments(p)
    telemetry_options.add_arguments(p)
    return p.parse_args([])


def test_rules_options_and_fallbacks_agree() -> None:
    parsed = _parsed()
    assert AttributionConfig.from_options(parsed) == AttributionConfig.from_options(None) == AttributionConfig()
    assert AttributionConfig().window_s == parsed.attribution_window == telemetry_options.ATTRIBUTION_WINDOW_DEFAULT
    assert BatchingRule().p99_rise == parsed.batching_p99_rise == 0.4
    assert BatchingRule().size_ratio == SpikeRule().size_ratio == parsed.batching_size_ratio == 0.35
    assert BatchingRule().consecutive == BatchingRule().baseline_windows == parsed.batching_windows == 3
    assert SpikeRule().factor == parsed.spike_factor == 2.0
    assert (parsed.server_metrics_interval, parsed.prometheus_port) == (2.0, 9646)


def test_bad_rule_values_name_their_form() -> None:
    for rule, bad, form in ((options.rise, "0", "a relative rise > 0"), (options.size_ratio, "1.5", "(0, 1]"),
                            (options.factor, "1", "a factor > 1")):
        with pytest.raises(argparse.ArgumentTypeError) as e:
            rule(bad)
        assert form in str(e.value) and repr(bad) in str(e.value)
