"""What an answer costs the conversation store's database, counted on the wire.

Per answer the service starts the turn (the message row, and a follow-up's history), stores
the Plan B chunks, stores the outcome, and, while it streams, its process polls the stop
records every ``STOP_POLL_S``. Counted here for each of those calls on a real database:

* what reaches the database: on SQLite every statement SQLite runs (its trace callback:
  ``BEGIN`` and ``COMMIT`` included), on PostgreSQL every round trip (libpq's trace of the
  messages the client sends: a simple ``Query`` or the ``Sync`` closing a parameterised
  one; ``BEGIN``, ``COMMIT``, ``ROLLBACK`` and the pool's liveness ping included);
* connections checked out of the pool (each one a ping on PostgreSQL, and a reset when
  it goes back).

The numbers are what the store's design gives; a call that costs more fails here.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import event

from gcite.service.store import ConversationStore
from support.pg import fresh_database

_T = TypeVar("_T")
_ROUND_TRIP = re.compile(r"^F\s+\d+\s+(Query|Sync)\b", re.MULTILINE)
_SQL = re.compile(r'^F\s+\d+\s+(?:Query|Parse\s+"\w*")\s+"([^"]*)"', re.MULTILINE)


class Wire:
    """Counts what ``store`` sends to its database and its pool checkouts (the pool is
    emptied first: every connection it opens is traced). ``statements``: the SQL of the
    last :meth:`count`."""

    def __init__(self, store: ConversationStore, trace_dir: Path) -> None:
        self.store = store
        self.sqlite = store.engine.dialect.name == "sqlite"
        self.statements: list[str] = []
        self.checkouts = 0
        self._trace = (trace_dir / "libpq.trace").open("w+", encoding="utf-8")
        self._read = 0
        event.listen(store.engine, "connect", self._traced)
        event.listen(store.engine, "checkout", self._checked_out)
        store.engine.dispose()

    def _traced(self, dbapi_connection: Any, _record: Any) -> None:
        if self.sqlite:
            dbapi_connection.set_trace_callback(self.statements.append)
        else:
            from psycopg import pq

            dbapi_connection.pgconn.trace(self._trace.fileno())
            dbapi_connection.pgconn.set_trace_flags(
                pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE
            )

    def _checked_out(self, *_args: Any) -> None:
        self.checkouts += 1

    def count(self, call: Callable[[], _T]) -> tuple[_T, int, int]:
        """``call()``'s result, the statements (SQLite) or round trips (PostgreSQL) it
        made, and its pool checkouts."""
        self.statements.clear()
        checkouts = self.checkouts
        self._trace.seek(0, 2)
        start = self._trace.tell()
        result = call()
        if self.sqlite:
            sent = len(self.statements)
        else:
            self._trace.seek(start)
            trace = self._trace.read()
            sent = len(_ROUND_TRIP.findall(trace))
            self.statements[:] = _SQL.findall(trace)
        return result, sent, self.checkouts - checkouts

    def close(self) -> None:
        self._trace.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def wire(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Wire]:
    """A store on a fresh SQLite file or a fresh PostgreSQL database, counted."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'hops.sqlite3'}"
    else:
        url = fresh_database(request.getfixturevalue("postgres_url"), "hops")
    store = ConversationStore(url)
    # libpq's trace file: not under pytest's tmp dir when a root test runs the server
    # as another user (the trace is written by this process, so any private dir does)
    with tempfile.TemporaryDirectory() as trace_dir:
        counted = Wire(store, Path(trace_dir))
        try:
            yield counted
        finally:
            store.close()
            counted.close()


# (statements on SQLite, round trips on PostgreSQL), pool checkouts
NEW_TURN = {"sqlite": (4, 1), "postgresql": (5, 1)}  # [ping] BEGIN INSERT INSERT COMMIT
FOLLOW_UP = {"sqlite": (5, 1), "postgresql": (6, 1)}  # [ping] BEGIN UPDATE INSERT SELECT COMMIT
ONE_WRITE = {"sqlite": (3, 1), "postgresql": (2, 1)}  # BEGIN UPDATE COMMIT / ping UPDATE
POLL = (1, 0)  # one SELECT on the poll's own connection


def _name(wire: Wire) -> str:
    return "sqlite" if wire.sqlite else "postgresql"


def test_an_answer_costs_one_transaction_per_write(wire: Wire) -> None:
    """The calls of a first answer and a follow-up, in the service's order."""
    store, kind = wire.store, _name(wire)
    store.take_stops(["warm"])  # the poll's connection opened
    store.get_conversation("none", "u")  # a pooled connection, pinged when reused
    (first, past), sent, checkouts = wire.count(
        lambda: store.start_turn(user="u", query="问题", inputs={}, history=10)
    )
    assert past == [] and (sent, checkouts) == NEW_TURN[kind]
    chunks = [{"id": "1", "content": "内容"}]
    _, sent, checkouts = wire.count(lambda: store.set_chunks(first.id, chunks))
    assert (sent, checkouts) == ONE_WRITE[kind]  # Plan B
    metadata = {"retriever_resources": chunks, "usage": {"total_tokens": 9}}
    _, sent, checkouts = wire.count(
        lambda: store.finish_message(
            first.id, answer="答[C:1]", status="normal", cited_ids=["1"], metadata=metadata
        )
    )
    assert (sent, checkouts) == ONE_WRITE[kind]  # the outcome
    (second, past), sent, checkouts = wire.count(
        lambda: store.start_turn(
            user="u", query="追问", inputs={}, conversation_id=first.conversation_id, history=10
        )
    )
    assert (sent, checkouts) == FOLLOW_UP[kind]  # the row and the history: one transaction
    reads = [sql for sql in wire.statements if sql.lstrip().upper().startswith("SELECT")]
    assert len(reads) == 1 and "chunk_metadata" in reads[0]
    assert "message_metadata" not in reads[0] and "retriever_resources" not in reads[0]
    assert [(m.id, m.answer, m.chunk_metadata, m.cited_ids) for m in past] == [
        (first.id, "答[C:1]", chunks, ["1"])
    ]
    assert second.conversation_id == first.conversation_id
    stored = store.get_message(second.id)
    assert stored is not None and stored.status == "running"


def test_a_stop_poll_that_finds_nothing_is_one_statement(wire: Wire) -> None:
    """Polls after the first reuse the poll's connection: no checkout, ping or
    transaction; a stop record is still found and taken."""
    store = wire.store
    store.take_stops(["task"])
    for _ in range(3):
        found, sent, checkouts = wire.count(lambda: store.take_stops(["task"]))
        assert found == [] and (sent, checkouts) == POLL
    other = ConversationStore(str(store.engine.url.render_as_string(hide_password=False)))
    try:
        other.request_stop("task", "owner")  # another worker's stop
    finally:
        other.close()
    assert store.take_stops(["task"]) == [("task", "owner")]
    assert store.take_stops(["task"]) == []


def test_polls_go_on_after_the_server_dropped_the_connections(postgres_url: str) -> None:
    """The server ends every connection of the database (a restart, an administrator):
    the next poll opens a new connection and still finds the stop record."""
    import psycopg

    url = fresh_database(postgres_url, "hops")
    store = ConversationStore(url)
    try:
        assert store.take_stops(["task"]) == []  # the poll's connection is open
        store.request_stop("task", "owner")
        database = url.rsplit("/", 1)[1]
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            ended = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (database,),
            ).fetchall()
        assert ended and all(row[0] for row in ended)
        assert store.take_stops(["task"]) == [("task", "owner")]
        assert store.take_stops(["task"]) == []
    finally:
        store.close()
