"""Dify's app and conversation endpoints beyond chat: a router answering as a Dify chatflow app.

Endpoints (``Authorization: Bearer <app key>``; bodies from :mod:`gcite.dify.service_api`,
docs/api.md "Dify compatibility"):

- ``GET /v1/parameters``, ``/v1/info``, ``/v1/meta``, ``/v1/site``: the app behind the key;
- ``POST /v1/messages/{id}/feedbacks``: ``{rating: like|dislike|null, user, content?}``,
  stored with the message; ``{"result": "success"}``;
- ``GET /v1/messages/{id}/suggested``: follow-up suggestions are off (400, after the
  message check, as Dify);
- ``POST /v1/conversations/{id}/name``: ``{name?, auto_generate?, user?}`` → the item;
- ``DELETE /v1/conversations/{id}``: ``{user?}`` → 204;
- ``GET /v1/conversations/{id}/variables``: always empty;
- ``POST /v1/files/upload``, ``/v1/audio-to-text``, ``/v1/text-to-audio``: the features are
  off; answered with Dify's error for that (nothing is stored).

``user`` is required where Dify requires it (feedback, suggested) and otherwise defaults
to Dify's ``DEFAULT-USER``. Conversations and messages of another key or user are
``404 not_found`` (``Conversation Not Exists.``, ``Message Not Exists.``).
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Request, Response

from gcite.dify.history import conversation_item
from gcite.dify.service_api import (
    DEFAULT_USER,
    NO_FILE,
    SPEECH_OFF,
    SUGGESTED_OFF,
    TOO_MANY_FILES,
    TTS_OFF,
    UPLOAD_OFF,
    ErrorSpec,
    info_body,
    meta_body,
    parameters_body,
    site_body,
    variables_body,
)
from gcite.service.chat import load_body, read_body
from gcite.service.deps import CallerDep, ConversationsDep
from gcite.service.errors import ApiError
from gcite.service.jsonbody import storable

#: Largest upload read before answering (Dify's default ``UPLOAD_FILE_SIZE_LIMIT``, 15 MB).
MAX_UPLOAD_BYTES = 15 * 1024 * 1024
_PART = re.compile(rb'content-disposition:[^\r\n]*\bname="([^"]*)"([^\r\n]*)', re.IGNORECASE)


def _off(spec: ErrorSpec) -> ApiError:
    status, code, message = spec
    return ApiError(status, code, message)


def _json_object(raw: bytes) -> dict[str, Any]:
    body = load_body(raw or b"{}")
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_param", "The request body must be a JSON object.")
    return body


def _user(value: Any, *, required: bool) -> str:
    if value is None or value == "":
        if required:
            raise ApiError(400, "invalid_param", "user is required.")
        return DEFAULT_USER
    if not isinstance(value, str) or len(value) > 200:
        raise ApiError(400, "invalid_param", "user must be a string of at most 200 characters.")
    return value


def upload_error(content_type: str, body: bytes) -> ErrorSpec:
    """What Dify answers to this upload when the app allows no file: the checks of its
    ``/files/upload`` in order — no ``file`` part, more than one file, then the type."""
    if "multipart/form-data" not in content_type.lower():
        return NO_FILE
    parts = _PART.findall(body)
    files = [rest for _name, rest in parts if b"filename=" in rest.lower()]
    if not any(name == b"file" for name, _rest in parts):
        return NO_FILE
    if len(files) > 1:
        return TOO_MANY_FILES
    return UPLOAD_OFF


async def parameters(caller: CallerDep) -> dict[str, Any]:
    """``GET /v1/parameters``."""
    return parameters_body(caller.key)


async def info(caller: CallerDep) -> dict[str, Any]:
    """``GET /v1/info``."""
    return info_body(caller.key)


async def meta(_caller: CallerDep) -> dict[str, Any]:
    """``GET /v1/meta``."""
    return meta_body()


async def site(caller: CallerDep) -> dict[str, Any]:
    """``GET /v1/site``."""
    return site_body(caller.key)


async def feedback(
    message_id: str, request: Request, caller: CallerDep, store: ConversationsDep
) -> dict[str, str]:
    """``POST /v1/messages/{message_id}/feedbacks``."""
    body = _json_object(await read_body(request))
    owner = caller.owner(_user(body.get("user"), required=True))
    rating = body.get("rating")
    if rating not in (None, "like", "dislike"):
        raise ApiError(400, "invalid_param", "rating must be like, dislike or null.")
    content = body.get("content")
    if content is not None and not isinstance(content, str):
        raise ApiError(400, "invalid_param", "content must be a string.")
    stored = await store.call(store.set_feedback, message_id, owner, rating, content)
    if not stored:
        raise ApiError(404, "not_found", "Message Not Exists.")
    return {"result": "success"}


async def suggested(
    message_id: str, caller: CallerDep, store: ConversationsDep, user: str | None = None
) -> dict[str, Any]:
    """``GET /v1/messages/{message_id}/suggested``: off (after the message check)."""
    owner = caller.owner(_user(user, required=True))
    if await store.call(store.get_message, message_id, owner) is None:
        raise ApiError(404, "not_found", "Message Not Exists.")
    raise _off(SUGGESTED_OFF)


async def rename(
    conversation_id: str, request: Request, caller: CallerDep, store: ConversationsDep
) -> dict[str, Any]:
    """``POST /v1/conversations/{conversation_id}/name``."""
    body = _json_object(await read_body(request))
    owner = caller.owner(_user(body.get("user"), required=False))
    auto = body.get("auto_generate", False)
    if not isinstance(auto, bool):
        raise ApiError(400, "invalid_param", "auto_generate must be a boolean.")
    name = body.get("name")
    if not auto and (not isinstance(name, str) or not name.strip()):
        raise ApiError(400, "invalid_param", "name is required.")
    new_name = None if auto else str(name).strip()[:255]
    renamed = await store.call(store.rename_conversation, conversation_id, owner, new_name)
    if renamed is None:
        raise ApiError(404, "not_found", "Conversation Not Exists.")
    return conversation_item(
        id=renamed.id,
        name=renamed.name,
        inputs=storable(renamed.inputs, {}),
        created_at=renamed.created_at,
        updated_at=renamed.updated_at,
    )


async def delete(
    conversation_id: str,
    request: Request,
    caller: CallerDep,
    store: ConversationsDep,
    user: str | None = None,
) -> Response:
    """``DELETE /v1/conversations/{conversation_id}`` (204); ``user`` in the body or the
    query."""
    body = _json_object(await read_body(request))
    owner = caller.owner(_user(body.get("user") or user, required=False))
    if not await store.call(store.delete_conversation, conversation_id, owner):
        raise ApiError(404, "not_found", "Conversation Not Exists.")
    return Response(status_code=204)


async def variables(
    conversation_id: str, caller: CallerDep, store: ConversationsDep, user: str | None = None
) -> dict[str, Any]:
    """``GET /v1/conversations/{conversation_id}/variables``: always empty."""
    owner = caller.owner(_user(user, required=False))
    if await store.call(store.get_conversation, conversation_id, owner) is None:
        raise ApiError(404, "not_found", "Conversation Not Exists.")
    return variables_body()


async def upload(request: Request, _caller: CallerDep) -> None:
    """``POST /v1/files/upload``: read (and drop) the upload, answer Dify's error."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_UPLOAD_BYTES:
        raise ApiError(413, "file_too_large", "File size exceeded.")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():  # nothing is stored
        size += len(chunk)
        if size > MAX_UPLOAD_BYTES:
            raise ApiError(413, "file_too_large", "File size exceeded.")
        chunks.append(chunk)
    raise _off(upload_error(request.headers.get("content-type", ""), b"".join(chunks)))


