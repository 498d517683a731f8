"""Conversations and messages, stored with SQLAlchemy (SQLite by default, PostgreSQL by URL).

What Dify's message history endpoints return (``GET /v1/messages``,
``GET /v1/conversations``, ``../shared/reference/dify-openapi-service.json``) plus, per
message, the merge node's ``chunk_metadata`` (the seeds' Plan B, platform design §2.3:
chunk metadata fetchable by message or conversation id), the cited ids and a
``status`` (``normal`` | ``failed`` | ``stopped``) with the error text of a failed
generation.

The store is synchronous (SQLAlchemy Core/ORM sessions); the service calls it from a
worker thread. Times are int seconds since the epoch. Raises
:class:`gcite.errors.StoreError` when the database cannot be opened.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Boolean, Integer, String, Text, create_engine, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

from gcite.errors import StoreError

CONVERSATION_NAME_CHARS = 20


class _Base(DeclarativeBase):
    pass


class _Conversation(_Base):
    __tablename__ = "gcite_conversations"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    user: Mapped[str] = mapped_column(String(255), index=True)
    name: Mapped[str] = mapped_column(String(255), default="")
    inputs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[int] = mapped_column(Integer, index=True)
    seq: Mapped[int] = mapped_column(Integer, default=0)


class _Message(_Base):
    __tablename__ = "gcite_messages"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(String(36), index=True)
    user: Mapped[str] = mapped_column(String(255))
    seq: Mapped[int] = mapped_column(Integer)
    query: Mapped[str] = mapped_column(Text)
    inputs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    answer: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), default="running")
    failed: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    chunk_metadata: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    retriever_resources: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    cited_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    message_metadata: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[int] = mapped_column(Integer)


@dataclass
class MessageRecord:
    """One stored message (a question and its answer).

    ``status``: ``running`` while generating, then ``normal`` | ``failed`` | ``stopped``;
    ``failed`` is True for a generation that broke off (``error`` says why; ``answer`` holds
    the text received before the failure, so nothing is lost).
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


@dataclass
class ConversationRecord:
    """One conversation: ``name`` is the first question, cut to 20 characters."""

    id: str
    user: str
    name: str
    inputs: dict[str, Any] = field(default_factory=dict)
    created_at: int = 0
    updated_at: int = 0


def _msg(row: _Message) -> MessageRecord:
    return MessageRecord(
        id=row.id,
        conversation_id=row.conversation_id,
        user=row.user,
        query=row.query,
        inputs=dict(row.inputs or {}),
        answer=row.answer or "",
        status=row.status,
        failed=bool(row.failed),
        error=row.error,
        chunk_metadata=list(row.chunk_metadata or []),
        retriever_resources=list(row.retriever_resources or []),
        cited_ids=list(row.cited_ids or []),
        metadata=dict(row.message_metadata or {}),
        created_at=row.created_at,
    )


