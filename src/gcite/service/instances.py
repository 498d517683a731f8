"""Server processes sharing one conversation database, and the answers a dead one left.

Every ``gcite serve`` process (a single server, each worker of ``--workers N``, on any
number of machines) records itself in ``gcite_instances`` at start-up
(:meth:`Instances.join`), writes its id on every message it starts, refreshes its row
every :data:`HEARTBEAT_S` seconds (:meth:`Instances.beat`) and removes it when it stops
(:meth:`Instances.leave`). A process killed with SIGKILL (or a machine that went away)
leaves messages ``running`` with the text sent so far lost; they are marked ``failed``
with :data:`ORPHANED` (``gcite_status`` ``failed`` in the message APIs) by the next
process that starts, and by every heartbeat of the live ones. A recorded process is dead
when (:func:`gcite.processes.is_dead`):

- it ran on this machine (same host name and boot id) and no process with its pid and
  start time exists any more: decided at once, so the replacement of a killed worker, or
  the service restarted after a crash, marks its messages at start-up;
- it ran on another machine (or this one before a reboot) and has not refreshed its row
  for :data:`LEASE_S` seconds (machines' clocks are assumed to agree within seconds, as
  NTP keeps them).

A live process wrongly judged dead (its heartbeat starved far beyond the lease) loses
nothing: its runs still store their real outcome when they end, and it records itself
again at its next heartbeat. Messages written before processes were recorded (no
instance id) that are still ``running`` count as orphans too.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable

from gcite.processes import HEARTBEAT_S, LEASE_S, is_dead, process_start, this_host
from gcite.service.store import ConversationStore

log = logging.getLogger("gcite.service")

ORPHANED = "回答中断：处理它的服务进程已退出（崩溃或被强制结束），请重新提问"
"""The error stored on the messages of a dead process."""


class Instances:
    """This process in ``gcite_instances`` of ``store`` (module docstring); ``clock``:
    seconds since the epoch (injectable for tests)."""

    def __init__(
        self,
        store: ConversationStore,
        *,
        clock: Callable[[], float] = time.time,
        lease_s: float = LEASE_S,
    ) -> None:
        self.store = store
        self.clock = clock
        self.lease_s = lease_s
        self.host = this_host()
        self.pid = os.getpid()
        self.started = process_start(self.pid) or 0

    def join(self) -> list[str]:
        """Record this process, then mark the dead processes' messages failed (blocking,
        database). Returns the ids of the messages marked."""
        self._register()
        return self.reap()

    def beat(self) -> list[str]:
        """Refresh this process's row and mark the dead processes' messages failed."""
        self._register()
        return self.reap()

    def _register(self) -> None:
        self.store.register_instance(self.host, self.pid, self.started, int(self.clock()))

    def reap(self) -> list[str]:
        """Forget the dead processes and mark their messages failed; returns their ids."""
        now = self.clock()
        dead = [
            record[0]
            for record in self.store.instances()
            if record[0] != self.store.instance_id
            and is_dead(record, host=self.host, now=now, lease_s=self.lease_s)
        ]
        marked = self.store.fail_orphans(dead, ORPHANED)
        if marked:
            log.warning("marked %d interrupted message(s) failed: %s", len(marked), marked)
        return marked

    def leave(self) -> None:
        """Remove this process's row (blocking, database)."""
        self.store.leave_instance()

    async def heartbeat(self, interval_s: float = HEARTBEAT_S) -> None:
        """:meth:`beat` every ``interval_s`` seconds until cancelled; failures are logged."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.store.call(self.beat)
            except Exception:
                log.warning("could not refresh this process in the database", exc_info=True)


__all__ = [
    "HEARTBEAT_S",
    "LEASE_S",
    "ORPHANED",
    "Instances",
    "is_dead",
    "process_start",
    "this_host",
]
