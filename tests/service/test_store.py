"""The conversation store on SQLite and on a real PostgreSQL server: the same behaviour.

Every store test runs twice (``store_url`` is parametrised): on a SQLite file and on the
throwaway PostgreSQL server of :mod:`support.pg` (skipped without the binaries, failed in CI). The
PostgreSQL database is shared by the session, so each test works under its own owners.
The last test runs a whole chat through ``create_app`` with ``database_url`` pointing at
PostgreSQL.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from service_streams import LiveServer, body, client_view, run_service
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    inspect,
    select,
    text,
    update,
)

from gcite.config import ApiKey, Settings
from gcite.errors import StoreError
from gcite.service.auth import Caller
from gcite.service.store import (
    _CONVERSATIONS,
    _FEEDBACKS,
    _METADATA,
    _STOPS,
    MIGRATIONS_DIR,
    SCHEMA_HEAD,
    ConversationStore,
    schema_revision,
    sqlalchemy_url,
)
from support.openai_standin import OpenAIStandin, Script

CHUNKS: list[dict[str, Any]] = [
    {
        "id": "1",
        "source_type": "rag",
        "document_title": "监控中心值守规程（安保内部）",
        "display_subtitle": "服务测试库 · 第 2 段",
        "content": '备用钥匙存放在"三号保险柜"内，取用须两人在场并登记。\\ 😀',
        "score": 0.87,
        "url": None,
        "access_roles": ["安保主管"],
        "extra": {"页码": 3, "标签": ["钥匙", "值守"], "空": {}},
    },
    {
        "id": "2",
        "source_type": "web",
        "document_title": "大厦访客须知",
        "display_subtitle": "kb.example.com",
        "content": "访客须在一层大堂服务台登记。",
        "score": 0.5,
        "url": "https://kb.example.com/访客?q=登记&x=1",
    },
]


def _owner(key: str, user: str) -> str:
    """The stored owner the service uses for ``user`` under app key ``key``."""
    return Caller(ApiKey(key, ()), (), "message").owner(user)


@pytest.fixture
def owner() -> str:
    """A fresh owner (the PostgreSQL database is shared by the whole session)."""
    return _owner("key-store", f"user-{uuid.uuid4().hex[:8]}")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A SQLite file URL, or the PostgreSQL server's plain ``postgresql://`` URL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'chat.sqlite3'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def store(store_url: str) -> Iterator[ConversationStore]:
    opened = ConversationStore(store_url)
    yield opened
    opened.close()


def test_plain_postgres_urls_get_the_psycopg_driver() -> None:
    assert (
        sqlalchemy_url("postgresql://u:p@db:5432/chat") == "postgresql+psycopg://u:p@db:5432/chat"
    )
    assert sqlalchemy_url("postgres://u:p@db/chat") == "postgresql+psycopg://u:p@db/chat"
    assert sqlalchemy_url("postgresql+psycopg://u:p@db/chat") == "postgresql+psycopg://u:p@db/chat"
    assert sqlalchemy_url("sqlite:////tmp/x.sqlite3") == "sqlite:////tmp/x.sqlite3"


def test_both_postgres_spellings_open_the_same_database(postgres_url: str, owner: str) -> None:
    assert postgres_url.startswith("postgresql://")
    plain = ConversationStore(postgres_url)
    explicit = ConversationStore(postgres_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        assert plain.engine.dialect.driver == "psycopg"
        assert explicit.engine.dialect.driver == "psycopg"
        record = plain.start_message(user=owner, query="你好", inputs={})
        found = explicit.get_message(record.id, owner)
        assert found is not None and found.query == "你好"
    finally:
        plain.close()
        explicit.close()


def test_a_wrong_password_is_a_store_error_without_the_password(postgres_url: str) -> None:
    password = postgres_url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
    wrong = postgres_url.replace(password, "not-the-password-42")
    with pytest.raises(StoreError) as caught:
        ConversationStore(wrong)
    assert "not-the-password-42" not in str(caught.value)
    assert "***" in str(caught.value) and "127.0.0.1" in str(caught.value)


def test_start_message_creates_the_conversation(store: ConversationStore, owner: str) -> None:
    inputs = {"部门": "安保", "层": 1}
    first = store.start_message(
        user=owner, query="  监控中心的\n备用钥匙放在哪里？请详细说明一下取用流程", inputs=inputs
    )
    assert first.status == "running" and not first.failed and first.answer == ""
    assert first.user == owner and first.inputs == inputs and first.chunk_metadata == []
    conv = store.get_conversation(first.conversation_id, owner)
    assert conv is not None
    assert conv.name == "监控中心的 备用钥匙放在哪里？请详细说明"  # whitespace collapsed, 20 chars
    assert conv.inputs == inputs and conv.created_at == first.created_at
    second = store.start_message(
        user=owner, query="然后呢？", inputs={}, conversation_id=first.conversation_id
    )
    assert second.conversation_id == first.conversation_id and second.id != first.id
    assert [m.id for m in store.conversation_messages(first.conversation_id)] == [
        first.id,
        second.id,
    ]


def test_chunk_metadata_and_outcome_round_trip(store: ConversationStore, owner: str) -> None:
    record = store.start_message(user=owner, query="备用钥匙在哪？", inputs={})
    store.set_chunks(record.id, CHUNKS)
    # Plan B: available while the answer is still running
    running = store.get_message(record.id, owner)
    assert running is not None and running.status == "running"
    assert running.chunk_metadata == CHUNKS
    resources = [{"position": 1, "document_name": "control-room.md", "score": 0.87}]
    metadata = {
        "retriever_resources": resources,
        "gcite": {"backend": "extractive", "cited_ids": ["1"], "invalid_ids": ["9"]},
    }
    store.finish_message(
        record.id,
        answer="备用钥匙在三号保险柜[C:1]。",
        status="normal",
        cited_ids=["1"],
        metadata=metadata,
    )
    done = store.get_message(record.id, owner)
    assert done is not None
    assert done.answer == "备用钥匙在三号保险柜[C:1]。"
    assert (done.status, done.failed, done.error) == ("normal", False, None)
    assert done.chunk_metadata == CHUNKS and done.retriever_resources == resources
    assert done.cited_ids == ["1"] and done.metadata == metadata


def test_failed_and_stopped_messages(store: ConversationStore, owner: str) -> None:
    first = store.start_message(user=owner, query="第一问", inputs={})
    conv = first.conversation_id
    store.finish_message(first.id, answer="半句话[C", status="failed", error="LLMError: 连接中断")
    failed = store.get_message(first.id, owner)
    assert failed is not None
    assert (failed.status, failed.failed) == ("failed", True)
    assert failed.answer == "半句话[C" and failed.error == "LLMError: 连接中断"
    second = store.start_message(user=owner, query="第二问", inputs={}, conversation_id=conv)
    store.finish_message(second.id, answer="部分", status="stopped", error="client disconnected")
    stopped = store.get_message(second.id, owner)
    assert stopped is not None and (stopped.status, stopped.failed) == ("stopped", False)
    running = store.start_message(user=owner, query="第三问", inputs={}, conversation_id=conv)
    # history: finished turns only (failed ones included; the service leaves them out)
    assert [m.id for m in store.history(conv)] == [first.id, second.id]
    assert [m.id for m in store.history(conv, limit=1)] == [second.id]
    assert [m.id for m in store.conversation_messages(conv)] == [first.id, second.id, running.id]


def test_messages_page_backwards_as_the_api_does(store: ConversationStore, owner: str) -> None:
    first = store.start_message(user=owner, query="问题 0", inputs={})
    conv = first.conversation_id
    ids = [first.id] + [
        store.start_message(user=owner, query=f"问题 {i}", inputs={}, conversation_id=conv).id
        for i in range(1, 7)
    ]
    page, has_more = store.list_messages(conv, limit=3)
    assert [m.id for m in page] == ids[4:] and has_more
    page, has_more = store.list_messages(conv, first_id=page[0].id, limit=3)
    assert [m.id for m in page] == ids[1:4] and has_more
    page, has_more = store.list_messages(conv, first_id=page[0].id, limit=3)
    assert [m.id for m in page] == ids[:1] and not has_more
    everything, has_more = store.list_messages(conv, limit=100)
    assert [m.id for m in everything] == ids and not has_more
    assert [m.query for m in everything] == [f"问题 {i}" for i in range(7)]
    other = store.start_message(user=owner, query="别的会话", inputs={})
    with pytest.raises(KeyError):
        store.list_messages(conv, first_id=other.id)
    with pytest.raises(KeyError):
        store.list_messages(conv, first_id="no-such-message")


def test_conversations_page_most_recent_first(store: ConversationStore, owner: str) -> None:
    convs = [store.start_message(user=owner, query=f"会话{i}", inputs={}) for i in range(5)]
    # distinct update times (newest: 2) and a tie (0 and 4) broken by id, as the store orders
    times = [1_700_000_100, 1_700_000_300, 1_700_000_500, 1_700_000_200, 1_700_000_100]
    with store.engine.begin() as connection:
        for conv, when in zip(convs, times, strict=True):
            connection.execute(
                update(_CONVERSATIONS)
                .where(_CONVERSATIONS.c.id == conv.conversation_id)
                .values(updated_at=when)
            )
    tied = sorted([convs[0].conversation_id, convs[4].conversation_id], reverse=True)
    expected = [convs[i].conversation_id for i in (2, 1, 3)] + tied
    seen: list[str] = []
    last_id: str | None = None
    pages = 0
    while True:
        page, has_more = store.list_conversations(owner, last_id=last_id, limit=2)
        seen += [c.id for c in page]
        pages += 1
        if not has_more:
            break
        last_id = page[-1].id
    assert seen == expected and pages == 3
    top = store.list_conversations(owner, limit=1)[0][0]
    assert top.name == "会话2" and top.updated_at == 1_700_000_500
    # a new turn moves its conversation to the top
    store.start_message(user=owner, query="再问", inputs={}, conversation_id=tied[-1])
    assert store.list_conversations(owner, limit=1)[0][0].id == tied[-1]
    # times after 2038 (beyond 32-bit integers) are stored as they are
    year_2100 = 4_102_444_800
    with store.engine.begin() as connection:
        connection.execute(
            update(_CONVERSATIONS)
            .where(_CONVERSATIONS.c.id == tied[-1])
            .values(updated_at=year_2100, created_at=year_2100)
        )
    late = store.get_conversation(tied[-1], owner)
    assert late is not None and late.updated_at == late.created_at == year_2100
    with pytest.raises(KeyError):
        store.list_conversations(owner, last_id="no-such-conversation")


def test_conversations_are_scoped_by_key_and_user(store: ConversationStore) -> None:
    user = f"shared-{uuid.uuid4().hex[:8]}"
    guard, visitor = _owner("key-guard", user), _owner("key-visitor", user)
    other_user = _owner("key-guard", user + "-other")
    record = store.start_message(user=guard, query="钥匙在哪？", inputs={})
    store.set_chunks(record.id, CHUNKS)
    conv = record.conversation_id
    for stranger in (visitor, other_user):
        assert store.get_conversation(conv, stranger) is None
        assert store.get_message(record.id, stranger) is None
        assert store.list_conversations(stranger) == ([], False)
        with pytest.raises(KeyError):
            store.start_message(user=stranger, query="再说一遍", inputs={}, conversation_id=conv)
        with pytest.raises(KeyError):
            store.list_conversations(stranger, last_id=conv)
    # the refused turns left nothing behind
    assert [m.id for m in store.conversation_messages(conv)] == [record.id]
    mine = store.get_message(record.id, guard)
    assert mine is not None and mine.chunk_metadata == CHUNKS
    assert [c.id for c in store.list_conversations(guard)[0]] == [conv]


def test_unknown_and_odd_ids_are_not_found(store: ConversationStore, owner: str) -> None:
    long_id = "x" * 300  # longer than the id columns: a miss, not a database error
    for odd in (long_id, "不存在", "'; DROP TABLE gcite_messages; --", "a\x00b"):
        assert store.get_conversation(odd, owner) is None
        assert store.get_message(odd) is None
        with pytest.raises(KeyError):
            store.start_message(user=owner, query="问", inputs={}, conversation_id=odd)
    store.set_chunks("no-such-message", CHUNKS)  # ignored
    store.finish_message("no-such-message", answer="", status="normal")  # ignored
    assert store.list_conversations(owner) == ([], False)
    assert store.list_conversations(owner + "\x00") == ([], False)


def test_nul_characters_are_stored_as_replacement_characters(
    store: ConversationStore, owner: str
) -> None:
    # PostgreSQL text cannot hold NUL: both databases store U+FFFD instead
    odd_owner = owner + "\x00"
    record = store.start_message(user=odd_owner, query="钥匙\x00在哪", inputs={"k": "v\x00"})
    conv = record.conversation_id
    store.set_chunks(record.id, [{"id": "1", "content": "内容\x00"}])
    store.finish_message(record.id, answer="答\x00案", status="failed", error="错\x00误")
    stored = store.get_message(record.id, odd_owner)
    assert stored is not None
    assert (stored.query, stored.answer, stored.error) == (
        "钥匙\ufffd在哪",
        "答\ufffd案",
        "错\ufffd误",
    )
    assert stored.user == owner + "\ufffd"
    assert stored.inputs == {"k": "v\x00"}  # JSON keeps it (escaped as \u0000)
    assert stored.chunk_metadata == [{"id": "1", "content": "内容\x00"}]
    found = store.get_conversation(conv, odd_owner)
    assert found is not None and found.name == "钥匙\ufffd在哪"
    assert [c.id for c in store.list_conversations(odd_owner)[0]] == [conv]
    assert store.get_conversation(conv, owner) is None


def test_concurrent_turns_get_distinct_positions(store: ConversationStore, owner: str) -> None:
    first = store.start_message(user=owner, query="第 0 轮", inputs={})
    conv = first.conversation_id
    workers = 8
    barrier = threading.Barrier(workers)
    errors: list[BaseException] = []

    def turn(i: int) -> None:
        try:
            barrier.wait()
            store.start_message(user=owner, query=f"第 {i} 轮", inputs={}, conversation_id=conv)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=turn, args=(i,)) for i in range(1, workers + 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    # every turn has its own position: paging one by one reaches each message exactly once
    walked: list[str] = []
    page, has_more = store.list_messages(conv, limit=1)
    walked += [m.id for m in page]
    while has_more:
        page, has_more = store.list_messages(conv, first_id=page[0].id, limit=1)
        walked += [m.id for m in page]
    assert len(walked) == workers + 1 and len(set(walked)) == workers + 1
    assert walked[-1] == first.id


def test_stop_records_are_taken_once_and_stale_ones_dropped(
    store: ConversationStore, owner: str
) -> None:
    tag = uuid.uuid4().hex[:8]  # the PostgreSQL database is shared: task ids of this test
    asked, other, stale, stale_asked = (f"{name}-{tag}" for name in ("a", "o", "s", "sa"))
    store.request_stop(asked, owner)
    store.request_stop(asked, owner)  # asked twice: one record
    store.request_stop(asked, owner + "-2")
    for task_id in (other, stale, stale_asked):
        store.request_stop(task_id, owner)
    with store.engine.begin() as connection:
        connection.execute(
            update(_STOPS)
            .where(_STOPS.c.task_id.in_([stale, stale_asked]))
            .values(created_at=int(time.time()) - 3601)
        )
    taken = store.take_stops([asked, stale_asked, "no-such-task"])
    assert sorted(taken) == [(asked, owner), (asked, owner + "-2"), (stale_asked, owner)]
    assert store.take_stops([asked, stale_asked]) == []  # taken once
    # a record of another run stays until asked for; one older than an hour is dropped
    assert store.take_stops([other, stale]) == [(other, owner)]
    assert store.take_stops([]) == []


# ------------------------------------------------------- end to end on PostgreSQL

QUESTION = "监控中心的备用钥匙放在哪里？"


@pytest.fixture(scope="module")
def pg_service(
    role_kb: Path, llm_standin: OpenAIStandin, postgres_url: str
) -> Iterator[LiveServer]:
    """The chat service (LLM stand-in, the role KB) storing conversations in PostgreSQL."""
    settings = Settings.from_keys(
        data_dir=role_kb,
        database_url=postgres_url,
        dataset="服务测试库",
        top_k=3,
        app_keys=[ApiKey("key-guard", ("安保主管",)), ApiKey("key-visitor", ())],
        llm_base_url=llm_standin.base_url,
        llm_model="standin-model",
        llm_api_key="sk-test",
        ping_interval_s=0.05,
        kb_timeout_s=120.0,  # a hang guard
    )
    with run_service(settings) as live:
        yield live


@pytest.mark.asyncio(loop_scope="session")
async def test_chat_end_to_end_on_postgresql(
    pg_service: LiveServer, llm: OpenAIStandin, client: httpx.AsyncClient, postgres_url: str
) -> None:
    base, headers = pg_service.base_url, pg_service.headers()
    user = f"pg-{uuid.uuid4().hex[:8]}"
    llm.push(Script.text("备用钥匙在三号保险柜[C:1]。", size=3))
    first = await client_view(
        client, base + "/v1/chat-messages", body(QUESTION, user=user), headers
    )
    assert first.raw_answer == "备用钥匙在三号保险柜[C:1]。" and first.finished
    assert first.chunk_metadata and first.citations
    conv = first.conversation_id
    # a second turn whose model connection drops: stored as failed with the partial text
    # (the follow-up's condense-question call comes first and gets its own answer)
    llm.push(Script.text("领取门禁卡之后呢？"))
    llm.push(Script(deltas=["登记后", "领取门禁卡", "[C:1]。"], drop_after=2))
    second = await client_view(
        client,
        base + "/v1/chat-messages",
        body("然后呢？", user=user, conversation_id=conv),
        headers,
    )
    assert second.conversation_id == conv and second.error is not None and not second.finished
    # the rows really are in PostgreSQL: read them back with a store of our own
    store = ConversationStore(postgres_url)
    try:
        rows = store.conversation_messages(conv)
    finally:
        store.close()
    assert [r.query for r in rows] == [QUESTION, "然后呢？"]
    assert rows[0].status == "normal" and rows[0].chunk_metadata == first.chunk_metadata
    assert rows[1].status == "failed" and rows[1].failed and rows[1].answer == "登记后领取门禁卡"
    # history, conversations and Plan B through the API
    page = await client.get(
        base + "/v1/messages", params={"conversation_id": conv, "user": user}, headers=headers
    )
    data = page.json()["data"]
    assert [m["id"] for m in data] == [first.message_id, second.message_id]
    assert data[0]["answer"] == "备用钥匙在三号保险柜[C:1]。" and data[0]["status"] == "normal"
    assert data[1]["status"] == "error" and data[1]["failed"] is True
    older = await client.get(
        base + "/v1/messages",
        params={"conversation_id": conv, "user": user, "first_id": second.message_id},
        headers=headers,
    )
    assert [m["id"] for m in older.json()["data"]] == [first.message_id]
    convs = await client.get(base + "/v1/conversations", params={"user": user}, headers=headers)
    listed = convs.json()["data"]
    assert [c["id"] for c in listed] == [conv] and listed[0]["name"] == QUESTION
    plan_b = await client.get(
        f"{base}/v1/messages/{first.message_id}/chunk-metadata",
        params={"user": user},
        headers=headers,
    )
    assert plan_b.json()["chunk_metadata"] == first.chunk_metadata
    assert plan_b.json()["cited_ids"] == ["1"]
    by_conv = await client.get(
        f"{base}/v1/conversations/{conv}/chunk-metadata", params={"user": user}, headers=headers
    )
    assert [m["message_id"] for m in by_conv.json()["data"]] == [
        first.message_id,
        second.message_id,
    ]
    # another key, same user string: not found
    visitor = pg_service.headers("key-visitor")
    hidden = await client.get(
        f"{base}/v1/messages/{first.message_id}/chunk-metadata",
        params={"user": user},
        headers=visitor,
    )
    assert hidden.status_code == 404 and hidden.json()["code"] == "not_found"
    # a NUL in an id or user is a plain miss, as on SQLite (PostgreSQL text has no NUL)
    for params in (
        {"conversation_id": "a\x00b", "user": user},
        {"conversation_id": conv, "user": "\x00"},
    ):
        odd = await client.get(base + "/v1/messages", params=params, headers=headers)
        assert odd.status_code == 404 and odd.json()["code"] == "not_found"
    nobody = await client.get(base + "/v1/conversations", params={"user": "\x00"}, headers=headers)
    assert nobody.status_code == 200 and nobody.json()["data"] == []


# -- Dify's conversation endpoints: feedback, rename, delete, sort_by -----------------------------


def test_feedback_is_stored_with_the_message(store: ConversationStore, owner: str) -> None:
    record = store.start_message(user=owner, query="访客在哪里登记？", inputs={})
    assert store.get_message(record.id, owner).feedback is None  # type: ignore[union-attr]
    assert store.set_feedback(record.id, owner, "like", "引用准确")
    assert store.get_message(record.id, owner).feedback == "like"  # type: ignore[union-attr]
    assert store.set_feedback(record.id, owner, "dislike")
    rows, _ = store.list_messages(record.conversation_id)
    assert [r.feedback for r in rows] == ["dislike"]
    assert store.set_feedback(record.id, owner, None)  # revoked
    assert store.get_message(record.id, owner).feedback is None  # type: ignore[union-attr]
    assert not store.set_feedback(record.id, owner + "-other", "like")
    assert not store.set_feedback("no-such-message", owner, "like")


def test_rename_and_auto_generate(store: ConversationStore, owner: str) -> None:
    first = store.start_message(
        user=owner, query="  访客车辆  停在哪里？请详细说明停车收费标准和时间", inputs={}
    )
    store.start_message(
        user=owner, query="第二个问题", inputs={}, conversation_id=first.conversation_id
    )
    renamed = store.rename_conversation(first.conversation_id, owner, "停车")
    assert renamed is not None and renamed.name == "停车"
    assert store.get_conversation(first.conversation_id, owner).name == "停车"  # type: ignore[union-attr]
    auto = store.rename_conversation(first.conversation_id, owner, None)
    assert auto is not None and auto.name == "访客车辆 停在哪里？请详细说明停车收费标"
    assert store.rename_conversation(first.conversation_id, owner + "-other", "x") is None


def test_delete_removes_the_conversation_messages_and_feedback(
    store: ConversationStore, owner: str
) -> None:
    kept = store.start_message(user=owner, query="保留", inputs={})
    gone = store.start_message(user=owner, query="删除", inputs={})
    store.set_feedback(gone.id, owner, "like")
    assert not store.delete_conversation(gone.conversation_id, owner + "-other")
    assert store.delete_conversation(gone.conversation_id, owner)
    assert store.get_conversation(gone.conversation_id, owner) is None
    assert store.get_message(gone.id) is None
    assert store.list_messages(gone.conversation_id) == ([], False)
    assert not store.delete_conversation(gone.conversation_id, owner)
    assert store.get_message(kept.id, owner) is not None
    # a message id that comes back (no reuse in practice) starts without the old rating
    with store.engine.connect() as connection:
        ratings = select(_FEEDBACKS).where(_FEEDBACKS.c.message_id == gone.id)
        assert connection.execute(ratings).all() == []


def test_conversations_sort_by_and_page_in_that_order(store: ConversationStore, owner: str) -> None:
    ids = [store.start_message(user=owner, query=q, inputs={}).conversation_id for q in "ABC"]
    times = {ids[0]: (100, 300), ids[1]: (200, 200), ids[2]: (300, 100)}
    with store.engine.begin() as connection:
        for cid, (created, updated) in times.items():
            connection.execute(
                update(_CONVERSATIONS)
                .where(_CONVERSATIONS.c.id == cid)
                .values(created_at=created, updated_at=updated)
            )

    def order(field: str, descending: bool, **page: Any) -> list[str]:
        rows, _ = store.list_conversations(owner, sort_by=field, descending=descending, **page)
        return [r.id for r in rows]

    assert order("updated_at", True) == ids  # the default order: most recently updated first
    assert order("created_at", False) == ids
    assert order("created_at", True) == ids[::-1]
    assert order("updated_at", False) == ids[::-1]
    rows, more = store.list_conversations(owner, sort_by="created_at", descending=False, limit=1)
    assert [r.id for r in rows] == ids[:1] and more
    assert order("created_at", False, last_id=ids[0]) == ids[1:]
    assert order("updated_at", False, last_id=ids[1]) == ids[:1]
    with pytest.raises(ValueError):
        store.list_conversations(owner, sort_by="name")


# --------------------------------------------------------------------------- migrations

LEGACY = MetaData()
"""The conversation store's schema as ``create_all`` made it before migrations existed
(a frozen copy of the ORM models of that time)."""
Table(
    "gcite_conversations",
    LEGACY,
    Column("id", String(36), primary_key=True),
    Column("user", String(255), nullable=False, index=True),
    Column("name", String(255), nullable=False),
    Column("inputs", JSON, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False, index=True),
    Column("seq", Integer, nullable=False),
)
Table(
    "gcite_messages",
    LEGACY,
    Column("id", String(36), primary_key=True),
    Column("conversation_id", String(36), nullable=False, index=True),
    Column("user", String(255), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("query", Text, nullable=False),
    Column("inputs", JSON, nullable=False),
    Column("answer", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("failed", Boolean, nullable=False),
    Column("error", Text, nullable=True),
    Column("chunk_metadata", JSON, nullable=False),
    Column("retriever_resources", JSON, nullable=False),
    Column("cited_ids", JSON, nullable=False),
    Column("message_metadata", JSON, nullable=False),
    Column("created_at", BigInteger, nullable=False),
)


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL of an empty database: a new SQLite file, or a new PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fresh.sqlite3'}"
    url: str = request.getfixturevalue("postgres_url")
    schema = f"mig_{uuid.uuid4().hex[:10]}"
    engine = create_engine(sqlalchemy_url(url))
    with engine.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    engine.dispose()
    return f"{url}?options=-csearch_path%3D{schema}"


def _indexes(engine: Any) -> set[str]:
    return {str(i["name"]) for i in inspect(engine).get_indexes("gcite_messages")}


def test_a_database_of_the_create_all_schema_is_upgraded(empty_url: str, owner: str) -> None:
    legacy = create_engine(sqlalchemy_url(empty_url))
    LEGACY.create_all(legacy)
    with legacy.begin() as connection:
        connection.execute(
            LEGACY.tables["gcite_conversations"].insert(),
            {"id": "c-old", "user": owner, "name": "旧会话", "inputs": {"k": "v"}}
            | {"created_at": 1, "updated_at": 1, "seq": 1},
        )
        connection.execute(
            LEGACY.tables["gcite_messages"].insert(),
            {"id": "m-old", "conversation_id": "c-old", "user": owner, "seq": 1}
            | {"query": "旧问题", "inputs": {}, "answer": "旧回答[C:1]", "status": "normal"}
            | {"failed": False, "error": None, "chunk_metadata": CHUNKS, "cited_ids": ["1"]}
            | {"retriever_resources": [], "message_metadata": {}, "created_at": 1},
        )
    assert schema_revision(legacy) is None
    assert "ix_gcite_messages_conversation_seq" not in _indexes(legacy)
    legacy.dispose()

    store = ConversationStore(empty_url)
    try:
        assert schema_revision(store.engine) == "0006"
        assert "ix_gcite_messages_conversation_seq" in _indexes(store.engine)
        old = store.get_message("m-old", owner)
        assert old is not None and old.answer == "旧回答[C:1]" and old.chunk_metadata == CHUNKS
        new = store.start_message(user=owner, query="新问题", inputs={}, conversation_id="c-old")
        rows, _ = store.list_messages("c-old")
        assert [r.id for r in rows] == ["m-old", new.id]
    finally:
        store.close()
    again = ConversationStore(empty_url)  # opening an up-to-date database changes nothing
    try:
        assert schema_revision(again.engine) == "0006"
        assert len(again.list_messages("c-old")[0]) == 2
    finally:
        again.close()


def test_a_database_at_0004_keeps_its_answers_and_gains_the_shown_answer(
    empty_url: str, owner: str
) -> None:
    """Revision 0005 adds ``shown_answer`` (what a ``numbers`` client saw) beside ``answer``."""
    from alembic import command

    from gcite.service.store import _alembic_config

    engine = create_engine(sqlalchemy_url(empty_url))
    with engine.begin() as connection:
        command.upgrade(_alembic_config(connection), "0004")
        connection.execute(
            text(
                'INSERT INTO gcite_conversations (id, "user", name, inputs, created_at,'
                " updated_at, seq) VALUES ('c-4', :user, '旧', '{}', 1, 1, 1)"
            ),
            {"user": owner},
        )
        connection.execute(
            text(
                'INSERT INTO gcite_messages (id, conversation_id, "user", seq, query, inputs,'
                " answer, status, failed, error, chunk_metadata, retriever_resources, cited_ids,"
                " message_metadata, created_at) VALUES ('m-4', 'c-4', :user, 1, '问', '{}',"
                " '答[C:1]', 'normal', false, NULL, '[]', '[]', '[\"1\"]', '{}', 1)"
            ),
            {"user": owner},
        )
    assert schema_revision(engine) == "0004"
    assert "shown_answer" not in {c["name"] for c in inspect(engine).get_columns("gcite_messages")}
    engine.dispose()

    store = ConversationStore(empty_url)
    try:
        assert schema_revision(store.engine) == "0006"
        old = store.get_message("m-4", owner)
        assert old is not None and (old.answer, old.shown_answer) == ("答[C:1]", None)
        new = store.start_message(user=owner, query="新", inputs={}, conversation_id="c-4")
        store.finish_message(new.id, answer="答[C:2]", shown_answer="答¹", status="normal")
        got = store.get_message(new.id, owner)
        assert got is not None and (got.answer, got.shown_answer) == ("答[C:2]", "答¹")
    finally:
        store.close()


def test_migrations_build_exactly_the_models_schema(empty_url: str) -> None:
    store = ConversationStore(empty_url)
    try:
        with store.engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"version_table": "gcite_alembic_version"}
            )
            assert compare_metadata(context, _METADATA) == []
    finally:
        store.close()


_NO_ALEMBIC = """
import sys
from gcite.service.store import ConversationStore
store = ConversationStore(sys.argv[1])
row = store.start_message(user="u", query="问", inputs={})
store.finish_message(row.id, answer="答", status="normal")
assert store.get_message(row.id, "u").answer == "答"
store.close()
# none is needed to open and use a migrated SQLite store
heavy = ("alembic", "sqlalchemy.orm", "sqlalchemy.dialects.postgresql")
print(sorted(m for m in sys.modules if m in heavy or m.startswith(tuple(h + "." for h in heavy))))
"""


def test_a_database_at_the_newest_schema_is_opened_without_alembic(tmp_path: Path) -> None:
    """The schema head the store checks is Alembic's own; a database already there is
    opened and used without importing Alembic (a fresh one is migrated with it), nor
    SQLAlchemy's ORM (the store's tables are Core tables) or its PostgreSQL dialect."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    assert ScriptDirectory.from_config(config).get_heads() == [SCHEMA_HEAD]
    url = f"sqlite:///{tmp_path / 'chat.sqlite3'}"
    runs = [
        subprocess.run(
            [sys.executable, "-c", _NO_ALEMBIC, url],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout.strip()
        for _ in range(2)
    ]
    assert runs[0] != "[]"  # the new database: migrated by Alembic
    assert runs[1] == "[]"  # at the head: none of them imported
    engine = create_engine(url)
    assert schema_revision(engine) == SCHEMA_HEAD
    engine.dispose()


def test_services_starting_together_migrate_one_after_the_other(empty_url: str) -> None:
    stores: list[ConversationStore] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            stores.append(ConversationStore(empty_url))
        except BaseException as exc:  # collected and reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == [], errors
        for store in stores:
            assert schema_revision(store.engine) == "0006"
    finally:
        for store in stores:
            store.close()


_OPEN_AT_GO = """
import sys, time
from pathlib import Path
from gcite.service.store import ConversationStore
print("ready", flush=True)
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
ConversationStore(sys.argv[1]).close()
"""


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_processes_starting_together_migrate_one_after_the_other(
    database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Several processes (the workers of ``gcite serve --workers N``) open one new
    database at the same moment: every one starts, and the schema is migrated once."""
    for round_ in range(3):
        if database == "sqlite":
            url = f"sqlite:///{tmp_path / f'shared-{round_}.sqlite3'}"
        else:
            base = request.getfixturevalue("postgres_url")
            schema = f"mig_{uuid.uuid4().hex[:10]}"
            engine = create_engine(sqlalchemy_url(base))
            with engine.begin() as connection:
                connection.execute(text(f"CREATE SCHEMA {schema}"))
            engine.dispose()
            url = f"{base}?options=-csearch_path%3D{schema}"
        go = tmp_path / f"go-{round_}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _OPEN_AT_GO, url, str(go)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        try:
            for proc in procs:  # every process imported, waiting for the same moment
                assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            go.touch()
            failures = [p.communicate(timeout=120)[1] for p in procs]
            assert [p.returncode for p in procs] == [0] * len(procs), failures
        finally:
            for proc in procs:
                proc.kill()
                proc.wait(timeout=60)
        store = ConversationStore(url)
        try:
            assert schema_revision(store.engine) == SCHEMA_HEAD
        finally:
            store.close()
