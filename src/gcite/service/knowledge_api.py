"""Knowledge-base management over HTTP, in the shape of Dify's Knowledge (dataset) API.

The handlers work on the app's :class:`~gcite.knowledge.admin.KnowledgeAdmin`
(the lifespan state ``knowledge``, a :class:`~gcite.knowledge.access.KnowledgeAccess`): the
service's own store, changed without downtime (chats keep streaming while a document is
added, and the next answer sees it), or, with ``knowledge_url`` set (the chat workers of
``gcite serve --workers N`` among them), the knowledge base of that service, called
through its own Knowledge API: nothing is written locally then.

Only ``[[admin_keys]]`` may call these endpoints (``Authorization: Bearer <admin key>``);
chat keys (``[[app_keys]]``) and retrieval keys (``[[retrieval_keys]]``) get 403, and
``allow_any_key`` (the demo) opens nothing here. Without admin keys every call is 401.

Endpoints (Dify's paths under ``/v1/datasets``; ``dataset_id`` is the id or the name,
``document_id`` the id or the file name; the table in ``docs/api.md`` gives each answer):

- datasets: list (``page``, ``limit``, ``keyword``, ``tag_ids``), create ``{"name",
  "description"?}`` (409 ``dataset_name_duplicate``), get, ``PATCH`` (``description``;
  a new name is 400), delete (204); ``POST .../retrieve`` and ``.../hit-testing``;
- documents: ``document/create-by-text`` / ``create-by-file`` and
  ``documents/{document_id}/update-by-text`` / ``update-by-file`` -> ``{"document",
  "batch"}`` (the same name again replaces the document); list, get, delete;
  ``documents/{batch}/indexing-status``; ``documents/status/{action}`` (``enable`` and
  ``un_archive`` succeed, ``disable`` and ``archive`` are 400 ``invalid_action``);
  ``documents/{document_id}/upload-file``;
- segments of a document: list, create, get, update, delete; child chunks (none: the
  documents are not split parent-child, writes are 400);
- metadata fields (list, create 201, rename, delete, built-in), ``documents/metadata``
  (values set on documents, the names not given kept: roles are never dropped);
- tags (:mod:`gcite.knowledge.tags`): ``GET /v1/datasets/tags``, create ``POST``
  ``{"name"}``, rename ``PATCH`` ``{"tag_id", "name"}``, ``DELETE`` ``{"tag_id"}`` (204),
  ``tags/binding`` ``{"tag_ids", "target_id"}`` and ``tags/unbinding`` (``tag_ids`` or
  ``tag_id``) (204), ``GET .../{dataset_id}/tags``; a dataset's ``tags`` lists its tags.

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
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from gcite.config import ApiKey, Settings
from gcite.dify.knowledge_api import (
    METADATA_CHOICES,
    RetrievalSettings,
    batch_documents,
    batch_id,
    dataset_body,
    dataset_metadata_fields,
    doc_metadata,
    document_body,
    document_detail_body,
    indexing_status_body,
    metadata_field_id,
    page_body,
    page_bounds,
    retrieve_body,
    segment_body,
    tag_body,
    upload_file_body,
    upserted_body,
)
from gcite.knowledge.access import KnowledgeAccess
from gcite.knowledge.admin import (
    METADATA_TYPES,
    DatasetInfo,
    DocumentInfo,
    KnowledgeAdmin,
    ManageError,
)
from gcite.knowledge.jobs import Job
from gcite.knowledge.limits import MAX_FILE_BYTES
from gcite.knowledge.tags import checked_ids, checked_name
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
    access: KnowledgeAccess = request.state.knowledge
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


def _retrieval(settings: Settings) -> RetrievalSettings:
    return RetrievalSettings(
        top_k=settings.knowledge.top_k,
        score_threshold=settings.knowledge.score_threshold,
        rerank_model=settings.rerank.model if settings.rerank.url else "",
    )


def _find_dataset(admin: KnowledgeAdmin, dataset_id: str) -> DatasetInfo:
    """The dataset whose id or name is ``dataset_id`` (blocking); 404 ``not_found``."""
    for info in admin.list_datasets():
        if dataset_id in (info.id, info.name):
            return info
    raise ManageError("Dataset not found.", status=404)


def _full_dataset(admin: KnowledgeAdmin, info: DatasetInfo, settings: Settings) -> dict[str, Any]:
    """:func:`dataset_body` with the dataset's metadata fields (blocking)."""
    fields = dataset_metadata_fields(info.id, admin.list_documents(info.id))
    return dataset_body(info, _retrieval(settings), fields)


