"""History endpoints (Dify shapes) and Plan B (platform design §2.3).

- ``GET /v1/messages?conversation_id&user&first_id&limit`` - a page of messages, oldest first;
- ``GET /v1/conversations?user&last_id&limit&sort_by`` - a page of conversations, by
  ``sort_by`` (``created_at``, ``-created_at``, ``updated_at``, default ``-updated_at``);
- ``GET /v1/messages/{message_id}/chunk-metadata`` and
  ``GET /v1/conversations/{conversation_id}/chunk-metadata`` - the merge node's
  ``chunk_metadata`` of a message / of every message of a conversation.

Every read is scoped to the caller's key and ``user``; hidden metadata never leaves; what
the key can no longer see is redacted (:mod:`gcite.service.visibility`). ``user`` is
optional on the two lists, as in Dify's spec: without it they read Dify's anonymous end
user ``DEFAULT-USER``.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from fastapi import APIRouter

from gcite.chatflow.nodes import without_hidden
from gcite.dify.history import conversation_item, cursor_page_body
from gcite.dify.service_api import (
    DEFAULT_USER,
    message_usage_fields,
    parse_sort_by,
    resource_items,
)
from gcite.service.deps import CallerDep, ConversationsDep, ResourcesDep
from gcite.service.errors import ApiError
from gcite.service.jsonbody import storable
from gcite.service.resources import Resources
from gcite.service.store import ConversationStore, MessageRecord
from gcite.service.visibility import kb_document_ids, redact_chunks, redact_message
from gcite.stream.styles import styled_answer


def _limit(raw: str | None) -> int:
    if raw is None or raw == "":
        return 20
    try:
        value = int(raw)
    except ValueError as exc:
        raise ApiError(400, "invalid_param", "limit must be an integer.") from exc
    if not 1 <= value <= 100:
        raise ApiError(400, "invalid_param", "limit must be between 1 and 100.")
    return value


def _required(value: str | None, name: str) -> str:
    if not value:
        raise ApiError(400, "invalid_param", f"{name} is required.")
    return value


def message_json(record: MessageRecord, citation_style: str = "markers") -> dict[str, Any]:
    """A stored message in Dify's ``GET /v1/messages`` item shape (plus ``failed``).

    Spec ``ConversationMessageItem``: ``feedback`` ``{"rating"}`` or null, spec-typed
    ``retriever_resources`` (:func:`gcite.dify.service_api.resource_items`) and the token,
    latency and price fields of the answer's usage. ``answer`` in the caller's
    ``citation_style``: the stored form the client saw, else rendered from the raw answer.
    """
    answer = record.answer
    if citation_style != "markers":
        known = [str(c.get("id")) for c in record.chunk_metadata]
        answer = record.shown_answer or styled_answer(record.answer, known, citation_style)
    resources = without_hidden(record.retriever_resources)
    return {
        "id": record.id,
        "conversation_id": record.conversation_id,
        "parent_message_id": None,
        "inputs": storable(record.inputs, {}),
        "query": record.query,
        "answer": answer,
        "message_files": [],
        "feedback": {"rating": record.feedback} if record.feedback else None,
        "retriever_resources": resource_items(
            resources, message_id=record.id, created_at=record.created_at
        ),
        "agent_thoughts": [],
        "extra_contents": [],
        "created_at": record.created_at,
        "status": "error" if record.failed else "normal",
        "error": record.error,
        **message_usage_fields(record.metadata),
        "failed": record.failed,
        "gcite_status": record.status,
    }


def chunk_metadata_json(record: MessageRecord) -> dict[str, Any]:
    """Plan B: the chunk metadata of one message (platform design §2.3)."""
    return {
        "message_id": record.id,
        "conversation_id": record.conversation_id,
        "chunk_count": len(record.chunk_metadata),
        "chunk_metadata": without_hidden(record.chunk_metadata),
        "cited_ids": record.cited_ids,
        "status": record.status,
        # the citation verifier's report (support score, supporting sentence), when stored
        "gcite_verification": (record.metadata or {}).get("gcite_verification"),
    }


async def _visible_now(
    resources: Resources, rows: list[MessageRecord], roles: tuple[str, ...]
) -> set[str]:
    """The knowledge documents cited in ``rows`` that ``roles`` may see now (fails closed:
    :meth:`Resources.visible_documents`)."""
    ids = list(dict.fromkeys(d for r in rows for d in kb_document_ids(r.chunk_metadata)))
    if not ids:
        return set()
    return await asyncio.to_thread(resources.visible_documents, ids, roles)


async def _chunks_seen(
    resources: Resources, rows: list[MessageRecord], roles: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Plan B bodies of ``rows``, redacted for ``roles`` now."""
    seen = await _visible_now(resources, rows, roles)
    return [redact_chunks(chunk_metadata_json(r), seen) for r in rows]


