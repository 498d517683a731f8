"""Server processes in the conversation database, and the answers a dead one left running.

Real databases (a SQLite file, a fresh schema on the test PostgreSQL server) and real
processes: a "dead" process is one this test started and waited for.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text, update

from gcite.service.instances import (
    LEASE_S,
    ORPHANED,
    Instances,
    is_dead,
    process_start,
    this_host,
)
from gcite.service.store import _MESSAGES, ConversationStore, sqlalchemy_url
from support.clock import ManualClock


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database: a new SQLite file, or a new schema on the PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'chat.sqlite3'}"
    base: str = request.getfixturevalue("postgres_url")
    schema = f"inst_{uuid.uuid4().hex[:10]}"
    engine = create_engine(sqlalchemy_url(base))
    with engine.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    engine.dispose()
    return f"{base}?options=-csearch_path%3D{schema}"


@pytest.fixture
def stores(url: str) -> Iterator[list[ConversationStore]]:
    """Two stores on one database: two server processes as the database sees them."""
    opened = [ConversationStore(url), ConversationStore(url)]
    yield opened
    for store in opened:
        store.close()


def _dead_pid() -> tuple[int, int]:
    """``(pid, start)`` of a process that ran and exited (reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    start = process_start(proc.pid)
    assert start is not None
    proc.kill()
    proc.wait()
    return proc.pid, start


def _ask(store: ConversationStore, query: str = "问题") -> str:
    return store.start_message(user="u", query=query, inputs={}).id


def test_a_dead_process_on_this_machine_has_its_running_messages_failed_at_start_up(
    stores: list[ConversationStore],
) -> None:
    crashed, starting = stores
    pid, start = _dead_pid()
    crashed.register_instance(this_host(), pid, start, 1_000)
    running = _ask(crashed)
    finished = _ask(crashed)
    crashed.finish_message(finished, answer="完整的回答", status="normal")
    marked = Instances(starting, clock=ManualClock(2_000).now).join()
    assert marked == [running]
    message = starting.get_message(running)
    assert message is not None
    assert (message.status, message.failed, message.error) == ("failed", True, ORPHANED)
    done = starting.get_message(finished)
    assert done is not None and (done.status, done.answer) == ("normal", "完整的回答")
    assert [r[0] for r in starting.instances()] == [starting.instance_id]  # forgotten


def test_a_live_process_keeps_its_running_messages(stores: list[ConversationStore]) -> None:
    live, starting = stores
    clock = ManualClock(5_000)
    Instances(live, clock=clock.now).join()  # this very process: alive
    running = _ask(live)
    clock.advance(10 * LEASE_S)  # the lease counts only for other machines
    assert Instances(starting, clock=clock.now).join() == []
    message = starting.get_message(running)
    assert message is not None and message.status == "running"


def test_a_reused_pid_with_another_start_time_is_a_dead_process(
    stores: list[ConversationStore],
) -> None:
    crashed, starting = stores
    start = process_start(_dead_pid()[0])
    assert start is None
    own_start = process_start(os.getpid())
    assert own_start is not None and own_start > 0
    crashed.register_instance(this_host(), os.getpid(), own_start - 1, 1)
    running = _ask(crashed)
    assert Instances(starting, clock=ManualClock(2).now).join() == [running]


def test_another_machine_is_dead_once_its_lease_ran_out(stores: list[ConversationStore]) -> None:
    remote, local = stores
    clock = ManualClock(10_000)
    remote.register_instance("another-host/boot", 4242, 77, int(clock.now()))
    running = _ask(remote)
    me = Instances(local, clock=clock.now)
    assert me.join() == []
    clock.advance(LEASE_S)  # exactly the lease: still alive
    assert me.beat() == []
    remote.register_instance("another-host/boot", 4242, 77, int(clock.now()))  # its heartbeat
    clock.advance(LEASE_S + 1)
    assert me.beat() == [running]
    message = local.get_message(running)
    assert message is not None and message.status == "failed"


def test_a_process_judged_dead_keeps_its_outcome_and_records_itself_again(
    stores: list[ConversationStore],
) -> None:
    slow, other = stores
    clock = ManualClock(100)
    slow_instances = Instances(slow, clock=clock.now)
    slow_instances.join()
    running = _ask(slow, "一个很长的回答")
    slow.leave_instance()  # as if another process had judged it dead ...
    assert Instances(other, clock=clock.now).reap() == [running]
    slow.finish_message(running, answer="最后还是答完了", status="normal")  # ... it was not
    message = other.get_message(running)
    assert message is not None and (message.status, message.error) == ("normal", None)
    slow_instances.beat()
    assert slow.instance_id in {r[0] for r in other.instances()}


def test_running_messages_from_before_processes_were_recorded_are_failed(
    stores: list[ConversationStore],
) -> None:
    old, starting = stores
    running = _ask(old)
    with old.engine.begin() as connection:  # a row of the schema before migration 0005
        connection.execute(
            update(_MESSAGES).where(_MESSAGES.c.id == running).values(instance_id=None)
        )
    assert Instances(starting).join() == [running]


def test_the_identity_of_this_process() -> None:
    record = ("me", this_host(), os.getpid(), 0, 0)
    assert not is_dead(record, host=this_host(), now=10**9, lease_s=1)
    assert this_host().startswith(os.uname().nodename)