async def list_datasets(
    admin: Admin,
    settings: Annotated[Settings, Depends(_settings)],
    page: str | None = None,
    limit: str | None = None,
    keyword: str | None = None,
    tag_ids: Annotated[list[str] | None, Query()] = None,
) -> dict[str, Any]:
    """``GET /v1/datasets`` (``keyword``: part of the name; ``tag_ids``, repeated: the
    datasets bound to any of these tags, as Dify filters)."""
    number, size = page_bounds(page, limit)
    wanted = set(tag_ids or ())

    def work() -> list[dict[str, Any]]:
        items = [
            i
            for i in admin.list_datasets()
            if (keyword or "") in i.name and (not wanted or wanted & {t.id for t in i.tags})
        ]
        start = (number - 1) * size  # only the page's datasets are read in full
        return [
            _full_dataset(admin, i, settings) if start <= n < start + size else {}
            for n, i in enumerate(items)
        ]

    return page_body(await _blocking(work), number, size)


def _description(body: dict[str, Any]) -> str | None:
    value = body.get("description")
    if value is not None and not isinstance(value, str):
        raise ManageError("description 必须是字符串")
    return value


async def create_dataset(
    request: Request, admin: Admin, settings: Annotated[Settings, Depends(_settings)]
) -> dict[str, Any]:
    """``POST /v1/datasets`` ``{"name", "description"?}``."""
    body = await _json_body(request)
    name = body.get("name")
    description = _description(body)
    if not isinstance(name, str):
        raise ManageError("数据集名称不能为空")

    def work() -> DatasetInfo:
        info = admin.create_dataset(name)
        return admin.update_dataset(info.id, description=description) if description else info

    return dataset_body(await _blocking(work), _retrieval(settings))


async def get_dataset(
    dataset_id: str, admin: Admin, settings: Annotated[Settings, Depends(_settings)]
) -> dict[str, Any]:
    """``GET /v1/datasets/{dataset_id}``."""
    return await _blocking(lambda: _full_dataset(admin, _find_dataset(admin, dataset_id), settings))


async def update_dataset(
    dataset_id: str,
    request: Request,
    admin: Admin,
    settings: Annotated[Settings, Depends(_settings)],
) -> dict[str, Any]:
    """``PATCH /v1/datasets/{dataset_id}``: ``description`` is kept; ``name`` may only
    repeat the current name (datasets are not renamed: External Knowledge IDs and role
    filters name them); the other fields (permission, indexing and retrieval settings)
    are accepted and ignored (the service's own settings apply)."""
    body = await _json_body(request)
    description = _description(body)

    def work() -> dict[str, Any]:
        info = _find_dataset(admin, dataset_id)
        name = body.get("name")
        if name is not None and name != info.name:
            raise ManageError("不支持重命名数据集（外部知识库 ID 和检索都使用数据集名称）")
        if description is not None:
            info = admin.update_dataset(info.id, description=description)
        return _full_dataset(admin, info, settings)

    return await _blocking(work)


async def delete_dataset(dataset_id: str, admin: Admin) -> Response:
    """``DELETE /v1/datasets/{dataset_id}`` (204)."""
    await _blocking(lambda: admin.delete_dataset(dataset_id))
    return Response(status_code=204)


#: Dify's hit-testing refuses longer queries (``HitTestingService``).
MAX_RETRIEVE_QUERY_CHARS = 250


