"""At test start a process freezes what start-up built, so the collector's full passes during the run walk only the
run's own objects (a full pass over a many-stream process was tens of ms of CPU, a pause every stream waits through)."""

from __future__ import annotations

import gc

from users.plugin import UsersPlugin, settle_gc


def test_start_up_objects_leave_the_collectors_passes(monkeypatch):
    gc.unfreeze()
    try:
        built = [[i] for i in range(5000)]  # tracked containers, as modules, tokenizers and prompt pools are
        before = gc.get_freeze_count()
        settle_gc()
        assert gc.get_freeze_count() >= before + len(built)
        assert not any(built is o for o in gc.get_objects(generation=2))  # not walked by a full pass
    finally:
        gc.unfreeze()


def test_test_start_settles_even_when_the_start_fails(monkeypatch):
    calls = []
    monkeypatch.setattr("users.plugin.settle_gc", lambda: calls.append("settled"))

    def failing_start(self, environment):
        raise ValueError("bad option")

    monkeypatch.setattr(UsersPlugin, "_start", failing_start)
    plugin = UsersPlugin.__new__(UsersPlugin)
    try:
        plugin._on_test_start(environment=None)
    except ValueError:
        pass
    assert calls == ["settled"]
