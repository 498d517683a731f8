"""Knowledge-base management over HTTP, in the shape of Dify's Knowledge (dataset) API.

The running service owns the knowledge store (a Qdrant Edge shard allows one process),
so documents are changed through it, without downtime: chats keep streaming while a
document is added, and the next answer sees it (ingestion runs in a worker thread and
writes through the service's own store handle).

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

Differences from Dify, on purpose: indexing is done when the create/update call returns
(``indexing_status: "completed"``, or a 400 naming the reason, nothing changed);
``doc_metadata`` is accepted with the document (an object, or Dify's list of
``{"name", "value"}``) so that ``access_roles`` is in force from the first moment (a
document is never public between two calls); ``indexing_technique``, ``process_rule`` and
the other tuning fields are accepted and ignored (gcite's chunking and embedder apply).
Errors are Dify's ``{"code", "message", "status"}``.

Source: ``../shared/reference/dify-openapi-service.json`` (``/datasets``).
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from gcite.config import Settings
from gcite.errors import GciteError
from gcite.knowledge.convert import MAX_FILE_BYTES
from gcite.knowledge.manage import (
    DatasetInfo,
    DocumentInfo,
    ManageError,
    Upserted,
    create_dataset,
    delete_dataset,
    delete_document,
    find_document,
    list_datasets,
    list_documents,
    upsert_document,
)
from gcite.service.auth import bearer_token
from gcite.service.jsonbody import BodyError, load_json, read_limited

MAX_TEXT_BODY_BYTES = 20_000_000
MAX_UPLOAD_BYTES = MAX_FILE_BYTES + 1_000_000  # the file plus the form's other parts
MAX_BATCHES = 1000


class _Refused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"code": code, "message": message, "status": status}, status_code=status)


def dataset_json(info: DatasetInfo, embedder: str) -> dict[str, Any]:
    """A Dify ``Dataset`` object for ``info`` (fields gcite has; the rest at Dify defaults)."""
    return {
        "id": info.id,
        "name": info.name,
        "description": "",
        "provider": "vendor",
        "permission": "only_me",
        "data_source_type": "upload_file",
        "indexing_technique": "high_quality",
        "app_count": 0,
        "document_count": info.documents,
        "word_count": 0,
        "embedding_model": embedder,
        "embedding_model_provider": "gcite",
        "embedding_available": True,
        "doc_form": "text_model",
        "doc_metadata": [],
        "tags": [],
        "segment_count": info.chunks,
    }


def document_json(doc: DocumentInfo, position: int = 1) -> dict[str, Any]:
    """A Dify ``Document`` object for ``doc`` (indexing is complete when it is listed)."""
    return {
        "id": doc.id,
        "position": position,
        "data_source_type": "upload_file",
        "data_source_info": {"upload_file_id": doc.id},
        "name": doc.name,
        "created_from": "api",
        "created_at": doc.updated_at,
        "tokens": 0,
        "indexing_status": "completed",
        "error": None,
        "enabled": True,
        "disabled_at": None,
        "disabled_by": None,
        "archived": False,
        "display_status": "available",
        "word_count": 0,
        "hit_count": 0,
        "doc_form": "text_model",
        "segment_count": doc.segments,
        "doc_metadata": [],
    }


def _metadata(raw: Any) -> dict[str, Any] | None:
    """``doc_metadata`` as an object: given as one, or as Dify's ``[{"name", "value"}]``."""
    if raw is None:
        return None
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, list):
        out: dict[str, Any] = {}
        for item in raw:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise _Refused(400, "invalid_param", "doc_metadata items need name and value.")
            out[item["name"]] = item.get("value")
        return out
    raise _Refused(400, "invalid_param", "doc_metadata must be an object or a list.")


