"""History endpoints (Dify shapes) and Plan B (platform design §2.3).

- ``GET /v1/messages?conversation_id&user&first_id&limit`` - a page of messages, oldest first;
- ``GET /v1/conversations?user&last_id&limit&sort_by`` - a page of conversations, by
  ``sort_by`` (``created_at``, ``-created_at``, ``updated_at``, default ``-updated_at``);
- ``GET /v1/messages/{message_id}/chunk-metadata`` and
  ``GET /v1/conversations/{conversation_id}/chunk-metadata`` - the merge node's
  ``chunk_metadata`` of a message / of every message of a conversation.

Every read is scoped to the caller's key and ``user``; hidden metadata never leaves.
``user`` is optional on the two lists, as in Dify's spec: without it they read Dify's
anonymous end user ``DEFAULT-USER``.
"""

from __future__ import annotations

import asyncio
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
    }


def build_conversations_router(store: ConversationStore, caller_of: Any) -> APIRouter:
    """The history and Plan B endpoints; ``caller_of(request) -> Caller`` (401)."""
    router = APIRouter()

    @router.get("/v1/messages")
    async def messages(request: Request) -> dict[str, Any]:
        caller: Caller = caller_of(request)
        conversation_id = _required(request, "conversation_id")
        user = caller.owner(request.query_params.get("user") or DEFAULT_USER)
        limit = _limit(request.query_params.get("limit"))
        first_id = request.query_params.get("first_id") or None
        conv = await asyncio.to_thread(store.get_conversation, conversation_id, user)
        if conv is None:
            raise ApiError(404, "not_found", "Conversation Not Exists.")
        try:
            rows, has_more = await asyncio.to_thread(
                store.list_messages, conversation_id, first_id=first_id, limit=limit
            )
        except KeyError as exc:
            raise ApiError(404, "not_found", "First Message Not Exists.") from exc
        return {"limit": limit, "has_more": has_more, "data": [message_json(r) for r in rows]}

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
            rows, has_more = await asyncio.to_thread(
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
        record = await asyncio.to_thread(store.get_message, message_id, user)
        if record is None:
            raise ApiError(404, "not_found", "Message Not Exists.")
        return chunk_metadata_json(record)

    @router.get("/v1/conversations/{conversation_id}/chunk-metadata")
    async def conversation_chunks(conversation_id: str, request: Request) -> dict[str, Any]:
        caller: Caller = caller_of(request)
        user = caller.owner(_required(request, "user"))
        conv = await asyncio.to_thread(store.get_conversation, conversation_id, user)
        if conv is None:
            raise ApiError(404, "not_found", "Conversation Not Exists.")
        rows = await asyncio.to_thread(store.conversation_messages, conversation_id)
        return {"conversation_id": conversation_id, "data": [chunk_metadata_json(r) for r in rows]}

    return router


__all__ = ["build_conversations_router", "chunk_metadata_json", "message_json"]
