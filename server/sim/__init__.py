"""server.sim — a CPU simulator of a vLLM server serving DeepSeek models (OpenAI-compatible HTTP).

It steps like vLLM V1's scheduler (continuous batching, chunked prefill under a token budget, paged
KV blocks with prefix caching, preemption by recompute), prices every step with a profile's cost
model, streams real token ids, and exports vLLM's Prometheus metrics. Modules:

- :mod:`~server.sim.cli` flags and startup; :mod:`~server.sim.profiles` profile data files;
- :mod:`~server.sim.scheduler` + :mod:`~server.sim.kv` the engine's bookkeeping (pure, no clock);
- :mod:`~server.sim.engine` the timed step loop; :mod:`~server.sim.cost` step times;
- :mod:`~server.sim.api` the HTTP side (on :mod:`server.core`: the HTTP/1.1 server, the SSE renderer, the fault
  vocabulary);
- :mod:`~server.sim.metrics` ``/metrics``; :mod:`~server.sim.faults` fault injection;
- :mod:`~server.sim.textgen` generated text; :mod:`~server.sim.calibrate` fitting profiles (the real-time
  check runs the project's own Locust users: tests/server/sim/test_seed_scenario.py).

    python -m server.sim --port 8000 --profile deepseek-v2-lite-a100
"""