def build_knowledge_router(settings: Settings, open_store: Callable[[], Any]) -> APIRouter:
    """The management endpoints (module docstring) on a store ``open_store()`` opens for
    each call and that is closed after it (handles are shared per data dir, so this is the
    service's own store; one is created when the data dir has no knowledge base yet)."""
    router = APIRouter()
    batches: OrderedDict[str, list[str]] = OrderedDict()

    def authorise(request: Request) -> None:
        token = bearer_token(request.headers.get("authorization"))
        if token is None:
            raise _Refused(
                401, "unauthorized", "Authorization header must be provided and start with 'Bearer'"
            )
        admin = False
        for key in settings.admin_keys:
            admin |= hmac.compare_digest(key.key.encode(), token.encode())
        if admin:
            return
        other_keys = (*settings.app_keys, *settings.retrieval_keys)  # as configured now
        if any(hmac.compare_digest(k.key.encode(), token.encode()) for k in other_keys):
            raise _Refused(403, "forbidden", "This key may not manage the knowledge base.")
        raise _Refused(401, "unauthorized", "Access token is invalid")

    def embedder_name(store: Any) -> str:
        with store.lock:
            return str(store.catalog.embedder or settings.embed_backend)

    def with_store(work: Callable[[Any], Any]) -> Any:
        store = open_store()
        try:
            return work(store)
        finally:
            store.close()

    async def run(request: Request, work: Callable[[Any], Any]) -> Any:
        authorise(request)
        return await asyncio.to_thread(with_store, work)

    def remember(batch: str, ids: list[str]) -> None:
        batches[batch] = ids
        while len(batches) > MAX_BATCHES:
            batches.popitem(last=False)

    def upserted_json(result: Upserted) -> dict[str, Any]:
        batch = time.strftime("%Y%m%d%H%M%S") + result.document.id[:8]
        remember(batch, [result.document.id])
        return {"document": document_json(result.document), "batch": batch}

    async def json_body(request: Request) -> dict[str, Any]:
        try:
            raw = await read_limited(request.headers, request.stream(), MAX_TEXT_BODY_BYTES)
            body = load_json(raw or b"null")
        except BodyError as exc:
            status = 413 if exc.kind == "too_large" else 400
            code = "request_too_large" if status == 413 else "invalid_param"
            raise _Refused(status, code, exc.message) from exc
        if not isinstance(body, dict):
            raise _Refused(400, "invalid_param", "Request body must be a JSON object.")
        return body

    async def form_body(request: Request) -> tuple[dict[str, Any], str, bytes]:
        declared = request.headers.get("content-length", "")
        if declared.strip().isdigit() and int(declared) > MAX_UPLOAD_BYTES:
            raise _Refused(413, "file_too_large", "File size exceeded.")

        async def limited() -> AsyncGenerator[bytes, None]:
            size = 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_UPLOAD_BYTES:
                    raise _Refused(413, "file_too_large", "File size exceeded.")
                yield chunk

        if not request.headers.get("content-type", "").startswith("multipart/form-data"):
            raise _Refused(400, "invalid_param", "Expected multipart/form-data.")
        parser = MultiPartParser(
            Headers(raw=request.headers.raw), limited(), max_files=1, max_fields=8
        )
        try:
            form = await parser.parse()
        except MultiPartException as exc:
            raise _Refused(400, "invalid_param", exc.message) from exc
        try:
            upload = form.get("file")
            if not isinstance(upload, UploadFile):
                raise _Refused(400, "no_file_uploaded", "Please upload your file.")
            data = await upload.read()
            name = upload.filename or ""
            raw_data = form.get("data") or "{}"
            if not isinstance(raw_data, str):
                raise _Refused(400, "invalid_param", "data must be a JSON string.")
            try:
                fields = load_json(raw_data.encode())
            except BodyError as exc:
                raise _Refused(400, "invalid_param", f"data: {exc.message}") from exc
            if not isinstance(fields, dict):
                raise _Refused(400, "invalid_param", "data must be a JSON object.")
        finally:
            await form.close()
        return fields, str(fields.get("name") or name), data

    def guarded(handler: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(handler)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return await handler(*args, **kwargs)
            except _Refused as exc:
                return _error(exc.status, exc.code, exc.message)
            except ManageError as exc:
                code = exc.code if exc.status != 404 else "not_found"
                return _error(exc.status, code, str(exc))
            except GciteError as exc:
                return _error(400, "invalid_param", str(exc))

        return wrapper

    def page_of(request: Request, items: list[Any]) -> tuple[list[Any], dict[str, Any]]:
        try:
            page = max(int(request.query_params.get("page", "1")), 1)
            limit = min(max(int(request.query_params.get("limit", "20")), 1), 100)
        except ValueError as exc:
            raise _Refused(400, "invalid_param", "page and limit must be integers.") from exc
        start = (page - 1) * limit
        chunk = items[start : start + limit]
        return chunk, {
            "has_more": start + limit < len(items),
            "limit": limit,
            "total": len(items),
            "page": page,
        }

    @router.get("/v1/datasets")
    @guarded
    async def datasets(request: Request) -> Any:
        def work(store: Any) -> tuple[list[DatasetInfo], str]:
            return list_datasets(store), embedder_name(store)

        items, embedder = await run(request, work)
        chunk, meta = page_of(request, items)
        return {"data": [dataset_json(i, embedder) for i in chunk], **meta}

    @router.post("/v1/datasets")
    @guarded
    async def create(request: Request) -> Any:
        authorise(request)
        body = await json_body(request)

        def work(store: Any) -> dict[str, Any]:
            return dataset_json(create_dataset(store, body.get("name")), embedder_name(store))

        return await run(request, work)

    @router.get("/v1/datasets/{dataset_id}")
    @guarded
    async def dataset(dataset_id: str, request: Request) -> Any:
        def work(store: Any) -> dict[str, Any]:
            for info in list_datasets(store):
                if dataset_id in (info.id, info.name):
                    return dataset_json(info, embedder_name(store))
            raise ManageError("Dataset not found.", status=404)

        return await run(request, work)

    @router.delete("/v1/datasets/{dataset_id}")
    @guarded
    async def drop(dataset_id: str, request: Request) -> Any:
        await run(request, lambda store: delete_dataset(store, dataset_id))
        return Response(status_code=204)

    async def upsert(
        request: Request, dataset_id: str, document_id: str | None, from_file: bool
    ) -> Any:
        authorise(request)
        if from_file:
            fields, name, data = await form_body(request)
        else:
            fields = await json_body(request)
            text = fields.get("text")
            if not isinstance(text, str) or (document_id is None and not text.strip()):
                raise _Refused(400, "invalid_param", "text is required.")
            raw_name = fields.get("name")
            name = raw_name if isinstance(raw_name, str) else ""
            data = text.encode("utf-8")
        metadata = _metadata(fields.get("doc_metadata"))

        def work(store: Any) -> Upserted:
            target = name
            if document_id is not None:
                current = find_document(store, dataset_id, document_id)
                if target and current.name not in (target, target + ".md"):
                    raise ManageError("Renaming a document is not supported.", status=400)
                target = current.name
            return upsert_document(store, dataset_id, name=target, data=data, metadata=metadata)

        return upserted_json(await run(request, work))

    @router.post("/v1/datasets/{dataset_id}/document/create-by-text")
    @router.post("/v1/datasets/{dataset_id}/document/create_by_text")
    @guarded
    async def create_by_text(dataset_id: str, request: Request) -> Any:
        return await upsert(request, dataset_id, None, from_file=False)

    @router.post("/v1/datasets/{dataset_id}/document/create-by-file")
    @router.post("/v1/datasets/{dataset_id}/document/create_by_file")
    @guarded
    async def create_by_file(dataset_id: str, request: Request) -> Any:
        return await upsert(request, dataset_id, None, from_file=True)

    @router.post("/v1/datasets/{dataset_id}/documents/{document_id}/update-by-text")
    @router.post("/v1/datasets/{dataset_id}/documents/{document_id}/update_by_text")
    @guarded
    async def update_by_text(dataset_id: str, document_id: str, request: Request) -> Any:
        return await upsert(request, dataset_id, document_id, from_file=False)

    @router.post("/v1/datasets/{dataset_id}/documents/{document_id}/update-by-file")
    @router.post("/v1/datasets/{dataset_id}/documents/{document_id}/update_by_file")
    @guarded
    async def update_by_file(dataset_id: str, document_id: str, request: Request) -> Any:
        return await upsert(request, dataset_id, document_id, from_file=True)

    @router.get("/v1/datasets/{dataset_id}/documents")
    @guarded
    async def documents(dataset_id: str, request: Request) -> Any:
        docs = await run(request, lambda store: list_documents(store, dataset_id))
        keyword = request.query_params.get("keyword") or ""
        docs = [d for d in docs if keyword in d.name]
        chunk, meta = page_of(request, docs)
        start = (meta["page"] - 1) * meta["limit"]
        return {
            "data": [document_json(d, start + i + 1) for i, d in enumerate(chunk)],
            **meta,
        }

    @router.get("/v1/datasets/{dataset_id}/documents/{document_id}")
    @guarded
    async def document(dataset_id: str, document_id: str, request: Request) -> Any:
        doc = await run(request, lambda store: find_document(store, dataset_id, document_id))
        return document_json(doc)

    @router.delete("/v1/datasets/{dataset_id}/documents/{document_id}")
    @guarded
    async def remove(dataset_id: str, document_id: str, request: Request) -> Any:
        await run(request, lambda store: delete_document(store, dataset_id, document_id))
        return Response(status_code=204)

    @router.get("/v1/datasets/{dataset_id}/documents/{batch}/indexing-status")
    @guarded
    async def indexing_status(dataset_id: str, batch: str, request: Request) -> Any:
        ids = batches.get(batch)
        if ids is None:
            authorise(request)
            raise _Refused(404, "not_found", "Documents not found.")

        def work(store: Any) -> list[DocumentInfo]:
            found = []
            for doc_id in ids:
                try:
                    found.append(find_document(store, dataset_id, doc_id))
                except ManageError:
                    continue
            return found

        docs = await run(request, work)
        return {
            "data": [
                {
                    "id": d.id,
                    "indexing_status": "completed",
                    "processing_started_at": d.updated_at,
                    "parsing_completed_at": d.updated_at,
                    "cleaning_completed_at": d.updated_at,
                    "splitting_completed_at": d.updated_at,
                    "completed_at": d.updated_at,
                    "paused_at": None,
                    "error": None,
                    "stopped_at": None,
                    "completed_segments": d.segments,
                    "total_segments": d.segments,
                }
                for d in docs
            ]
        }

    return router


__all__ = ["build_knowledge_router", "dataset_json", "document_json"]