def _retrieve_args(
    body: dict[str, Any], settings: Settings
) -> tuple[str, int, float, dict[str, Any] | None]:
    """``(query, top_k, score_threshold, metadata condition)`` of a retrieve body."""
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ManageError("query 不能为空")
    if len(query) > MAX_RETRIEVE_QUERY_CHARS:
        raise ManageError(f"query 不能超过 {MAX_RETRIEVE_QUERY_CHARS} 个字符")
    model = body.get("retrieval_model")
    model = model if isinstance(model, dict) else {}
    top_k = model.get("top_k")
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
        top_k = settings.knowledge.top_k
    threshold = model.get("score_threshold")
    if "score_threshold_enabled" in model or threshold is not None:
        enabled = bool(model.get("score_threshold_enabled")) and isinstance(threshold, int | float)
        score = float(threshold) if enabled and isinstance(threshold, int | float) else 0.0
    else:
        score = settings.knowledge.score_threshold
    condition = model.get("metadata_filtering_conditions")
    return query, top_k, score, condition if isinstance(condition, dict) else None


async def retrieve(
    dataset_id: str,
    request: Request,
    admin: Admin,
    settings: Annotated[Settings, Depends(_settings)],
) -> dict[str, Any]:
    """``POST /v1/datasets/{dataset_id}/retrieve`` (and ``hit-testing``): ``{"query",
    "retrieval_model"?: {"top_k", "score_threshold_enabled", "score_threshold",
    "metadata_filtering_conditions"}}``; the other retrieval settings are ignored (gcite
    searches hybrid). An admin key sees every document (no role filter)."""
    query, top_k, score, condition = _retrieve_args(await _json_body(request), settings)
    items = await _blocking(
        lambda: admin.retrieve(
            dataset_id, query, top_k=top_k, score_threshold=score, condition=condition
        )
    )
    return retrieve_body(query, items)


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
    access: KnowledgeAccess = request.state.knowledge
    info = await _blocking(lambda: _find_dataset(admin, dataset_id))
    if access.remote:
        result = await _blocking(
            lambda: admin.upsert_document(
                info.id, name=name, data=data, metadata=metadata, replace=replace
            )
        )
        return _with_roles_change(upserted_body(result.document, info.id), result.roles_change)
    job, _done = await _blocking(
        lambda: access.indexer().submit(
            admin,
            info.id,
            name=name,
            data=data,
            metadata=metadata,
            replace=replace,
            batch=batch_id,
        )
    )
    answer = upserted_body(job.document, info.id)
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

    def work() -> tuple[str, list[DocumentInfo]]:
        info = _find_dataset(admin, dataset_id)
        return info.id, admin.list_documents(info.id)

    ident, docs = await _blocking(work)
    docs = [d for d in docs if (keyword or "") in d.name]
    return page_body([document_body(d, ident) for d in docs], number, size)


def _document(admin: KnowledgeAdmin, dataset_id: str, document_id: str) -> tuple[str, DocumentInfo]:
    """``(dataset id, document)`` (blocking); 404 for either unknown."""
    info = _find_dataset(admin, dataset_id)
    return info.id, admin.find_document(info.id, document_id)


async def get_document(
    dataset_id: str, document_id: str, admin: Admin, metadata: str = "all"
) -> dict[str, Any]:
    """``GET .../documents/{document_id}?metadata=all|only|without`` (Dify's detail
    shape, :func:`document_detail_body`); another ``metadata`` is 400
    ``invalid_metadata`` (after the 404s, as in Dify)."""
    ident, doc = await _blocking(lambda: _document(admin, dataset_id, document_id))
    if metadata not in METADATA_CHOICES:
        raise ApiError(400, "invalid_metadata", f"Invalid metadata value: {metadata}")
    return document_detail_body(doc, ident, metadata)