def _conv(row: _Conversation) -> ConversationRecord:
    return ConversationRecord(
        id=row.id,
        user=row.user,
        name=row.name,
        inputs=dict(row.inputs or {}),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


class ConversationStore:
    """Conversations and messages in one SQL database.

    ``url``: a SQLAlchemy URL (``sqlite:///path``, ``postgresql+psycopg://...``); for SQLite
    the parent folder is created. Tables are created on open (``CREATE TABLE IF NOT
    EXISTS``).
    """

    def __init__(self, url: str) -> None:
        try:
            if url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:"):
                Path(url.removeprefix("sqlite:///")).expanduser().parent.mkdir(
                    parents=True, exist_ok=True
                )
            self.engine: Engine = create_engine(url, future=True, pool_pre_ping=True)
            if url.startswith("sqlite"):
                event.listen(self.engine, "connect", _sqlite_pragmas)
            _Base.metadata.create_all(self.engine)
        except (SQLAlchemyError, OSError, ValueError, ImportError) as exc:
            raise StoreError(f"无法打开会话数据库 {url}: {exc}") from exc
        self._session = sessionmaker(self.engine, expire_on_commit=False)

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

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
        now = int(time.time())
        with self._session.begin() as session:
            if conversation_id:
                conv = session.get(_Conversation, conversation_id)
                if conv is None or conv.user != user:
                    raise KeyError(conversation_id)
            else:
                conv = _Conversation(
                    id=str(uuid.uuid4()),
                    user=user,
                    name=" ".join(query.split())[:CONVERSATION_NAME_CHARS],
                    inputs=inputs,
                    created_at=now,
                    updated_at=now,
                    seq=0,
                )
                session.add(conv)
            conv.seq = (conv.seq or 0) + 1
            conv.updated_at = now
            row = _Message(
                id=str(uuid.uuid4()),
                conversation_id=conv.id,
                user=user,
                seq=conv.seq,
                query=query,
                inputs=inputs,
                answer="",
                status="running",
                failed=False,
                error=None,
                chunk_metadata=[],
                retriever_resources=[],
                cited_ids=[],
                message_metadata={},
                created_at=now,
            )
            session.add(row)
            session.flush()
            return _msg(row)

    def set_chunks(self, message_id: str, chunk_metadata: list[dict[str, Any]]) -> None:
        """Store the merge node's ``chunk_metadata`` as soon as it is known (Plan B)."""
        with self._session.begin() as session:
            row = session.get(_Message, message_id)
            if row is not None:
                row.chunk_metadata = chunk_metadata

    def finish_message(
        self,
        message_id: str,
        *,
        answer: str,
        status: str,
        error: str | None = None,
        retriever_resources: list[dict[str, Any]] | None = None,
        cited_ids: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Record the outcome: ``status`` ``normal`` | ``failed`` | ``stopped``."""
        with self._session.begin() as session:
            row = session.get(_Message, message_id)
            if row is None:
                return
            row.answer = answer
            row.status = status
            row.failed = status == "failed"
            row.error = error
            row.retriever_resources = retriever_resources or []
            row.cited_ids = cited_ids or []
            row.message_metadata = metadata or {}

    # ------------------------------------------------------------------- reads
    def get_conversation(self, conversation_id: str, user: str) -> ConversationRecord | None:
        """The conversation when it exists and belongs to ``user``."""
        with self._session() as session:
            row = session.get(_Conversation, conversation_id)
            if row is None or row.user != user:
                return None
            return _conv(row)

    def get_message(self, message_id: str, user: str | None = None) -> MessageRecord | None:
        """One message (``user`` given: only when it belongs to that user)."""
        with self._session() as session:
            row = session.get(_Message, message_id)
            if row is None or (user is not None and row.user != user):
                return None
            return _msg(row)

    def history(self, conversation_id: str, *, limit: int = 20) -> list[MessageRecord]:
        """The last ``limit`` finished messages of a conversation, oldest first."""
        with self._session() as session:
            rows = session.scalars(
                select(_Message)
                .where(_Message.conversation_id == conversation_id)
                .where(_Message.status != "running")
                .order_by(_Message.seq.desc())
                .limit(limit)
            ).all()
            return [_msg(r) for r in reversed(rows)]

    def list_messages(
        self, conversation_id: str, *, first_id: str | None = None, limit: int = 20
    ) -> tuple[list[MessageRecord], bool]:
        """A page of messages, oldest first, ending just before ``first_id`` (Dify paging).

        Returns ``(messages, has_more)``. Raises ``KeyError`` for an unknown ``first_id``.
        """
        with self._session() as session:
            query = select(_Message).where(_Message.conversation_id == conversation_id)
            if first_id:
                first = session.get(_Message, first_id)
                if first is None or first.conversation_id != conversation_id:
                    raise KeyError(first_id)
                query = query.where(_Message.seq < first.seq)
            rows = session.scalars(query.order_by(_Message.seq.desc()).limit(limit + 1)).all()
            has_more = len(rows) > limit
            return [_msg(r) for r in reversed(rows[:limit])], has_more

    def list_conversations(
        self, user: str, *, last_id: str | None = None, limit: int = 20
    ) -> tuple[list[ConversationRecord], bool]:
        """A page of the user's conversations, most recently updated first.

        Returns ``(conversations, has_more)``. Raises ``KeyError`` for an unknown ``last_id``.
        """
        with self._session() as session:
            query = select(_Conversation).where(_Conversation.user == user)
            if last_id:
                last = session.get(_Conversation, last_id)
                if last is None or last.user != user:
                    raise KeyError(last_id)
                query = query.where(
                    (_Conversation.updated_at < last.updated_at)
                    | ((_Conversation.updated_at == last.updated_at) & (_Conversation.id < last.id))
                )
            rows = session.scalars(
                query.order_by(_Conversation.updated_at.desc(), _Conversation.id.desc()).limit(
                    limit + 1
                )
            ).all()
            has_more = len(rows) > limit
            return [_conv(r) for r in rows[:limit]], has_more

    def conversation_messages(self, conversation_id: str) -> list[MessageRecord]:
        """Every message of a conversation, oldest first (Plan B by conversation id)."""
        with self._session() as session:
            rows = session.scalars(
                select(_Message)
                .where(_Message.conversation_id == conversation_id)
                .order_by(_Message.seq)
            ).all()
            return [_msg(r) for r in rows]


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


def new_id() -> str:
    """A fresh UUID4 string (task ids, run ids, node execution ids)."""
    return str(uuid.uuid4())


__all__ = ["ConversationRecord", "ConversationStore", "MessageRecord", "new_id"]
