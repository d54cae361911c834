"""Gray routing, the bottom layer's part: what every layer and the side tools share.

- :mod:`workload.routing.table`: the request fingerprint and its bucket, ``--route-table`` (versions -> URLs and
  bucket ranges), ``--route-tokenizers``' grammar, the X-Tokenizer-* / X-Compat-Level headers and the fallback
  message's names;
- :mod:`workload.routing.compat`: the measured compat level of a tokenizer upgrade (X-Compat-Level, and what
  ``tokenizer_checks diff`` reports);
- :mod:`workload.routing.fallback`: ``--route-fallback``'s grammar (a rule and its conditions).

The users' part (the routing options, each version's tokenizer, applying a fallback) is :mod:`users.routing`;
the master's (judging a fallback rule, the summary's ``versions`` and ``route_fallback``) is
:mod:`telemetry.control.routing`.
"""