async def upload_file(dataset_id: str, document_id: str, admin: Admin) -> dict[str, Any]:
    """``GET .../documents/{document_id}/upload-file``: the file the document was made
    from (gcite serves no download: ``url`` and ``download_url`` are empty)."""

    def work() -> dict[str, Any]:
        _, doc = _document(admin, dataset_id, document_id)
        path = Path(doc.path) if doc.path else None
        size = path.stat().st_size if path is not None and path.is_file() else 0
        return upload_file_body(doc, size)

    return await _blocking(work)


#: ``documents/status/{action}``: the actions Dify knows, and those gcite can do
#: (documents are always enabled and never archived: disabling would need a search
#: filter; delete the document instead).
STATUS_ACTIONS = ("enable", "disable", "archive", "un_archive")
DONE_ACTIONS = ("enable", "un_archive")


async def document_status(
    dataset_id: str, action: str, request: Request, admin: Admin
) -> dict[str, Any]:
    """``PATCH .../documents/status/{action}`` ``{"document_ids"}``: ``enable`` and
    ``un_archive`` succeed (every document is enabled and not archived); ``disable`` and
    ``archive`` are 400 ``invalid_action`` (not supported); unknown documents 404."""
    body = await _json_body(request)
    ids = body.get("document_ids")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ManageError("document_ids 必须是字符串列表")
    if action not in STATUS_ACTIONS:
        raise ApiError(400, "invalid_action", f"Invalid action: {action}")
    if action not in DONE_ACTIONS:
        raise ApiError(
            400, "invalid_action", "gcite 不支持停用或归档文档：文档总是启用的，不需要时请删除"
        )
    await _blocking(lambda: [_document(admin, dataset_id, i) for i in ids])
    return {"result": "success"}


async def delete_document(dataset_id: str, document_id: str, admin: Admin) -> Response:
    """``DELETE .../documents/{document_id}`` (204)."""
    await _blocking(lambda: admin.delete_document(dataset_id, document_id))
    return Response(status_code=204)


async def indexing_status(
    dataset_id: str, batch: str, request: Request, admin: Admin
) -> dict[str, Any]:
    """``GET .../documents/{batch}/indexing-status``: the batch's run as the knowledge
    base's job log has it (``waiting``, ``indexing``, ``completed`` or ``error`` with the
    reason; with a pgvector store whichever process accepted the write, and ``error``
    once that process died before it finished), else the documents of the batch still
    stored, completed (404 for a batch gcite did not make)."""
    access: KnowledgeAccess = request.state.knowledge
    job = None if access.remote else await _blocking(lambda: access.indexer().job(batch))
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


# --------------------------------------------------------------------------- segments


async def list_segments(
    dataset_id: str,
    document_id: str,
    admin: Admin,
    page: str | None = None,
    limit: str | None = None,
    keyword: str | None = None,
) -> dict[str, Any]:
    """``GET .../documents/{document_id}/segments`` (``keyword``: part of the text;
    ``status`` is not read: every segment is ``completed``)."""
    number, size = page_bounds(page, limit)
    segments = await _blocking(lambda: admin.list_segments(dataset_id, document_id))
    bodies = [segment_body(x) for x in segments if (keyword or "") in x.content]
    return {**page_body(bodies, number, size), "doc_form": "text_model"}


async def get_segment(
    dataset_id: str, document_id: str, segment_id: str, admin: Admin
) -> dict[str, Any]:
    """``GET .../segments/{segment_id}``: ``{"data", "doc_form"}``; 404 ``not_found``."""
    data = await _blocking(lambda: _segment_of(admin, dataset_id, document_id, segment_id))
    return {"data": data, "doc_form": "text_model"}


async def create_segments(
    dataset_id: str, document_id: str, request: Request, admin: Admin
) -> dict[str, Any]:
    """``POST .../documents/{document_id}/segments`` ``{"segments": [{"content", ...}]}``
    (``answer`` and ``keywords`` are not kept): ``{"data", "doc_form"}``."""
    items = (await _json_body(request)).get("segments")
    if not isinstance(items, list) or not items:
        raise ManageError("segments 必须是非空列表")
    contents = [i.get("content") if isinstance(i, dict) else None for i in items]
    if not all(isinstance(c, str) and c.strip() for c in contents):
        raise ManageError("每个分段都需要非空的 content")
    texts = [str(c) for c in contents]
    made = await _blocking(lambda: admin.create_segments(dataset_id, document_id, texts))
    return {"data": [segment_body(x) for x in made], "doc_form": "text_model"}


