"""Dify Service API history bodies: cursor-paged lists and conversation items.

``GET /v1/conversations`` and ``GET /v1/messages`` answer ``{"limit", "has_more",
"data"}`` (Dify's spec: ``ConversationsListResponse``, ``MessagesListResponse``), paged by
the last / first id rather than by page number (the Knowledge API's lists are numbered
pages: :func:`gcite.dify.knowledge_api.page_body`). Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def cursor_page_body(
    data: Sequence[Mapping[str, Any]], *, limit: int, has_more: bool
) -> dict[str, Any]:
    """One page of a cursor-paged list: ``{"limit", "has_more", "data"}``."""
    return {"limit": limit, "has_more": has_more, "data": list(data)}


def conversation_item(
    *, id: str, name: str, inputs: Any, created_at: int, updated_at: int
) -> dict[str, Any]:
    """A conversation in Dify's list item shape (``status`` ``normal``, no introduction)."""
    return {
        "id": id,
        "name": name,
        "inputs": inputs,
        "status": "normal",
        "introduction": "",
        "created_at": created_at,
        "updated_at": updated_at,
    }


__all__ = ["conversation_item", "cursor_page_body"]
