"""Knowledge-base management over HTTP, in the shape of Dify's Knowledge (dataset) API.

The handlers work on the app's :class:`~gcite.knowledge.admin.KnowledgeAdmin`
(``app.state.knowledge``, a :class:`~gcite.knowledge.access.KnowledgeAccess`): the
service's own store, changed without downtime (chats keep streaming while a document is
added, and the next answer sees it), or, with ``knowledge_url`` set (the chat workers of
``gcite serve --workers N`` among them), the knowledge base of that service, called
through its own Knowledge API: nothing is written locally then.

Only ``[[admin_keys]]`` may call these endpoints (``Authorization: Bearer <admin key>``);
chat keys (``[[app_keys]]``) and retrieval keys (``[[retrieval_keys]]``) get 403, and
``allow_any_key`` (the demo) opens nothing here. Without admin keys every call is 401.

Endpoints (Dify's paths under ``/v1``; ``dataset_id`` is the id or the name):

- ``GET /v1/datasets`` (``page``, ``limit``), ``POST /v1/datasets`` ``{"name"}`` (409
  ``dataset_name_duplicate``), ``GET`` / ``DELETE /v1/datasets/{dataset_id}`` (204);
- ``POST /v1/datasets/{dataset_id}/document/create-by-text`` ``{"name", "text",
  "doc_metadata"?}`` and ``.../document/create-by-file`` (multipart: ``file`` and a JSON
  ``data`` field) -> ``{"document", "batch"}``; the same name again replaces the document;
- ``POST /v1/datasets/{dataset_id}/documents/{document_id}/update-by-text`` /
  ``update-by-file``;
- ``GET /v1/datasets/{dataset_id}/documents`` (``page``, ``limit``, ``keyword``),
  ``GET`` / ``DELETE /v1/datasets/{dataset_id}/documents/{document_id}`` (204);
- ``GET /v1/datasets/{dataset_id}/documents/{batch}/indexing-status``.

Create and update answer at once with a ``batch`` (``indexing_status: "waiting"``); the
knowledge base's :class:`~gcite.knowledge.indexing.Indexer` indexes the document off the
request path and ``indexing-status`` reports ``waiting`` / ``indexing`` / ``completed`` or
``error`` (the Chinese reason; nothing of the document visible). ``original_document_id``
on create replaces that document (atomically: one version searchable at every moment).
A knowledge base of another service (``knowledge_url``) is written by that service, and
the call waits for its indexing. Differences from Dify, on purpose:
``doc_metadata`` is accepted with the document (an object, or Dify's list of
``{"name", "value"}``) so that ``access_roles`` is in force from the first moment (a
document is never public between two calls); ``indexing_technique``, ``process_rule`` and
the other tuning fields are accepted and ignored (gcite's chunking and embedder apply).
Errors are Dify's ``{"code", "message", "status"}`` (:func:`gcite.service.errors.api_error`:
a busy or unreachable store, or an embedding endpoint that is down, is a 503). Bodies are
built by :mod:`gcite.dify.knowledge_api`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Request, Response
from starlette.datastructures import Headers, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from gcite.config import ApiKey, Settings
from gcite.dify.knowledge_api import (
    batch_documents,
    batch_id,
    dataset_body,
    doc_metadata,
    document_body,
    indexing_status_body,
    page_body,
    page_bounds,
    upserted_body,
)
from gcite.knowledge.access import KnowledgeAccess
from gcite.knowledge.admin import DocumentInfo, KnowledgeAdmin, ManageError
from gcite.knowledge.convert import MAX_FILE_BYTES
from gcite.knowledge.indexing import Job
from gcite.service.auth import authorise_admin
from gcite.service.errors import ApiError
from gcite.service.jsonbody import BodyError, load_json, read_limited

MAX_TEXT_BODY_BYTES = 20_000_000
MAX_UPLOAD_BYTES = MAX_FILE_BYTES + 1_000_000  # the file plus the form's other parts

T = TypeVar("T")


# --------------------------------------------------------------------------- dependencies


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def _admin_key(request: Request, settings: Annotated[Settings, Depends(_settings)]) -> ApiKey:
    return authorise_admin(settings, request.headers.get("authorization"))


async def _admin(request: Request, _key: Annotated[ApiKey, Depends(_admin_key)]) -> KnowledgeAdmin:
    """The app's KnowledgeAdmin, for an admin key only (opening it may block)."""
    access: KnowledgeAccess = request.app.state.knowledge
    return await asyncio.to_thread(access.admin)