async def update_segment(
    dataset_id: str, document_id: str, segment_id: str, request: Request, admin: Admin
) -> dict[str, Any]:
    """``POST .../segments/{segment_id}`` ``{"segment": {"content", ...}}``: ``{"data",
    "doc_form"}`` (``enabled: false`` is 400: segments are always enabled)."""
    item = (await _json_body(request)).get("segment")
    if not isinstance(item, dict):
        raise ManageError("segment 必须是对象")
    if item.get("enabled") is False:
        raise ManageError("gcite 不支持停用分段，不需要的分段请删除")
    content = item.get("content")

    def work() -> dict[str, Any]:
        if content is None:  # nothing to change
            return _segment_of(admin, dataset_id, document_id, segment_id)
        return segment_body(admin.update_segment(dataset_id, document_id, segment_id, content))

    return {"data": await _blocking(work), "doc_form": "text_model"}


def _segment_of(
    admin: KnowledgeAdmin, dataset_id: str, document_id: str, segment_id: str
) -> dict[str, Any]:
    for segment in admin.list_segments(dataset_id, document_id):
        if segment.id == segment_id:
            return segment_body(segment)
    raise ApiError(404, "not_found", "Segment not found.")


async def delete_segment(
    dataset_id: str, document_id: str, segment_id: str, admin: Admin
) -> Response:
    """``DELETE .../segments/{segment_id}`` (204)."""
    await _blocking(lambda: admin.delete_segment(dataset_id, document_id, segment_id))
    return Response(status_code=204)


async def list_child_chunks(
    dataset_id: str,
    document_id: str,
    segment_id: str,
    admin: Admin,
    page: str | None = None,
    limit: str | None = None,
) -> dict[str, Any]:
    """``GET .../segments/{segment_id}/child_chunks``: gcite's documents are not split
    parent-child (``doc_form`` ``text_model``), so a segment has none."""
    number, size = page_bounds(page, limit)
    await get_segment(dataset_id, document_id, segment_id, admin)
    return {"data": [], "total": 0, "total_pages": 0, "page": number, "limit": size}


async def child_chunk_write(
    dataset_id: str, document_id: str, segment_id: str, admin: Admin
) -> dict[str, Any]:
    """Creating, changing or deleting child chunks: 400, as Dify answers for a document
    that is not split parent-child."""
    await get_segment(dataset_id, document_id, segment_id, admin)
    raise ApiError(
        400, "invalid_param", "gcite 的文档不分父子分段（doc_form 为 text_model），没有子分段"
    )


# --------------------------------------------------------------------------- metadata

#: Dify's built-in metadata fields (``MetadataService.get_built_in_fields``); gcite
#: does not fill them (``built_in_field_enabled`` stays false).
BUILT_IN_FIELDS = (
    ("document_name", "string"),
    ("uploader", "string"),
    ("upload_date", "time"),
    ("last_update_date", "time"),
    ("source", "string"),
)


def _metadata_fields(
    admin: KnowledgeAdmin, dataset_id: str
) -> tuple[DatasetInfo, list[dict[str, Any]]]:
    """The dataset and its metadata fields: carried by documents, then declared ones."""
    info = _find_dataset(admin, dataset_id)
    fields = dataset_metadata_fields(info.id, admin.list_documents(info.id))
    carried = {f["name"] for f in fields}
    for name, kind in sorted(info.metadata_fields.items()):
        if name not in carried:
            fields.append(
                {"id": metadata_field_id(info.id, name), "name": name, "type": kind, "count": 0}
            )
    return info, fields


