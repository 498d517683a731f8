"""Conversations and messages, stored with SQLAlchemy (SQLite by default, PostgreSQL by URL).

What Dify's message history endpoints return (``GET /v1/messages``,
``GET /v1/conversations``, ``../shared/reference/dify-openapi-service.json``) plus, per
message, the merge node's ``chunk_metadata`` (the seeds' Plan B, platform design §2.3:
chunk metadata fetchable by message or conversation id), the cited ids and a
``status`` (``normal`` | ``failed`` | ``stopped``) with the error text of a failed
generation.

The store is synchronous; the service calls it on the store's own threads
(:meth:`ConversationStore.call`). SQLAlchemy Core tables declare the schema (the
migrations build exactly it); every query is a Core statement on a connection (cheaper
than ORM sessions: the writes of a chat stream are on its hot path; the ORM is not
imported). Times are int seconds since the epoch. Raises :class:`gcite.errors.StoreError`
when the database cannot be opened.

Databases: SQLite (``sqlite:///path``, the default in the data dir) and PostgreSQL through
the psycopg 3 driver (a dependency). :func:`sqlalchemy_url` is the one place URLs are
normalised: ``postgresql://`` and ``postgres://`` become ``postgresql+psycopg://``.
PostgreSQL text cannot hold NUL characters, so every string column stores U+FFFD in
their place, on both databases alike (a question, user or id containing NUL is stored,
and looked up, with U+FFFD instead); ownership checks run in SQL, on the stored values.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Connection,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    bindparam,
    create_engine,
    delete,
    event,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import Dialect, Engine, Row, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from gcite.config_checks import sqlite_folder
from gcite.errors import StoreError

CONVERSATION_NAME_CHARS = 20

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def sqlalchemy_url(url: str) -> str:
    """``url`` with the driver SQLAlchemy should use: plain PostgreSQL URLs get psycopg 3.

    ``postgresql://u:p@host/db`` and ``postgres://u:p@host/db`` (the form many hosting
    providers hand out, which SQLAlchemy rejects) become ``postgresql+psycopg://u:p@host/db``;
    any other URL (``sqlite:///...``, ``postgresql+psycopg://...``, other drivers) is
    returned unchanged.
    """
    for scheme in _POSTGRES_SCHEMES:
        if url.startswith(scheme):
            return "postgresql+psycopg://" + url.removeprefix(scheme)
    return url


def _safe_url(url: str) -> str:
    """``url`` with its password masked, for error messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):  # not a URL SQLAlchemy can parse: drop credentials
        return url.rsplit("@", 1)[-1]


def _no_nul(value: str | None) -> str | None:
    return value.replace("\x00", "\ufffd") if value is not None and "\x00" in value else value


class _Str(TypeDecorator[str]):
    """``String(n)`` without NUL characters (U+FFFD instead), on every database."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return _no_nul(value)


class _Text(TypeDecorator[str]):
    """``Text`` without NUL characters (U+FFFD instead), on every database."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return _no_nul(value)


_METADATA = MetaData()
"""The conversation store's tables, as the migrations build them (SQLAlchemy Core: the
ORM is not used, and not imported)."""

_CONVERSATIONS = Table(
    "gcite_conversations",
    _METADATA,
    Column("id", _Str(36), primary_key=True),
    Column("user", _Str(255), nullable=False, index=True),
    Column("name", _Str(255), nullable=False, default=""),
    Column("inputs", JSON, nullable=False, default=dict),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False, index=True),
    Column("seq", Integer, nullable=False, default=0),
)

_FEEDBACKS = Table(
    "gcite_feedbacks",  # the end user's rating of one answer (POST /v1/messages/{id}/feedbacks)
    _METADATA,
    Column("message_id", _Str(36), primary_key=True),
    Column("rating", _Str(16), nullable=True),
    Column("content", _Text, nullable=True),
    Column("updated_at", BigInteger, nullable=False),
)

_STOPS = Table(
    "gcite_stop_requests",  # a stop asked on one worker for a run that may stream on another
    _METADATA,
    Column("task_id", _Str(64), primary_key=True),
    Column("owner", _Str(512), primary_key=True),
    Column("created_at", BigInteger, nullable=False),
)

