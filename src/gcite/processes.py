"""Whether a recorded server process is alive: here by its pid, elsewhere by its lease.

Processes sharing a database (the conversation store's ``gcite_instances``, the owners of
the pgvector store's indexing jobs) record themselves as ``(host, pid, started)`` plus the
time they last refreshed the record (``seen_at``). A recorded process is dead when:

- it ran on this machine (same host name and boot id) and no process with its pid and
  start time exists any more: decided at once;
- it ran on another machine (or this one before a reboot) and has not refreshed its record
  for ``lease_s`` seconds (machines' clocks are assumed to agree within seconds, as NTP
  keeps them).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

HEARTBEAT_S = 15.0
"""How often (s) a live process refreshes its records."""

LEASE_S = 120
"""A process on another machine that has not refreshed its record for this long is dead."""

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def this_host() -> str:
    """This machine as recorded: ``<host name>/<boot id>`` (the boot id when known)."""
    try:
        boot = _BOOT_ID.read_text(encoding="ascii").strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"[:255]


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, ``/proc/<pid>/stat``); None
    when there is no such process. 0 where ``/proc`` does not tell (then only whether the
    pid exists counts)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except FileNotFoundError:
        return None
    except OSError:
        stat = ""
    fields = stat.rsplit(")", 1)[-1].split()
    if fields[:1] in (["Z"], ["X"]):  # exited, not yet reaped by its parent
        return None
    if len(fields) > 19 and fields[19].isdigit():  # field 22 of the whole line
        return int(fields[19])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return 0


def is_dead(
    record: tuple[str, str, int, int, int], *, host: str, now: float, lease_s: float
) -> bool:
    """Whether the recorded process ``(id, host, pid, started, seen_at)`` is dead, seen
    from a process on ``host`` at ``now`` (module docstring)."""
    _id, its_host, pid, started, seen_at = record
    if its_host == host:
        current = process_start(pid)
        return current is None or (started != 0 and current != started)
    return now - seen_at > lease_s


__all__ = ["HEARTBEAT_S", "LEASE_S", "is_dead", "process_start", "this_host"]