async def list_metadata(dataset_id: str, admin: Admin) -> dict[str, Any]:
    """``GET /v1/datasets/{dataset_id}/metadata``."""
    _, fields = await _blocking(lambda: _metadata_fields(admin, dataset_id))
    return {"doc_metadata": fields, "built_in_field_enabled": False}


def _field_args(body: dict[str, Any], *, typed: bool) -> tuple[str, str]:
    name = body.get("name")
    kind = body.get("type", "string") if typed else "string"
    if not isinstance(name, str) or not name.strip():
        raise ManageError("元数据字段名称不能为空")
    if kind not in METADATA_TYPES:
        raise ManageError(f"元数据字段类型必须是 {' / '.join(METADATA_TYPES)}")
    return name.strip(), str(kind)


async def create_metadata(dataset_id: str, request: Request, admin: Admin) -> JSONResponse:
    """``POST /v1/datasets/{dataset_id}/metadata`` ``{"type", "name"}`` -> 201
    ``{"id", "type", "name"}``; 400 when the name exists."""
    name, kind = _field_args(await _json_body(request), typed=True)

    def work() -> dict[str, Any]:
        info, fields = _metadata_fields(admin, dataset_id)
        if name in {f["name"] for f in fields}:
            raise ManageError(f"元数据字段 {name} 已存在")
        admin.update_dataset(info.id, metadata_fields={**info.metadata_fields, name: kind})
        return {"id": metadata_field_id(info.id, name), "type": kind, "name": name}

    return JSONResponse(await _blocking(work), status_code=201)


def _field(fields: list[dict[str, Any]], metadata_id: str) -> dict[str, Any]:
    for item in fields:
        if metadata_id in (item["id"], item["name"]):
            return item
    raise ApiError(404, "not_found", "Metadata not found.")


def _unused(item: dict[str, Any], what: str) -> None:
    """Renaming or deleting a field documents carry would change their metadata (their
    roles, for ``access_roles``): refused, update those documents first."""
    if item["count"]:
        raise ManageError(
            f"有 {item['count']} 个文档带有元数据字段 {item['name']}，不能{what}；"
            "请先更新这些文档的元数据"
        )


async def rename_metadata(
    dataset_id: str, metadata_id: str, request: Request, admin: Admin
) -> dict[str, Any]:
    """``PATCH .../metadata/{metadata_id}`` ``{"name"}``: a declared field no document
    carries yet (else 400)."""
    name, _ = _field_args(await _json_body(request), typed=False)

    def work() -> dict[str, Any]:
        info, fields = _metadata_fields(admin, dataset_id)
        item = _field(fields, metadata_id)
        _unused(item, "改名")
        declared = {k: v for k, v in info.metadata_fields.items() if k != item["name"]}
        admin.update_dataset(info.id, metadata_fields={**declared, name: item["type"]})
        return {"id": metadata_field_id(info.id, name), "type": item["type"], "name": name}

    return await _blocking(work)


async def delete_metadata(dataset_id: str, metadata_id: str, admin: Admin) -> Response:
    """``DELETE .../metadata/{metadata_id}`` (204): a declared field no document carries
    (else 400)."""

    def work() -> None:
        info, fields = _metadata_fields(admin, dataset_id)
        item = _field(fields, metadata_id)
        _unused(item, "删除")
        declared = {k: v for k, v in info.metadata_fields.items() if k != item["name"]}
        admin.update_dataset(info.id, metadata_fields=declared)

    await _blocking(work)
    return Response(status_code=204)


async def built_in_fields(dataset_id: str, admin: Admin) -> dict[str, Any]:
    """``GET .../metadata/built-in``."""
    await _blocking(lambda: _find_dataset(admin, dataset_id))
    return {"fields": [{"name": n, "type": t} for n, t in BUILT_IN_FIELDS]}


async def built_in_action(dataset_id: str, action: str, admin: Admin) -> dict[str, Any]:
    """``POST .../metadata/built-in/{action}``: ``disable`` succeeds (they are off);
    ``enable`` is 400 (gcite does not fill Dify's built-in fields)."""
    await _blocking(lambda: _find_dataset(admin, dataset_id))
    if action == "disable":
        return {"result": "success"}
    if action == "enable":
        raise ManageError("gcite 不提供 Dify 的内置元数据字段")
    raise ApiError(404, "not_found", "The requested URL was not found on the server.")