Admin = Annotated[KnowledgeAdmin, Depends(_admin)]


async def _blocking(work: Callable[[], T]) -> T:
    return await asyncio.to_thread(work)


# --------------------------------------------------------------------------- bodies


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        raw = await read_limited(request.headers, request.stream(), MAX_TEXT_BODY_BYTES)
        body = load_json(raw or b"null")
    except BodyError as exc:
        if exc.kind == "too_large":
            raise ApiError(413, "request_too_large", exc.message) from exc
        raise ApiError(400, "invalid_param", exc.message) from exc
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_param", "Request body must be a JSON object.")
    return body


async def _form_body(request: Request) -> tuple[dict[str, Any], str, bytes]:
    """``(data fields, file name, file bytes)`` of a ``create-by-file`` form."""
    declared = request.headers.get("content-length", "")
    if declared.strip().isdigit() and int(declared) > MAX_UPLOAD_BYTES:
        raise ApiError(413, "file_too_large", "File size exceeded.")

    async def limited() -> AsyncGenerator[bytes, None]:
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_UPLOAD_BYTES:
                raise ApiError(413, "file_too_large", "File size exceeded.")
            yield chunk

    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise ApiError(400, "invalid_param", "Expected multipart/form-data.")
    parser = MultiPartParser(Headers(raw=request.headers.raw), limited(), max_files=1, max_fields=8)
    try:
        form = await parser.parse()
    except MultiPartException as exc:
        raise ApiError(400, "invalid_param", exc.message) from exc
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise ApiError(400, "no_file_uploaded", "Please upload your file.")
        data = await upload.read()
        raw_data = form.get("data") or "{}"
        if not isinstance(raw_data, str):
            raise ApiError(400, "invalid_param", "data must be a JSON string.")
        try:
            fields = load_json(raw_data.encode())
        except BodyError as exc:
            raise ApiError(400, "invalid_param", f"data: {exc.message}") from exc
        if not isinstance(fields, dict):
            raise ApiError(400, "invalid_param", "data must be a JSON object.")
    finally:
        await form.close()
    return fields, str(fields.get("name") or upload.filename or ""), data


async def _text_body(request: Request, *, update: bool) -> tuple[dict[str, Any], str, bytes]:
    """``(fields, name, text as UTF-8)`` of a ``create-by-text`` / ``update-by-text`` body."""
    fields = await _json_body(request)
    text = fields.get("text")
    if not isinstance(text, str) or (not update and not text.strip()):
        raise ApiError(400, "invalid_param", "text is required.")
    name = fields.get("name")
    return fields, name if isinstance(name, str) else "", text.encode("utf-8")


# --------------------------------------------------------------------------- datasets


async def list_datasets(
    admin: Admin, page: str | None = None, limit: str | None = None
) -> dict[str, Any]:
    """``GET /v1/datasets``."""
    number, size = page_bounds(page, limit)
    items = await _blocking(admin.list_datasets)
    return page_body([dataset_body(i) for i in items], number, size)


async def create_dataset(request: Request, admin: Admin) -> dict[str, Any]:
    """``POST /v1/datasets`` ``{"name"}``."""
    name = (await _json_body(request)).get("name")
    if not isinstance(name, str):
        raise ManageError("数据集名称不能为空")
    return dataset_body(await _blocking(lambda: admin.create_dataset(name)))


async def get_dataset(dataset_id: str, admin: Admin) -> dict[str, Any]:
    """``GET /v1/datasets/{dataset_id}``."""
    for info in await _blocking(admin.list_datasets):
        if dataset_id in (info.id, info.name):
            return dataset_body(info)
    raise ManageError("Dataset not found.", status=404)


