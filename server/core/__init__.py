"""What the two test servers share: one asyncio HTTP/1.1 server (:mod:`server.core.http`), one renderer of vLLM's
streamed events (:mod:`server.core.sse`) and one fault vocabulary (:mod:`server.core.faults`).

``server.sim`` (the vLLM simulator) and ``server.scripted`` (the scripted-timing server) differ in what they
compute — an engine's schedule or a fixed script — not in how they speak HTTP, frame SSE or name a fault. The kernel
receive stamp a request's clock may start at is :mod:`workload.netstamp` (shared with the client).
"""