def _operations(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``[(document id, {name: value})]`` of a ``documents/metadata`` body."""
    ops = body.get("operation_data")
    if not isinstance(ops, list):
        raise ManageError("operation_data 必须是列表")
    out = []
    for op in ops:
        if not isinstance(op, dict) or not isinstance(op.get("document_id"), str):
            raise ManageError("operation_data 的每一项都需要 document_id")
        values = doc_metadata(op.get("metadata_list") or [])
        out.append((op["document_id"], values or {}))
    return out


async def update_documents_metadata(
    dataset_id: str, request: Request, admin: Admin
) -> dict[str, Any]:
    """``POST .../documents/metadata`` ``{"operation_data": [{"document_id",
    "metadata_list": [{"id", "name", "value"}]}]}``: each document gets the values
    given (names not given keep theirs: a document's roles are never dropped by
    leaving them out); every document is checked before any changes."""
    ops = _operations(await _json_body(request))

    def work() -> None:
        info = _find_dataset(admin, dataset_id)
        for doc_id, _ in ops:
            admin.find_document(info.id, doc_id)
        for doc_id, values in ops:
            admin.update_document_metadata(info.id, doc_id, values)

    await _blocking(work)
    return {"result": "success"}


# --------------------------------------------------------------------------- tags


async def list_tags(admin: Admin) -> list[dict[str, Any]]:
    """``GET /v1/datasets/tags``: every knowledge tag, newest first."""
    return [tag_body(t) for t in await _blocking(admin.list_tags)]


async def create_tag(request: Request, admin: Admin) -> dict[str, Any]:
    """``POST /v1/datasets/tags`` ``{"name"}`` -> the tag (``binding_count`` ``"0"``)."""
    name = checked_name((await _json_body(request)).get("name"))
    return tag_body(await _blocking(lambda: admin.create_tag(name)))


def _tag_id(body: dict[str, Any]) -> str:
    tag_id = body.get("tag_id")
    if not isinstance(tag_id, str) or not tag_id:
        raise ManageError("tag_id 不能为空")
    return tag_id


async def rename_tag(request: Request, admin: Admin) -> dict[str, Any]:
    """``PATCH /v1/datasets/tags`` ``{"tag_id", "name"}`` -> the tag."""
    body = await _json_body(request)
    tag_id, name = _tag_id(body), checked_name(body.get("name"))
    return tag_body(await _blocking(lambda: admin.rename_tag(tag_id, name)))


async def delete_tag(request: Request, admin: Admin) -> Response:
    """``DELETE /v1/datasets/tags`` ``{"tag_id"}`` (204; its bindings go with it)."""
    tag_id = _tag_id(await _json_body(request))
    await _blocking(lambda: admin.delete_tag(tag_id))
    return Response(status_code=204)


def _binding(body: dict[str, Any]) -> tuple[str, list[str]]:
    """``(target dataset, tag ids)`` of a binding body; ``tag_id`` (one id) is accepted
    where ``tag_ids`` is empty, as Dify's unbinding does."""
    target = body.get("target_id")
    if not isinstance(target, str) or not target:
        raise ManageError("target_id 不能为空")
    ids = body.get("tag_ids")
    if not ids and isinstance(body.get("tag_id"), str) and body["tag_id"]:
        ids = [body["tag_id"]]
    return target, checked_ids(ids)


async def bind_tags(request: Request, admin: Admin) -> Response:
    """``POST /v1/datasets/tags/binding`` ``{"tag_ids", "target_id"}`` (204)."""
    target, ids = _binding(await _json_body(request))
    await _blocking(lambda: admin.bind_tags(_find_dataset(admin, target).id, ids))
    return Response(status_code=204)


async def unbind_tags(request: Request, admin: Admin) -> Response:
    """``POST /v1/datasets/tags/unbinding`` ``{"tag_ids" | "tag_id", "target_id"}`` (204)."""
    target, ids = _binding(await _json_body(request))
    await _blocking(lambda: admin.unbind_tags(_find_dataset(admin, target).id, ids))
    return Response(status_code=204)


async def dataset_tags(dataset_id: str, admin: Admin) -> dict[str, Any]:
    """``GET /v1/datasets/{dataset_id}/tags`` (also POST, as some SDKs send it):
    ``{"data": [{"id", "name"}], "total"}``."""
    info = await _blocking(lambda: _find_dataset(admin, dataset_id))
    return {"data": [{"id": t.id, "name": t.name} for t in info.tags], "total": len(info.tags)}


def knowledge_router() -> APIRouter:
    """The management endpoints (module docstring); the app sets ``app.state.settings``,
    its lifespan state ``knowledge``."""
    router = APIRouter()

    def add(path: str, endpoint: Callable[..., Any], methods: list[str] | None = None) -> None:
        router.add_api_route("/v1/datasets" + path, endpoint, methods=methods or ["POST"])

    dataset = "/{dataset_id}"
    document = f"{dataset}/documents/{{document_id}}"
    segment = f"{document}/segments/{{segment_id}}"
    add("/tags", list_tags, ["GET"])  # before /{dataset_id}
    add("/tags", create_tag)
    add("/tags", rename_tag, ["PATCH"])
    add("/tags", delete_tag, ["DELETE"])
    add("/tags/binding", bind_tags)
    add("/tags/unbinding", unbind_tags)
    add("", list_datasets, ["GET"])
    add("", create_dataset)
    add(dataset, get_dataset, ["GET"])
    add(dataset, update_dataset, ["PATCH"])
    add(dataset, delete_dataset, ["DELETE"])
    add(f"{dataset}/tags", dataset_tags, ["GET", "POST"])
    add(f"{dataset}/retrieve", retrieve)
    add(f"{dataset}/hit-testing", retrieve)
    for sep in ("-", "_"):  # Dify accepts both spellings
        add(f"{dataset}/document/create{sep}by{sep}text", create_by_text)
        add(f"{dataset}/document/create{sep}by{sep}file", create_by_file)
        add(f"{document}/update{sep}by{sep}text", update_by_text)
        add(f"{document}/update{sep}by{sep}file", update_by_file)
    add(f"{dataset}/documents", list_documents, ["GET"])
    add(f"{dataset}/documents/status/{{action}}", document_status, ["PATCH"])
    add(f"{dataset}/documents/metadata", update_documents_metadata)
    add(document, get_document, ["GET"])
    add(document, delete_document, ["DELETE"])
    add(f"{document}/upload-file", upload_file, ["GET"])
    add(f"{dataset}/documents/{{batch}}/indexing-status", indexing_status, ["GET"])
    add(f"{document}/segments", list_segments, ["GET"])
    add(f"{document}/segments", create_segments)
    add(segment, get_segment, ["GET"])
    add(segment, update_segment)
    add(segment, delete_segment, ["DELETE"])
    add(f"{segment}/child_chunks", list_child_chunks, ["GET"])
    add(f"{segment}/child_chunks", child_chunk_write)
    add(f"{segment}/child_chunks/{{child_chunk_id}}", child_chunk_write, ["PATCH", "DELETE"])
    add(f"{dataset}/metadata", list_metadata, ["GET"])
    add(f"{dataset}/metadata", create_metadata)
    add(f"{dataset}/metadata/built-in", built_in_fields, ["GET"])
    add(f"{dataset}/metadata/built-in/{{action}}", built_in_action)
    add(f"{dataset}/metadata/{{metadata_id}}", rename_metadata, ["PATCH"])
    add(f"{dataset}/metadata/{{metadata_id}}", delete_metadata, ["DELETE"])
    return router


__all__ = ["MAX_TEXT_BODY_BYTES", "MAX_UPLOAD_BYTES", "knowledge_router"]