async def audio_to_text(_caller: CallerDep) -> None:
    """``POST /v1/audio-to-text``: off."""
    raise _off(SPEECH_OFF)


async def text_to_audio(_caller: CallerDep) -> None:
    """``POST /v1/text-to-audio``: off."""
    raise _off(TTS_OFF)


def dify_app_router() -> APIRouter:
    """The endpoints of the module docstring on the app's state (:mod:`gcite.service.deps`)."""
    router = APIRouter()
    for path, endpoint, method in (
        ("/v1/parameters", parameters, "GET"),
        ("/v1/info", info, "GET"),
        ("/v1/meta", meta, "GET"),
        ("/v1/site", site, "GET"),
        ("/v1/messages/{message_id}/feedbacks", feedback, "POST"),
        ("/v1/messages/{message_id}/suggested", suggested, "GET"),
        ("/v1/conversations/{conversation_id}/name", rename, "POST"),
        ("/v1/conversations/{conversation_id}", delete, "DELETE"),
        ("/v1/conversations/{conversation_id}/variables", variables, "GET"),
        ("/v1/files/upload", upload, "POST"),
        ("/v1/audio-to-text", audio_to_text, "POST"),
        ("/v1/text-to-audio", text_to_audio, "POST"),
    ):
        router.add_api_route(path, endpoint, methods=[method])
    return router


__all__ = ["MAX_UPLOAD_BYTES", "dify_app_router", "upload_error"]
