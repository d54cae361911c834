"""The run's shared context, at the bottom of the layers so that every layer can write its part of it.

- ``context``: :class:`~run.context.RunContext`, ``environment.llm`` — one typed field per thing a layer shares
  with the others (stage board, pacer, user settings, telemetry hub ...), each naming the layer that writes it.
- ``hooks``: :class:`~run.hooks.SummaryHooks`, ``environment.llm.hooks`` — the summary's sections (each with its
  empty value) and the sinks that receive the final summary.

It imports nothing of the project: a field typed by a higher layer's class is typed loosely and says which class.
"""
