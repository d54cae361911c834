"""A fast OpenAI-shaped streaming server whose timing is scripted, for tests and the client-cost benchmark.

Every request follows the same absolute schedule, measured from the moment its body was read:
chunk j (carrying ``--tokens-per-chunk`` tokens) is written at ``ttft + j * K * itl``, whatever the
concurrency. So the "truth" a client must measure is known: TTFT = ``--ttft-ms``, ITL = ``--itl-ms``,
inter-chunk latency = K x ITL. Usage is sent like vLLM's ``continuous_usage_stats``.

    python -m server.scripted --port 8001 --ttft-ms 150 --itl-ms 20 --tokens-per-chunk 1 --output-tokens 64
    python -m server.scripted --port 8001 --fault 500,429,cut,junk,stall,nodone --fault-every 4

``GET /stats`` returns how many completion requests arrived and which faults were served.
"""