async def delete_dataset(dataset_id: str, admin: Admin) -> Response:
    """``DELETE /v1/datasets/{dataset_id}`` (204)."""
    await _blocking(lambda: admin.delete_dataset(dataset_id))
    return Response(status_code=204)


# --------------------------------------------------------------------------- documents


async def _upsert(
    request: Request,
    admin: KnowledgeAdmin,
    dataset_id: str,
    replace: str | None,
    body: tuple[dict[str, Any], str, bytes],
) -> dict[str, Any]:
    """Accept a document: indexed off the request path by the knowledge base's
    :class:`~gcite.knowledge.indexing.Indexer` (the answer's ``batch`` reports it), or, for
    a knowledge base of another service, by that service (waited for)."""
    fields, name, data = body
    metadata = doc_metadata(fields.get("doc_metadata"))
    original = fields.get("original_document_id")  # Dify's "replace this document"
    if replace is None and isinstance(original, str) and original.strip():
        replace = original.strip()
    access: KnowledgeAccess = request.app.state.knowledge
    if access.remote:
        result = await _blocking(
            lambda: admin.upsert_document(
                dataset_id, name=name, data=data, metadata=metadata, replace=replace
            )
        )
        return _with_roles_change(upserted_body(result.document), result.roles_change)
    job, _done = await _blocking(
        lambda: access.indexer().submit(
            admin,
            dataset_id,
            name=name,
            data=data,
            metadata=metadata,
            replace=replace,
            batch=batch_id,
        )
    )
    answer = upserted_body(job.document)
    answer["batch"] = job.batch
    answer["document"].update(indexing_status="waiting", display_status="queuing")
    return _with_roles_change(answer, job.roles_change)


def _with_roles_change(
    answer: dict[str, Any], change: tuple[tuple[str, ...], tuple[str, ...]] | None
) -> dict[str, Any]:
    """``answer`` with ``access_roles_changed`` when the write changes who may see the
    document (an update that gives other roles says so)."""
    if change is not None:
        before, after = change
        answer["access_roles_changed"] = {"before": list(before), "after": list(after)}
    return answer


async def create_by_text(dataset_id: str, request: Request, admin: Admin) -> dict[str, Any]:
    """``POST .../document/create-by-text``."""
    return await _upsert(request, admin, dataset_id, None, await _text_body(request, update=False))


async def create_by_file(dataset_id: str, request: Request, admin: Admin) -> dict[str, Any]:
    """``POST .../document/create-by-file``."""
    return await _upsert(request, admin, dataset_id, None, await _form_body(request))


async def update_by_text(
    dataset_id: str, document_id: str, request: Request, admin: Admin
) -> dict[str, Any]:
    """``POST .../documents/{document_id}/update-by-text``."""
    return await _upsert(
        request, admin, dataset_id, document_id, await _text_body(request, update=True)
    )


async def update_by_file(
    dataset_id: str, document_id: str, request: Request, admin: Admin
) -> dict[str, Any]:
    """``POST .../documents/{document_id}/update-by-file``."""
    return await _upsert(request, admin, dataset_id, document_id, await _form_body(request))


async def list_documents(
    dataset_id: str,
    admin: Admin,
    page: str | None = None,
    limit: str | None = None,
    keyword: str | None = None,
) -> dict[str, Any]:
    """``GET .../documents`` (``keyword``: part of the file name)."""
    number, size = page_bounds(page, limit)
    docs = await _blocking(lambda: admin.list_documents(dataset_id))
    docs = [d for d in docs if (keyword or "") in d.name]
    return page_body([document_body(d, i + 1) for i, d in enumerate(docs)], number, size)


async def get_document(dataset_id: str, document_id: str, admin: Admin) -> dict[str, Any]:
    """``GET .../documents/{document_id}``."""
    return document_body(await _blocking(lambda: admin.find_document(dataset_id, document_id)))


