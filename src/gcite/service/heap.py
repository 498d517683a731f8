"""Start-up objects out of the garbage collector's way.

A server process holds the knowledge base's index, the models and the imported modules:
hundreds of thousands of long-lived objects that every full (generation 2) collection
walks again. In ``gcite serve`` with the law corpus one such pass took ~115 ms of CPU, with
the event loop stopped, and three bursts of 200 streams ran eight of them.
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
