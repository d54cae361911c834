"""API adapters by name: one per endpoint, named by the user classes (``adapter = "chat"``).

    ADAPTERS["chat"].path                 # "/v1/chat/completions"
    register(MyAdapter())                 # a new endpoint: one adapter module + this call
    adapter_named("completions-batch")    # ValueError naming the registered ones if unknown

See :mod:`users.adapters.base` for the interface.
"""

from __future__ import annotations

from users.adapters.base import Adapter
from users.adapters.chat import ChatAdapter
from users.adapters.completions import BatchCompletionsAdapter, CompletionsAdapter

ADAPTERS: dict[str, Adapter] = {}


def register(adapter: Adapter) -> Adapter:
    """Add ``adapter`` under its name; a name can be registered once (again with the same object: no-op)."""
    if not adapter.name or not adapter.path.startswith("/"):
        raise ValueError(f"adapter {type(adapter).__name__} needs a name and a path starting with '/'")
    known = ADAPTERS.get(adapter.name)
    if known is not None and known is not adapter:
        raise ValueError(f"API adapter {adapter.name!r} is already registered ({type(known).__name__})")
    ADAPTERS[adapter.name] = adapter
    return adapter


def adapter_named(name: str) -> Adapter:
    try:
        return ADAPTERS[name]
    except KeyError:
        raise ValueError(f"unknown API adapter {name!r}; registered: {', '.join(sorted(ADAPTERS))}") from None


for _adapter in (ChatAdapter(), CompletionsAdapter(), BatchCompletionsAdapter()):
    register(_adapter)