async def delete_document(dataset_id: str, document_id: str, admin: Admin) -> Response:
    """``DELETE .../documents/{document_id}`` (204)."""
    await _blocking(lambda: admin.delete_document(dataset_id, document_id))
    return Response(status_code=204)


async def indexing_status(
    dataset_id: str, batch: str, request: Request, admin: Admin
) -> dict[str, Any]:
    """``GET .../documents/{batch}/indexing-status``: the batch's run as this service's
    indexer knows it (``waiting``, ``indexing``, ``completed`` or ``error`` with the
    reason), else the documents of the batch still stored, completed (404 for a batch
    gcite did not make)."""
    access: KnowledgeAccess = request.app.state.knowledge
    job = None if access.remote else access.indexer().job(batch)
    if job is not None:
        return {"data": [_job_status(job)]}
    ids = batch_documents(batch)
    if not ids:
        raise ApiError(404, "not_found", "Documents not found.")

    def work() -> list[DocumentInfo]:
        found = []
        for doc_id in ids:
            try:
                found.append(admin.find_document(dataset_id, doc_id))
            except ManageError as exc:
                if exc.status != 404:
                    raise
        return found

    return indexing_status_body(await _blocking(work))


def _job_status(job: Job) -> dict[str, Any]:
    """One item of an indexing-status answer for ``job`` (Dify's fields; times in Unix
    seconds, ``None`` until reached; a failure's reason in ``error``)."""
    item: dict[str, Any] = indexing_status_body([job.document])["data"][0]
    started = int(job.started_at) or None
    finished = int(job.completed_at) or None
    done = job.status == "completed"
    item.update(
        indexing_status=job.status,
        processing_started_at=started,
        parsing_completed_at=finished if done else None,
        cleaning_completed_at=finished if done else None,
        splitting_completed_at=finished if done else None,
        completed_at=finished if done else None,
        stopped_at=finished if job.status == "error" else None,
        error=job.error,
        completed_segments=job.document.segments if done else 0,
        total_segments=job.document.segments if done else 0,
    )
    if job.status == "error":  # what a gcite client needs to report the failure as it was
        item["gcite_error"] = {"status": job.error_status, "code": job.error_code}
    if job.roles_change is not None:
        before, after = job.roles_change
        item["access_roles_changed"] = {"before": list(before), "after": list(after)}
    return item


def knowledge_router() -> APIRouter:
    """The management endpoints (module docstring); the app sets ``app.state.settings``
    and ``app.state.knowledge``."""
    router = APIRouter()

    def add(path: str, endpoint: Callable[..., Any], methods: list[str] | None = None) -> None:
        router.add_api_route(path, endpoint, methods=methods or ["POST"])

    add("/v1/datasets", list_datasets, ["GET"])
    add("/v1/datasets", create_dataset, ["POST"])
    add("/v1/datasets/{dataset_id}", get_dataset, ["GET"])
    add("/v1/datasets/{dataset_id}", delete_dataset, ["DELETE"])
    for sep in ("-", "_"):  # Dify accepts both spellings
        document = "/v1/datasets/{dataset_id}/documents/{document_id}"
        add(f"/v1/datasets/{{dataset_id}}/document/create{sep}by{sep}text", create_by_text)
        add(f"/v1/datasets/{{dataset_id}}/document/create{sep}by{sep}file", create_by_file)
        add(f"{document}/update{sep}by{sep}text", update_by_text)
        add(f"{document}/update{sep}by{sep}file", update_by_file)
    add("/v1/datasets/{dataset_id}/documents", list_documents, ["GET"])
    add("/v1/datasets/{dataset_id}/documents/{document_id}", get_document, ["GET"])
    add("/v1/datasets/{dataset_id}/documents/{document_id}", delete_document, ["DELETE"])
    add("/v1/datasets/{dataset_id}/documents/{batch}/indexing-status", indexing_status, ["GET"])
    return router


__all__ = ["MAX_TEXT_BODY_BYTES", "MAX_UPLOAD_BYTES", "knowledge_router"]
