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
from collections.abc import Callable
from functools import partial
from typing import Any

from fastapi import APIRouter, Request

from gcite.chatflow.nodes import without_hidden
from gcite.dify.service_api import (
    DEFAULT_USER,
    message_usage_fields,
    parse_sort_by,
    resource_items,
)
from gcite.service.auth import Caller
from gcite.service.errors import ApiError
from gcite.service.jsonbody import storable
from gcite.service.store import ConversationStore, MessageRecord
from gcite.service.visibility import kb_document_ids, redact_chunks, redact_message


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


def _required(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise ApiError(400, "invalid_param", f"{name} is required.")
    return value


def message_json(record: MessageRecord) -> dict[str, Any]:
    """A stored message in Dify's ``GET /v1/messages`` item shape (plus ``failed``).

    Spec ``ConversationMessageItem``: ``feedback`` ``{"rating"}`` or null, spec-typed
    ``retriever_resources`` (:func:`gcite.dify.service_api.resource_items`) and the token,
    latency and price fields of the answer's usage.
    """
    resources = without_hidden(record.retriever_resources)
    return {
        "id": record.id,
        "conversation_id": record.conversation_id,
        "parent_message_id": None,
        "inputs": storable(record.inputs, {}),
        "query": record.query,
        "answer": record.answer,
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


def build_conversations_router(
    store: ConversationStore,
    caller_of: Any,
    visible: Callable[[list[str], tuple[str, ...]], set[str]] | None = None,
) -> APIRouter:
    """The history and Plan B endpoints; ``caller_of(request) -> Caller`` (401).

    ``visible(document_ids, roles)``: the ids the roles may see now (blocking); stored
    answers and chunks of documents no longer visible are redacted
    (:mod:`gcite.service.visibility`). ``None``: nothing is visible (fail closed).
    """
    router = APIRouter()

    async def visible_now(rows: list[MessageRecord], roles: tuple[str, ...]) -> set[str]:
        ids = list(dict.fromkeys(d for r in rows for d in kb_document_ids(r.chunk_metadata)))
        if visible is None or not ids:
            return set()
        return await asyncio.to_thread(visible, ids, roles)

    @router.get("/v1/messages")
    async def messages(request: Request) -> dict[str, Any]:
        caller: Caller = caller_of(request)
        conversation_id = _required(request, "conversation_id")
        user = caller.owner(request.query_params.get("user") or DEFAULT_USER)
        limit = _limit(request.query_params.get("limit"))
        first_id = request.query_params.get("first_id") or None
        conv = await store.call(store.get_conversation, conversation_id, user)
        if conv is None:
            raise ApiError(404, "not_found", "Conversation Not Exists.")
        try:
            rows, has_more = await store.call(
                store.list_messages, conversation_id, first_id=first_id, limit=limit
            )
        except KeyError as exc:
            raise ApiError(404, "not_found", "First Message Not Exists.") from exc
        seen = await visible_now(rows, caller.roles)
        data = [redact_message(message_json(r), r.chunk_metadata, seen) for r in rows]
        return {"limit": limit, "has_more": has_more, "data": data}

    @router.get("/v1/conversations")
    async def conversations(request: Request) -> dict[str, Any]:
        caller: Caller = caller_of(request)
        user = caller.owner(request.query_params.get("user") or DEFAULT_USER)
        limit = _limit(request.query_params.get("limit"))
        last_id = request.query_params.get("last_id") or None
        try:
            sort_field, descending = parse_sort_by(request.query_params.get("sort_by"))
        except ValueError as exc:
            raise ApiError(400, "invalid_param", str(exc)) from exc
        try:
            rows, has_more = await store.call(
                partial(
                    store.list_conversations,
                    user,
                    last_id=last_id,
                    limit=limit,
                    sort_by=sort_field,
                    descending=descending,
                )
            )
        except KeyError as exc:
            raise ApiError(404, "not_found", "Last Conversation Not Exists.") from exc
        data = [
            {
                "id": c.id,
                "name": c.name,
                "inputs": storable(c.inputs, {}),
                "status": "normal",
                "introduction": "",
                "created_at": c.created_at,
                "updated_at": c.updated_at,
            }
            for c in rows
        ]
        return {"limit": limit, "has_more": has_more, "data": data}

    @router.get("/v1/messages/{message_id}/chunk-metadata")
    async def message_chunks(message_id: str, request: Request) -> dict[str, Any]:
        caller: Caller = caller_of(request)
        user = caller.owner(_required(request, "user"))
        record = await store.call(store.get_message, message_id, user)
        if record is None:
            raise ApiError(404, "not_found", "Message Not Exists.")
        seen = await visible_now([record], caller.roles)
        return redact_chunks(chunk_metadata_json(record), seen)

    @router.get("/v1/conversations/{conversation_id}/chunk-metadata")
    async def conversation_chunks(conversation_id: str, request: Request) -> dict[str, Any]:
        caller: Caller = caller_of(request)
        user = caller.owner(_required(request, "user"))
        conv = await store.call(store.get_conversation, conversation_id, user)
        if conv is None:
            raise ApiError(404, "not_found", "Conversation Not Exists.")
        rows = await store.call(store.conversation_messages, conversation_id)
        seen = await visible_now(rows, caller.roles)
        data = [redact_chunks(chunk_metadata_json(r), seen) for r in rows]
        return {"conversation_id": conversation_id, "data": data}

    return router


__all__ = ["build_conversations_router", "chunk_metadata_json", "message_json"]