async def _check_owner(store: ConversationStore, conversation_id: str, owner: str) -> None:
    """404 unless the conversation exists and is ``owner``'s."""
    if await store.call(store.get_conversation, conversation_id, owner) is None:
        raise ApiError(404, "not_found", "Conversation Not Exists.")


async def messages(
    caller: CallerDep,
    store: ConversationsDep,
    resources: ResourcesDep,
    conversation_id: str | None = None,
    user: str | None = None,
    limit: str | None = None,
    first_id: str | None = None,
) -> dict[str, Any]:
    """``GET /v1/messages``."""
    conversation = _required(conversation_id, "conversation_id")
    owner = caller.owner(user or DEFAULT_USER)
    size = _limit(limit)
    await _check_owner(store, conversation, owner)
    try:
        rows, has_more = await store.call(
            store.list_messages, conversation, first_id=first_id or None, limit=size
        )
    except KeyError as exc:
        raise ApiError(404, "not_found", "First Message Not Exists.") from exc
    seen = await _visible_now(resources, rows, caller.roles)
    style = caller.citation_style
    data = [redact_message(message_json(r, style), r.chunk_metadata, seen) for r in rows]
    return cursor_page_body(data, limit=size, has_more=has_more)


async def conversations(
    caller: CallerDep,
    store: ConversationsDep,
    user: str | None = None,
    limit: str | None = None,
    last_id: str | None = None,
    sort_by: str | None = None,
) -> dict[str, Any]:
    """``GET /v1/conversations``."""
    owner = caller.owner(user or DEFAULT_USER)
    size = _limit(limit)
    try:
        sort_field, descending = parse_sort_by(sort_by)
    except ValueError as exc:
        raise ApiError(400, "invalid_param", str(exc)) from exc
    try:
        rows, has_more = await store.call(
            partial(
                store.list_conversations,
                owner,
                last_id=last_id or None,
                limit=size,
                sort_by=sort_field,
                descending=descending,
            )
        )
    except KeyError as exc:
        raise ApiError(404, "not_found", "Last Conversation Not Exists.") from exc
    data = [
        conversation_item(
            id=c.id,
            name=c.name,
            inputs=storable(c.inputs, {}),
            created_at=c.created_at,
            updated_at=c.updated_at,
        )
        for c in rows
    ]
    return cursor_page_body(data, limit=size, has_more=has_more)


async def message_chunks(
    message_id: str,
    caller: CallerDep,
    store: ConversationsDep,
    resources: ResourcesDep,
    user: str | None = None,
) -> dict[str, Any]:
    """``GET /v1/messages/{message_id}/chunk-metadata``."""
    owner = caller.owner(_required(user, "user"))
    record = await store.call(store.get_message, message_id, owner)
    if record is None:
        raise ApiError(404, "not_found", "Message Not Exists.")
    return (await _chunks_seen(resources, [record], caller.roles))[0]


async def conversation_chunks(
    conversation_id: str,
    caller: CallerDep,
    store: ConversationsDep,
    resources: ResourcesDep,
    user: str | None = None,
) -> dict[str, Any]:
    """``GET /v1/conversations/{conversation_id}/chunk-metadata``."""
    await _check_owner(store, conversation_id, caller.owner(_required(user, "user")))
    rows = await store.call(store.conversation_messages, conversation_id)
    data = await _chunks_seen(resources, rows, caller.roles)
    return {"conversation_id": conversation_id, "data": data}


def conversations_router() -> APIRouter:
    """The history and Plan B endpoints (module docstring) on the app's state
    (:mod:`gcite.service.deps`)."""
    router = APIRouter()
    router.add_api_route("/v1/messages", messages, methods=["GET"])
    router.add_api_route("/v1/conversations", conversations, methods=["GET"])
    router.add_api_route(
        "/v1/messages/{message_id}/chunk-metadata", message_chunks, methods=["GET"]
    )
    router.add_api_route(
        "/v1/conversations/{conversation_id}/chunk-metadata",
        conversation_chunks,
        methods=["GET"],
    )
    return router


__all__ = ["chunk_metadata_json", "conversations_router", "message_json"]
