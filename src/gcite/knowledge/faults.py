"""A test-only crash hook: named checkpoints on the write path where a process may kill itself.

The crash-safety tests run a real ``gcite`` process (``serve`` or ``ingest``) with
``GCITE_FAULT_POINT`` naming one checkpoint; when the write path reaches it, the process
sends itself ``SIGKILL`` (no clean-up runs, as with ``kill -9``), and the test checks what a
reader sees after a restart. Unset (always, outside those tests) it does nothing.

Checkpoints: ``version-staged`` (a new version's chunks written, not yet swapped in),
``version-swapped`` (the catalog points at the new version, the old one's chunks not yet
removed), ``document-unlisted`` (a deleted document left the catalog, its chunks not yet
removed), ``upload-written`` (an uploaded file written, not yet ingested).
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "GCITE_FAULT_POINT"


def checkpoint(name: str) -> None:
    """Kill this process with ``SIGKILL`` when ``GCITE_FAULT_POINT`` is ``name``."""
    if os.environ.get(FAULT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


__all__ = ["FAULT_ENV", "checkpoint"]
