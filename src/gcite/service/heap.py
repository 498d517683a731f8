"""Start-up objects out of the garbage collector's way.

A server process holds the knowledge base's index, the models and the imported modules:
hundreds of thousands of long-lived objects that every full (generation 2) collection
walks again, with the event loop stopped, and a burst of streams runs several such
passes (docs/benchmarks.md).
:func:`freeze_startup_objects` collects once and moves every object alive to the permanent
generation (:func:`gc.freeze`), which later collections skip; objects made afterwards are
collected as before. Called when a warm-up has loaded what the process keeps.
"""

from __future__ import annotations

import gc


def freeze_startup_objects() -> None:
    """Collect, then freeze everything alive (safe to call again: it adds what is new)."""
    gc.collect()
    gc.freeze()


__all__ = ["freeze_startup_objects"]