# A server process using the database (gcite.service.instances): ``host`` the machine
# (host name and boot id), ``started`` the process's start time on its machine (clock
# ticks since boot, 0 when unknown), ``seen_at`` its last heartbeat (int seconds since
# the epoch).
_INSTANCES = Table(
    "gcite_instances",
    _METADATA,
    Column("id", _Str(36), primary_key=True),
    Column("host", _Str(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started", BigInteger, nullable=False),
    Column("seen_at", BigInteger, nullable=False),
)

_RUNNING_ROWS = text("status = 'running'")

_MESSAGES = Table(
    "gcite_messages",
    _METADATA,
    Column("id", _Str(36), primary_key=True),
    Column("conversation_id", _Str(36), nullable=False, index=True),
    Column("user", _Str(255), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("query", _Text, nullable=False),
    Column("inputs", JSON, nullable=False, default=dict),
    Column("answer", _Text, nullable=False, default=""),
    # the answer as the client saw it, when that differs from ``answer``
    Column("shown_answer", _Text, nullable=True),
    Column("status", _Str(16), nullable=False, default="running"),
    Column("failed", Boolean, nullable=False, default=False),
    Column("error", _Text, nullable=True),
    Column("chunk_metadata", JSON, nullable=False, default=list),
    Column("retriever_resources", JSON, nullable=False, default=list),
    Column("cited_ids", JSON, nullable=False, default=list),
    Column("message_metadata", JSON, nullable=False, default=dict),
    Column("created_at", BigInteger, nullable=False),
    Column("instance_id", _Str(36), nullable=True),
    Index("ix_gcite_messages_conversation_seq", "conversation_id", "seq"),
    # the messages in flight, by the process that runs them (crash recovery). The
    # migration makes it partial (``status = 'running'``) on both databases; the predicate
    # is named here for SQLite only, since naming any ``postgresql_*`` option makes
    # SQLAlchemy import its whole PostgreSQL dialect in every process, also on SQLite
    # (these tables are only queried and compared with the migrations, never created).
    Index("ix_gcite_messages_running", "instance_id", sqlite_where=_RUNNING_ROWS),
)

# The statements of the per-stream calls, built once: Core statements on a connection, with
# bound parameters (an UPDATE without values() sets the columns named in the parameters).
# The ORM unit of work (Session.get, then a flush) costs far more CPU per message.
_NEXT_SEQ = (
    update(_CONVERSATIONS)
    .where(
        _CONVERSATIONS.c.id == bindparam("b_id", type_=_CONVERSATIONS.c.id.type),
        _CONVERSATIONS.c.user == bindparam("b_user", type_=_CONVERSATIONS.c.user.type),
    )
    .values(seq=_CONVERSATIONS.c.seq + 1, updated_at=bindparam("b_now", type_=BigInteger()))
    .returning(_CONVERSATIONS.c.seq)
)
_INSERT_CONVERSATION = insert(_CONVERSATIONS)
_INSERT_MESSAGE = insert(_MESSAGES)
_UPDATE_MESSAGE = update(_MESSAGES).where(
    _MESSAGES.c.id == bindparam("b_id", type_=_MESSAGES.c.id.type)
)
_HISTORY = (
    select(
        _MESSAGES.c.id,
        _MESSAGES.c.query,
        _MESSAGES.c.answer,
        _MESSAGES.c.failed,
        _MESSAGES.c.chunk_metadata,
        _MESSAGES.c.cited_ids,
    )
    .where(
        _MESSAGES.c.conversation_id
        == bindparam("b_conversation", type_=_MESSAGES.c.conversation_id.type),
        _MESSAGES.c.status != "running",
    )
    .order_by(_MESSAGES.c.seq.desc())
    .limit(bindparam("b_limit", type_=Integer()))
)
_FIND_STOP = select(_STOPS.c.task_id).where(
    _STOPS.c.task_id == bindparam("b_task", type_=_STOPS.c.task_id.type),
    _STOPS.c.owner == bindparam("b_owner", type_=_STOPS.c.owner.type),
)
_INSERT_STOP = insert(_STOPS)
_ANY_STOP = select(_STOPS.c.task_id).limit(1)
"""Whether any stop record is stored (a poll that finds none writes nothing)."""

_TAKE_STOPS = (
    delete(_STOPS)
    .where(
        _STOPS.c.task_id.in_(bindparam("b_tasks", expanding=True, type_=_STOPS.c.task_id.type))
        | (_STOPS.c.created_at < bindparam("b_before", type_=BigInteger()))
    )
    .returning(_STOPS.c.task_id, _STOPS.c.owner)
)


@dataclass
class MessageRecord:
    """One stored message (a question and its answer).

    ``status``: ``running`` while generating, then ``normal`` | ``failed`` | ``stopped``;
    ``failed`` is True for a generation that broke off (``error`` says why; ``answer`` holds
    the text received before the failure, so nothing is lost). ``answer`` is the raw form
    (``[C:N]`` markers, what the history sent to the model uses); ``shown_answer`` what the
    client saw when its key's citation style rendered the markers (``numbers``), else None.
    """

    id: str
    conversation_id: str
    user: str
    query: str
    inputs: dict[str, Any]
    answer: str
    status: str
    failed: bool
    error: str | None
    chunk_metadata: list[dict[str, Any]]
    retriever_resources: list[dict[str, Any]]
    cited_ids: list[str]
    metadata: dict[str, Any]
    created_at: int
    feedback: str | None = None  # the end user's rating: "like" | "dislike" | None
    shown_answer: str | None = None


@dataclass
class ConversationRecord:
    """One conversation: ``name`` is the first question, cut to 20 characters."""

    id: str
    user: str
    name: str
    inputs: dict[str, Any] = field(default_factory=dict)
    created_at: int = 0
    updated_at: int = 0


def _msg(row: Row[Any], feedback: str | None = None) -> MessageRecord:
    return MessageRecord(
        feedback=feedback,
        id=row.id,
        conversation_id=row.conversation_id,
        user=row.user,
        query=row.query,
        inputs=dict(row.inputs or {}),
        answer=row.answer or "",
        shown_answer=row.shown_answer,
        status=row.status,
        failed=bool(row.failed),
        error=row.error,
        chunk_metadata=list(row.chunk_metadata or []),
        retriever_resources=list(row.retriever_resources or []),
        cited_ids=list(row.cited_ids or []),
        metadata=dict(row.message_metadata or {}),
        created_at=row.created_at,
    )


def _conv(row: Row[Any]) -> ConversationRecord:
    return ConversationRecord(
        id=row.id,
        user=row.user,
        name=row.name,
        inputs=dict(row.inputs or {}),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _ratings(connection: Connection, message_ids: list[str]) -> dict[str, str]:
    if not message_ids:
        return {}
    rows = connection.execute(
        select(_FEEDBACKS.c.message_id, _FEEDBACKS.c.rating).where(
            _FEEDBACKS.c.message_id.in_(message_ids), _FEEDBACKS.c.rating.is_not(None)
        )
    ).all()
    return {message_id: rating for message_id, rating in rows}


@dataclass(frozen=True)
class PastMessage:
    """What a follow-up's prompt needs of an earlier message (:meth:`ConversationStore.history`):
    only these columns are read (the answer's metadata, often the largest, is not decoded)."""

    id: str
    query: str
    answer: str
    failed: bool
    chunk_metadata: list[dict[str, Any]]
    cited_ids: list[str]


def _history(connection: Connection, conversation_id: str, limit: int) -> list[PastMessage]:
    rows = connection.execute(_HISTORY, {"b_conversation": conversation_id, "b_limit": limit}).all()
    return [
        PastMessage(
            id=r.id,
            query=r.query,
            answer=r.answer or "",
            failed=bool(r.failed),
            chunk_metadata=list(r.chunk_metadata or []),
            cited_ids=list(r.cited_ids or []),
        )
        for r in reversed(rows)
    ]


#: Threads of a ConversationStore (:meth:`ConversationStore.call`).
STORE_THREADS = 8
_T = TypeVar("_T")


class ConversationStore:
    """Conversations and messages in one SQL database.

    ``url``: a SQLAlchemy URL (``sqlite:///path``, ``postgresql://...``,
    ``postgresql+psycopg://...``; see :func:`sqlalchemy_url`); for SQLite the parent folder
    is created. The schema is migrated to the newest revision on open (:func:`migrate`).
    """

    def __init__(self, url: str, *, create_dir: bool = True) -> None:
        url = sqlalchemy_url(url)
        folder = sqlite_folder(url)
        if folder is not None and not create_dir and not folder.is_dir():
            raise StoreError(
                f"会话数据库的目录不存在: {folder}"
                "（请先创建该目录，或设置 create_database_dir = true）"
            )
        try:
            if folder is not None:
                folder.mkdir(parents=True, exist_ok=True)
            sqlite = url.startswith("sqlite")
            # a liveness check (SELECT 1) per checkout guards against dropped server
            # connections; a SQLite file has no server to lose
            self.engine: Engine = create_engine(url, pool_pre_ping=not sqlite)
            if sqlite:
                event.listen(self.engine, "connect", _sqlite_pragmas)
            migrate(self.engine)
        except _open_errors() as exc:
            safe = _safe_url(url)
            detail = str(exc).replace(url, safe)
            raise StoreError(f"无法打开会话数据库 {safe}: {detail}") from exc
        # SQLite takes one writer at a time: the threads using this store queue on a lock
        # rather than poll the file lock (busy_timeout retries sleep up to 100 ms each).
        # With many threads writing, both the tail latency and the CPU per message are lower
        # than with every pooled connection polling the file lock (docs/benchmarks.md).
        self._write_lock: AbstractContextManager[object] = (
            threading.Lock() if sqlite else nullcontext()
        )
        # The store's own threads: a database call never waits behind CPU work (searches,
        # verification) in the event loop's default executor, and threads queued on the
        # write lock never fill that executor (under a burst, a Plan B chunk write queued
        # behind them; benchmarks/bench_scale.py).
        self._threads = ThreadPoolExecutor(STORE_THREADS, thread_name_prefix="gcite-db")
        # A single-statement write is its own transaction: on PostgreSQL it runs in
        # autocommit (no BEGIN and COMMIT round trips); on SQLite in a write transaction
        # (there autocommit costs more: a PRAGMA when the connection is handed back).
        self._autocommit_writes = not sqlite
        # The stop poll's own connection, kept open in autocommit (:meth:`take_stops`).
        self._poll: Connection | None = None
        self._poll_lock = threading.Lock()
        self.instance_id = str(uuid.uuid4())
        """The id this process's messages are written with (:meth:`register_instance`)."""

    async def call(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
        """``fn(*args, **kwargs)`` (blocking database work: a method of this store, or a
        function using it) on the store's own threads, awaited from the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        """Release the connection pool and the store's threads."""
        self._threads.shutdown(wait=True)  # the writes already queued are made
        with self._poll_lock:
            self._drop_poll()
        self.engine.dispose()

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        """A write transaction (committed at the end, rolled back on an exception)."""
        with self._write_lock, self.engine.begin() as connection:
            yield connection

    def _write_one(self, statement: Any, values: dict[str, Any]) -> None:
        """Execute one write statement, atomic as a transaction of its own (see
        ``_autocommit_writes``: PostgreSQL runs it in autocommit)."""
        if not self._autocommit_writes:
            with self._writing() as connection:
                connection.execute(statement, values)
            return
        with self.engine.connect() as connection:
            connection.execution_options(isolation_level="AUTOCOMMIT").execute(statement, values)

    # ------------------------------------------------------------------ writes
    def start_message(
        self,
        *,
        user: str,
        query: str,
        inputs: dict[str, Any],
        conversation_id: str | None = None,
    ) -> MessageRecord:
        """Create the message row (status ``running``) and, when needed, its conversation.

        Raises ``KeyError`` when ``conversation_id`` is given but does not exist for ``user``.
        """
        record, _ = self.start_turn(
            user=user, query=query, inputs=inputs, conversation_id=conversation_id
        )
        return record

    def start_turn(
        self,
        *,
        user: str,
        query: str,
        inputs: dict[str, Any],
        conversation_id: str | None = None,
        history: int = 0,
    ) -> tuple[MessageRecord, list[PastMessage]]:
        """:meth:`start_message`, and the last ``history`` finished messages of the
        conversation before it (:meth:`history`), read in the same transaction: one
        connection and one commit for a turn's start."""
        now = int(time.time())
        record = MessageRecord(
            id=str(uuid.uuid4()),
            conversation_id=conversation_id or str(uuid.uuid4()),
            user=user,
            query=query,
            inputs=dict(inputs),
            answer="",
            status="running",
            failed=False,
            error=None,
            chunk_metadata=[],
            retriever_resources=[],
            cited_ids=[],
            metadata={},
            created_at=now,
        )
        with self._writing() as connection:
            if conversation_id:
                # one atomic UPDATE ... RETURNING: concurrent turns of a conversation each get
                # their own seq on PostgreSQL and on SQLite (no read-then-write race)
                seq = connection.execute(
                    _NEXT_SEQ, {"b_id": conversation_id, "b_user": user, "b_now": now}
                ).scalar_one_or_none()
                if seq is None:
                    raise KeyError(conversation_id)
            else:
                seq = 1
                connection.execute(
                    _INSERT_CONVERSATION,
                    {
                        "id": record.conversation_id,
                        "user": user,
                        "name": " ".join(query.split())[:CONVERSATION_NAME_CHARS],
                        "inputs": inputs,
                        "created_at": now,
                        "updated_at": now,
                        "seq": seq,
                    },
                )
            connection.execute(
                _INSERT_MESSAGE,
                {
                    "id": record.id,
                    "conversation_id": record.conversation_id,
                    "user": user,
                    "seq": seq,
                    "query": query,
                    "inputs": inputs,
                    "answer": "",
                    "status": "running",
                    "failed": False,
                    "error": None,
                    "chunk_metadata": [],
                    "retriever_resources": [],
                    "cited_ids": [],
                    "message_metadata": {},
                    "created_at": now,
                    "instance_id": self.instance_id,
                },
            )
            past = (
                _history(connection, record.conversation_id, history)
                if conversation_id and history > 0
                else []
            )
        return record, past

    def set_chunks(self, message_id: str, chunk_metadata: list[dict[str, Any]]) -> None:
        """Store the merge node's ``chunk_metadata`` as soon as it is known (Plan B)."""
        self._write_one(_UPDATE_MESSAGE, {"b_id": message_id, "chunk_metadata": chunk_metadata})

    def finish_message(
        self,
        message_id: str,
        *,
        answer: str,
        status: str,
        error: str | None = None,
        cited_ids: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        chunk_metadata: list[dict[str, Any]] | None = None,
        shown_answer: str | None = None,
    ) -> None:
        """Record the outcome: ``status`` ``normal`` | ``failed`` | ``stopped``;
        ``metadata`` is what ``message_end`` carried (its ``retriever_resources`` are stored
        for the history); ``chunk_metadata`` (when given) is stored again, so the outcome is
        complete even when the early Plan B write (:meth:`set_chunks`) failed. ``answer`` is
        the raw answer, ``shown_answer`` the client's form when it differs (None: the same)."""
        values: dict[str, Any] = {
            "b_id": message_id,
            "answer": answer,
            "shown_answer": shown_answer,
            "status": status,
            "failed": status == "failed",
            "error": error,
            "retriever_resources": (metadata or {}).get("retriever_resources") or [],
            "cited_ids": cited_ids or [],
            "message_metadata": metadata or {},
        }
        if chunk_metadata is not None:
            values["chunk_metadata"] = chunk_metadata
        self._write_one(_UPDATE_MESSAGE, values)

    # ------------------------------------------------------------------- reads
    def get_conversation(self, conversation_id: str, user: str) -> ConversationRecord | None:
        """The conversation when it exists and belongs to ``user``."""
        with self.engine.connect() as connection:
            row = connection.execute(
                select(_CONVERSATIONS).where(
                    _CONVERSATIONS.c.id == conversation_id, _CONVERSATIONS.c.user == user
                )
            ).one_or_none()
        return None if row is None else _conv(row)

    def get_message(self, message_id: str, user: str | None = None) -> MessageRecord | None:
        """One message (``user`` given: only when it belongs to that user)."""
        with self.engine.connect() as connection:
            query = select(_MESSAGES).where(_MESSAGES.c.id == message_id)
            if user is not None:
                query = query.where(_MESSAGES.c.user == user)
            row = connection.execute(query).one_or_none()
            if row is None:
                return None
            return _msg(row, _ratings(connection, [row.id]).get(row.id))

    def history(self, conversation_id: str, *, limit: int = 20) -> list[PastMessage]:
        """The last ``limit`` finished messages of a conversation, oldest first."""
        with self.engine.connect() as connection:
            return _history(connection, conversation_id, limit)

    def list_messages(
        self, conversation_id: str, *, first_id: str | None = None, limit: int = 20
    ) -> tuple[list[MessageRecord], bool]:
        """A page of messages, oldest first, ending just before ``first_id`` (Dify paging).

        Returns ``(messages, has_more)``. Raises ``KeyError`` for an unknown ``first_id``.
        """
        with self.engine.connect() as connection:
            query = select(_MESSAGES).where(_MESSAGES.c.conversation_id == conversation_id)
            if first_id:
                first = connection.execute(
                    select(_MESSAGES.c.seq).where(
                        _MESSAGES.c.id == first_id, _MESSAGES.c.conversation_id == conversation_id
                    )
                ).scalar_one_or_none()
                if first is None:
                    raise KeyError(first_id)
                query = query.where(_MESSAGES.c.seq < first)
            rows = connection.execute(query.order_by(_MESSAGES.c.seq.desc()).limit(limit + 1)).all()
            has_more = len(rows) > limit
            page = list(reversed(rows[:limit]))
            ratings = _ratings(connection, [r.id for r in page])
        return [_msg(r, ratings.get(r.id)) for r in page], has_more

    def list_conversations(
        self,
        user: str,
        *,
        last_id: str | None = None,
        limit: int = 20,
        sort_by: str = "updated_at",
        descending: bool = True,
    ) -> tuple[list[ConversationRecord], bool]:
        """A page of the user's conversations, ordered by ``sort_by`` (``created_at`` or
        ``updated_at``, Dify's ``sort_by``), newest first unless ``descending`` is False;
        ties by id. Returns ``(conversations, has_more)``; the page after ``last_id`` in
        that order. Raises ``KeyError`` for an unknown ``last_id``, ``ValueError`` for
        another ``sort_by``.
        """
        if sort_by not in ("created_at", "updated_at"):
            raise ValueError(f"cannot sort conversations by {sort_by!r}")
        column = _CONVERSATIONS.c[sort_by]
        key = _CONVERSATIONS.c.id
        with self.engine.connect() as connection:
            query = select(_CONVERSATIONS).where(_CONVERSATIONS.c.user == user)
            if last_id:
                last = connection.execute(
                    select(column, key).where(key == last_id, _CONVERSATIONS.c.user == user)
                ).one_or_none()
                if last is None:
                    raise KeyError(last_id)
                mark, last_key = last
                if descending:
                    after = (column < mark) | ((column == mark) & (key < last_key))
                else:
                    after = (column > mark) | ((column == mark) & (key > last_key))
                query = query.where(after)
            order = (column.desc(), key.desc()) if descending else (column.asc(), key.asc())
            rows = connection.execute(query.order_by(*order).limit(limit + 1)).all()
        has_more = len(rows) > limit
        return [_conv(r) for r in rows[:limit]], has_more

    def conversation_messages(self, conversation_id: str) -> list[MessageRecord]:
        """Every message of a conversation, oldest first (Plan B by conversation id)."""
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(_MESSAGES)
                .where(_MESSAGES.c.conversation_id == conversation_id)
                .order_by(_MESSAGES.c.seq)
            ).all()
        return [_msg(r) for r in rows]

    # ------------------------------------------------------- server processes

    def register_instance(self, host: str, pid: int, started: int, now: int) -> None:
        """Record (or refresh) this process as live: its :attr:`instance_id`, ``host``,
        ``pid``, process start ``started`` and heartbeat time ``now`` (s since the epoch).
        A row another process removed (it judged this one dead) is written again."""
        values = {"host": host, "pid": pid, "started": started, "seen_at": now}
        with self._writing() as connection:
            done = connection.execute(
                update(_INSTANCES).where(_INSTANCES.c.id == self.instance_id).values(values)
            )
            if done.rowcount == 0:
                connection.execute(insert(_INSTANCES).values(id=self.instance_id, **values))

    def leave_instance(self) -> None:
        """Remove this process's row (it stops; its runs have ended)."""
        with self._writing() as connection:
            connection.execute(delete(_INSTANCES).where(_INSTANCES.c.id == self.instance_id))

    def instances(self) -> list[tuple[str, str, int, int, int]]:
        """Every recorded process: ``(id, host, pid, started, seen_at)``."""
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(
                    _INSTANCES.c.id,
                    _INSTANCES.c.host,
                    _INSTANCES.c.pid,
                    _INSTANCES.c.started,
                    _INSTANCES.c.seen_at,
                )
            ).all()
        return [(r.id, r.host, r.pid, r.started, r.seen_at) for r in rows]

    def fail_orphans(self, dead: list[str], error: str) -> list[str]:
        """Forget the processes ``dead`` and mark failed (with ``error``) every message
        still ``running`` whose process is not recorded any more (``dead``, removed
        earlier, or none: written before processes were recorded). Returns the ids of
        the messages marked; their answers so far stay as stored."""
        live = select(_INSTANCES.c.id)
        with self._writing() as connection:
            if dead:
                connection.execute(delete(_INSTANCES).where(_INSTANCES.c.id.in_(dead)))
            orphan = (_MESSAGES.c.status == "running") & (
                _MESSAGES.c.instance_id.is_(None) | _MESSAGES.c.instance_id.not_in(live)
            )
            rows = connection.execute(
                update(_MESSAGES)
                .where(orphan)
                .values(status="failed", failed=True, error=error)
                .returning(_MESSAGES.c.id)
            ).all()
        return [row.id for row in rows]

    # ------------------------------------------------- Dify's conversation endpoints

    def request_stop(self, task_id: str, owner: str) -> None:
        """Record a stop for ``task_id`` of ``owner`` (the worker running it takes it)."""
        with self._writing() as connection:
            key = {"b_task": task_id, "b_owner": owner}
            if connection.execute(_FIND_STOP, key).first() is None:
                connection.execute(
                    _INSERT_STOP,
                    {"task_id": task_id, "owner": owner, "created_at": int(time.time())},
                )

    def take_stops(self, task_ids: list[str]) -> list[tuple[str, str]]:
        """The ``(task_id, owner)`` stop records among ``task_ids``, removed as they are read.
        Records older than an hour (runs that ended elsewhere) are dropped too."""
        if not task_ids:
            return []
        wanted = {_no_nul(task_id) for task_id in task_ids}
        if not self._any_stop():  # most polls find none: no write then
            return []
        # one DELETE ... RETURNING takes the wanted records and drops the stale ones
        with self._writing() as connection:
            rows = connection.execute(
                _TAKE_STOPS, {"b_tasks": task_ids, "b_before": int(time.time()) - 3600}
            ).all()
        return [(task_id, owner) for task_id, owner in rows if task_id in wanted]

    def _any_stop(self) -> bool:
        """Whether any stop record is stored, read on the poll's own connection: kept open
        in autocommit, so a poll is one statement (no pool checkout, liveness ping, BEGIN or
        ROLLBACK each time). A connection that fails (the server dropped it) is replaced,
        and the read tried once more on the new one."""
        with self._poll_lock:
            try:
                return self._poll_once()
            except SQLAlchemyError:
                self._drop_poll()
            return self._poll_once()

    def _poll_once(self) -> bool:
        if self._poll is None:
            connection = self.engine.connect()
            connection.execution_options(isolation_level="AUTOCOMMIT")
            self._poll = connection
        return self._poll.execute(_ANY_STOP).first() is not None

    def _drop_poll(self) -> None:
        """Close the poll's connection (with ``_poll_lock`` held); the next poll opens one."""
        connection, self._poll = self._poll, None
        if connection is not None:
            with suppress(SQLAlchemyError):
                connection.invalidate()
                connection.close()

    def set_feedback(
        self, message_id: str, user: str, rating: str | None, content: str | None = None
    ) -> bool:
        """Store the end user's ``rating`` (``like`` | ``dislike``; ``None`` revokes it) and
        ``content`` for the message. False when the message is not ``user``'s."""
        now = int(time.time())
        with self._writing() as connection:
            owned = connection.execute(
                select(_MESSAGES.c.id).where(_MESSAGES.c.id == message_id, _MESSAGES.c.user == user)
            ).one_or_none()
            if owned is None:
                return False
            values = {"rating": rating, "content": content, "updated_at": now}
            updated = connection.execute(
                update(_FEEDBACKS).where(_FEEDBACKS.c.message_id == message_id).values(values)
            )
            if updated.rowcount == 0:
                connection.execute(insert(_FEEDBACKS).values(message_id=message_id, **values))
            return True

    def rename_conversation(
        self, conversation_id: str, user: str, name: str | None
    ) -> ConversationRecord | None:
        """Set the name (``None``: name it again from its first question, as a new
        conversation is named); ``None`` when the conversation is not ``user``'s."""
        with self._writing() as connection:
            row = connection.execute(
                select(_CONVERSATIONS).where(
                    _CONVERSATIONS.c.id == conversation_id, _CONVERSATIONS.c.user == user
                )
            ).one_or_none()
            if row is None:
                return None
            if name is None:
                first = connection.execute(
                    select(_MESSAGES.c.query)
                    .where(_MESSAGES.c.conversation_id == conversation_id)
                    .order_by(_MESSAGES.c.seq)
                    .limit(1)
                ).scalar()
                name = " ".join((first or "").split())[:CONVERSATION_NAME_CHARS]
            connection.execute(
                update(_CONVERSATIONS)
                .where(_CONVERSATIONS.c.id == conversation_id)
                .values(name=name)
            )
        return replace(_conv(row), name=name)

    def delete_conversation(self, conversation_id: str, user: str) -> bool:
        """Remove the conversation, its messages and their feedback; False when it is not
        ``user``'s."""
        with self._writing() as connection:
            owned = connection.execute(
                select(_CONVERSATIONS.c.id).where(
                    _CONVERSATIONS.c.id == conversation_id, _CONVERSATIONS.c.user == user
                )
            ).one_or_none()
            if owned is None:
                return False
            ids = select(_MESSAGES.c.id).where(_MESSAGES.c.conversation_id == conversation_id)
            connection.execute(delete(_FEEDBACKS).where(_FEEDBACKS.c.message_id.in_(ids)))
            connection.execute(
                delete(_MESSAGES).where(_MESSAGES.c.conversation_id == conversation_id)
            )
            connection.execute(delete(_CONVERSATIONS).where(_CONVERSATIONS.c.id == conversation_id))
            return True


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    # several worker processes write to one file: under a burst on a busy machine a writer
    # waited seconds for the lock and some requests failed with "database is locked"
    # (benchmarks/bench_scale.py); waiting is better than failing
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
    _switch_to_wal(cursor)
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


SQLITE_BUSY_MS = 30_000
"""How long a SQLite connection waits for another process's lock before failing."""


def _switch_to_wal(cursor: Any) -> None:
    """``PRAGMA journal_mode=WAL``, waiting for the lock it needs.

    Switching a new file to WAL takes an exclusive lock, and SQLite answers "database is
    locked" at once, without its busy handler, when processes opening one new file
    together (the workers of ``gcite serve --workers N``) race for it. So the switch is
    retried, with short pauses, for up to :data:`SQLITE_BUSY_MS`.
    """
    deadline = time.monotonic() + SQLITE_BUSY_MS / 1000
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "gcite_alembic_version"
_migrating = threading.Lock()
MIGRATION_LOCK = 0x6763_6974_6D69_67  # "gcitemig": the PostgreSQL advisory lock of migrate()
BASELINE = "0001"
"""The revision of the schema ``create_all`` made before migrations existed."""


SCHEMA_HEAD = "0006"
"""The newest revision of ``gcite.service.migrations`` (a test holds it to Alembic's head): a
database already there is not migrated, and Alembic is not even imported (a fifth of the
service's start-up CPU)."""


def _open_errors() -> tuple[type[BaseException], ...]:
    """What opening the store may raise (evaluated only when something was raised)."""
    from alembic.util.exc import CommandError

    return (SQLAlchemyError, OSError, ValueError, ImportError, CommandError)


def _current(connection: Connection) -> list[str]:
    """The revisions the database is at (``[]`` before any migration)."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return []
    found = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars()
    return [str(v) for v in found]


def _alembic_config(connection: Connection) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def migrate(engine: Engine) -> None:
    """Bring the database to the newest schema (Alembic, ``gcite.service.migrations``).

    An empty database gets every revision; a database made by ``create_all`` before
    migrations existed (tables, no ``gcite_alembic_version``) is stamped at
    :data:`BASELINE` first. Runs in one transaction (PostgreSQL and SQLite have
    transactional DDL); stores opening together migrate one after the other: in a process
    under a lock (Alembic's context is process-global), across processes on PostgreSQL
    under a transaction-scoped advisory lock, on SQLite under the database's write lock
    taken first (``BEGIN IMMEDIATE``: the driver would begin no transaction before DDL, so
    two processes could both see no version table and both create it). Raises SQLAlchemy
    errors (the caller maps them).
    """
    with _migrating, engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        if _current(connection) == [SCHEMA_HEAD]:
            return
        if connection.dialect.name == "sqlite":
            connection.exec_driver_sql("BEGIN IMMEDIATE")  # waits busy_timeout for the lock
        from alembic import command

        config = _alembic_config(connection)
        tables = inspect(connection)
        if not tables.has_table(VERSION_TABLE) and tables.has_table(_MESSAGES.name):
            command.stamp(config, BASELINE)
        command.upgrade(config, "head")


def schema_revision(engine: Engine) -> str | None:
    """The revision the database is at (None before any migration)."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        revision: str | None = context.get_current_revision()
        return revision


__all__ = [
    "SCHEMA_HEAD",
    "ConversationRecord",
    "ConversationStore",
    "MessageRecord",
    "PastMessage",
    "migrate",
    "schema_revision",
    "sqlalchemy_url",
]
