"""A :class:`~gcite.knowledge.admin.KnowledgeAdmin` reached over Dify's Knowledge API.

:class:`RemoteAdmin` manages the knowledge base of another gcite service (the knowledge
process of ``gcite serve --workers N``, a ``knowledge_url`` service, or a service that
``gcite ingest --url`` writes to) through its ``/v1/datasets`` endpoints
(:mod:`gcite.service.knowledge_api`) with an admin key. Bodies are read and written by
:mod:`gcite.dify.knowledge_api`.

Mapping of answers: 400 / 404 / 409 (and other 4xx but 401 / 403) are the caller's
mistake, :class:`~gcite.knowledge.admin.ManageError` with the remote status, code and
message; 401 / 403 (the key is not an admin key there: :class:`KeyRefused`), any 5xx, a
body that is not Dify's shape, a timeout or an unreachable service are
:class:`~gcite.errors.StoreError` (not the caller's fault). One ``httpx.Client`` per
admin; thread-safe.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from gcite.dify.knowledge_api import (
    dataset_record,
    document_record,
    retrieve_items,
    segment_record,
    tag_record,
)
from gcite.errors import StoreError
from gcite.knowledge.admin import (
    DatasetInfo,
    DocumentInfo,
    KnowledgeStatus,
    ManageError,
    SegmentInfo,
    TagInfo,
    Upserted,
    match_document,
)

UPLOAD_TIMEOUT_S = 600.0
POLL_S = 0.1  # between two indexing-status calls while the service indexes a document
"""Longest wait for one call (seconds): an upload is converted and embedded before the
answer."""


class KeyRefused(StoreError):
    """The remote service refused the key (HTTP 401 / 403): not an admin key there."""


class EndpointMissing(StoreError):
    """The remote service has no such endpoint (HTTP 404 / 405 for the route itself, as
    Dify or gcite answer an unknown path or method): ``endpoint`` is ``"METHOD path"``."""

    def __init__(self, message: str, endpoint: str) -> None:
        super().__init__(message)
        self.endpoint = endpoint


#: The messages of a 404 for an unknown path (werkzeug's, which Dify answers, and
#: Starlette's, which gcite answers) and of a 405 for an unknown method.
_NO_ROUTE = ("The requested URL was not found", "Not Found", "The method is not allowed")


def origin_of(url: str) -> str:
    """``scheme://host:port`` of ``url`` (the Knowledge API lives at the root)."""
    parts = urlsplit(url.strip())
    if not parts.scheme or not parts.netloc:
        raise StoreError(f"知识库地址无效: {url!r}")
    return f"{parts.scheme}://{parts.netloc}"


class RemoteAdmin:
    """Manage the knowledge base of the service at ``url`` (any URL of it: only its origin
    is used) with admin key ``key``. ``timeout_s``: per call."""

    def __init__(
        self,
        url: str,
        key: str,
        *,
        timeout_s: float = UPLOAD_TIMEOUT_S,
    ) -> None:
        self.base = origin_of(url)
        self._timeout_s = timeout_s
        self._client = httpx.Client(
            base_url=self.base,
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout_s,
        )

    # ------------------------------------------------------------------ datasets

    def list_datasets(self) -> list[DatasetInfo]:
        """See :meth:`KnowledgeAdmin.list_datasets`."""
        return [dataset_record(b) for b in self._pages("/v1/datasets")]

    def create_dataset(self, name: str) -> DatasetInfo:
        """See :meth:`KnowledgeAdmin.create_dataset`."""
        return dataset_record(self._call("POST", "/v1/datasets", json={"name": name}))

    def delete_dataset(self, dataset: str) -> DatasetInfo:
        """See :meth:`KnowledgeAdmin.delete_dataset`."""
        info = self._info(dataset)
        self._call("DELETE", _dataset_path(info.id))
        return info

    def update_dataset(
        self,
        dataset: str,
        *,
        description: str | None = None,
        metadata_fields: Mapping[str, str] | None = None,
    ) -> DatasetInfo:
        """See :meth:`KnowledgeAdmin.update_dataset` (``PATCH`` the dataset; the declared
        metadata fields through ``.../metadata``)."""
        path = self._path(dataset)
        if description is not None:
            self._call("PATCH", path, json={"description": description})
        if metadata_fields is not None:
            self._set_fields(path, metadata_fields)
        return self._dataset(dataset)

    def _set_fields(self, path: str, wanted: Mapping[str, str]) -> None:
        body = self._call("GET", f"{path}/metadata")
        rows = body.get("doc_metadata") if isinstance(body, dict) else None
        current = {
            str(r.get("name")): r
            for r in (rows if isinstance(rows, list) else [])
            if isinstance(r, dict)
        }
        for name, row in current.items():
            if name not in wanted and not row.get("count"):
                self._call("DELETE", f"{path}/metadata/{_segment(str(row.get('id')))}")
        for name, kind in wanted.items():
            if name not in current:
                self._call("POST", f"{path}/metadata", json={"type": kind, "name": name})

    # ------------------------------------------------------------------ tags

    def list_tags(self) -> list[TagInfo]:
        """See :meth:`KnowledgeAdmin.list_tags`."""
        rows = self._call("GET", "/v1/datasets/tags", listing=True)
        return [tag_record(r) for r in rows if isinstance(r, dict)]

    def create_tag(self, name: str) -> TagInfo:
        """See :meth:`KnowledgeAdmin.create_tag`."""
        return tag_record(self._call("POST", "/v1/datasets/tags", json={"name": name}))

    def rename_tag(self, tag_id: str, name: str) -> TagInfo:
        """See :meth:`KnowledgeAdmin.rename_tag`."""
        body = {"tag_id": tag_id, "name": name}
        return tag_record(self._call("PATCH", "/v1/datasets/tags", json=body))

    def delete_tag(self, tag_id: str) -> TagInfo:
        """See :meth:`KnowledgeAdmin.delete_tag`."""
        tag = next((t for t in self.list_tags() if t.id == tag_id), None)
        if tag is None:
            raise ManageError("Tag not found", status=404, code="not_found")
        self._call("DELETE", "/v1/datasets/tags", json={"tag_id": tag_id})
        return tag

    def bind_tags(self, dataset: str, tag_ids: list[str]) -> DatasetInfo:
        """See :meth:`KnowledgeAdmin.bind_tags`."""
        return self._bindings("binding", dataset, tag_ids)

    def unbind_tags(self, dataset: str, tag_ids: list[str]) -> DatasetInfo:
        """See :meth:`KnowledgeAdmin.unbind_tags`."""
        return self._bindings("unbinding", dataset, tag_ids)

    def _bindings(self, action: str, dataset: str, tag_ids: list[str]) -> DatasetInfo:
        target = self._info(dataset).id
        body = {"tag_ids": tag_ids, "target_id": target}
        self._call("POST", f"/v1/datasets/tags/{action}", json=body)
        return self._dataset(target)

    def _dataset(self, dataset: str) -> DatasetInfo:
        info = self._info(dataset)
        body = self._call("GET", f"{_dataset_path(info.id)}/metadata")
        rows = body.get("doc_metadata") if isinstance(body, dict) else None
        declared = {
            str(r.get("name")): str(r.get("type"))
            for r in (rows if isinstance(rows, list) else [])
            if isinstance(r, dict) and not r.get("count")
        }
        return replace(info, metadata_fields=declared)

    def retrieve(
        self,
        dataset: str,
        query: str,
        *,
        top_k: int,
        score_threshold: float = 0.0,
        condition: Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """See :meth:`KnowledgeAdmin.retrieve` (``POST .../retrieve``)."""
        model: dict[str, Any] = {
            "top_k": top_k,
            "score_threshold_enabled": score_threshold > 0,
            "score_threshold": score_threshold,
        }
        if condition is not None:
            model["metadata_filtering_conditions"] = dict(condition)
        info = self._info(dataset)
        body = self._call(
            "POST",
            f"{_dataset_path(info.id)}/retrieve",
            json={"query": query, "retrieval_model": model},
        )
        return retrieve_items(body, info)

    # ------------------------------------------------------------------ documents

    def list_documents(self, dataset: str) -> list[DocumentInfo]:
        """See :meth:`KnowledgeAdmin.list_documents`."""
        info = self._info(dataset)
        bodies = self._pages(f"{_dataset_path(info.id)}/documents")
        docs = [document_record(b, info.name) for b in bodies]
        return sorted(docs, key=lambda d: (d.name, d.id))

    def find_document(self, dataset: str, ref: str) -> DocumentInfo:
        """See :meth:`KnowledgeAdmin.find_document` (by id or file name, from the list:
        Dify's document paths take ids only)."""
        return match_document(self.list_documents(dataset), ref)

    def upsert_document(
        self,
        dataset: str,
        *,
        name: str,
        data: bytes,
        metadata: Mapping[str, Any] | None = None,
        replace: str | None = None,
    ) -> Upserted:
        """See :meth:`KnowledgeAdmin.upsert_document` (``create-by-file`` /
        ``update-by-file``: the bytes go as they are, the service converts them)."""
        info = self._info(dataset)
        path = _dataset_path(info.id)
        if replace is None:
            existing = {d.name for d in self.list_documents(dataset)}
            url = f"{path}/document/create-by-file"
        else:
            existing = set()
            current = self.find_document(info.id, replace)
            name = name or current.name  # the file's name
            url = f"{path}/documents/{_segment(current.id)}/update-by-file"
        # Dify needs a process rule for the first document of a dataset; gcite ignores it
        fields: dict[str, Any] = {
            "indexing_technique": "high_quality",
            "process_rule": {"mode": "automatic"},
            "doc_form": "text_model",
        }
        if name:
            fields["name"] = name
        if metadata is not None:
            fields["doc_metadata"] = dict(metadata)
        body = self._call(
            "POST",
            url,
            files={"file": (name or "document", data)},
            data={"data": json.dumps(fields, ensure_ascii=False)},
        )
        document = body.get("document") if isinstance(body, dict) else None
        if not isinstance(document, dict):
            raise StoreError("远程知识库返回的文档格式无效")
        doc = document_record(document, info.name)
        if document.get("indexing_status") != "completed":  # indexed after the answer
            self._wait_indexed(path, str(body.get("batch") or ""))
            doc = self.find_document(info.id, doc.id)
        created = replace is None and doc.name not in existing
        if metadata and not set(metadata) <= set(doc.metadata):
            self._refuse_without_metadata(info, doc, metadata, created)
        return Upserted(doc, created=created)

    def _wait_indexed(self, path: str, batch: str) -> None:
        """Poll the indexing status of ``batch`` until it is completed; its ``error`` is a
        :class:`ManageError` (with the status the service gave the failure)."""
        deadline = time.monotonic() + self._timeout_s  # a hang guard
        while True:
            body = self._call("GET", f"{path}/documents/{_segment(batch)}/indexing-status")
            items = body.get("data") if isinstance(body, dict) else None
            item = items[0] if isinstance(items, list) and items else {}
            status = item.get("indexing_status") if isinstance(item, dict) else None
            if status == "completed":
                return
            if status == "error":
                failure = item.get("gcite_error") or {}
                raise ManageError(
                    str(item.get("error") or "文档未能导入"),
                    status=int(failure.get("status") or 422),
                    code=str(failure.get("code") or "invalid_param"),
                )
            if time.monotonic() > deadline:
                raise StoreError("远程知识库的文档索引超时")
            time.sleep(POLL_S)

    def _refuse_without_metadata(
        self, info: DatasetInfo, doc: DocumentInfo, metadata: Mapping[str, Any], created: bool
    ) -> None:
        """The service dropped the document's metadata (Dify's create-by-file has no
        ``doc_metadata``): a new document is removed again (its ``access_roles`` would
        not hold there) and the upload is refused."""
        if created:
            self._call("DELETE", f"{_dataset_path(info.id)}/documents/{_segment(doc.id)}")
        missing = "、".join(sorted(set(metadata) - set(doc.metadata)))
        raise ManageError(
            f"远程服务 {self.base} 没有保存随文档提交的元数据（{missing}），"
            "文档未导入：这个服务的知识库接口不接受 doc_metadata（Dify 的就不接受），"
            "带 access_roles 等元数据的文档请导入 gcite 服务"
        )

    def update_document_metadata(
        self, dataset: str, ref: str, metadata: Mapping[str, Any]
    ) -> DocumentInfo:
        """See :meth:`KnowledgeAdmin.update_document_metadata`."""
        doc = self.find_document(dataset, ref)
        values = [{"name": k, "value": v} for k, v in metadata.items()]
        operation = {"document_id": doc.id, "metadata_list": values}
        path = f"{self._path(dataset)}/documents/metadata"
        self._call("POST", path, json={"operation_data": [operation]})
        return self.find_document(dataset, doc.id)

    # ------------------------------------------------------------------ segments

    def _segments_path(self, dataset: str, ref: str) -> str:
        doc = self.find_document(dataset, ref)
        return f"{self._path(dataset)}/documents/{_segment(doc.id)}/segments"

    def list_segments(self, dataset: str, ref: str) -> list[SegmentInfo]:
        """See :meth:`KnowledgeAdmin.list_segments`."""
        return [segment_record(b) for b in self._pages(self._segments_path(dataset, ref))]

    def create_segments(self, dataset: str, ref: str, contents: list[str]) -> list[SegmentInfo]:
        """See :meth:`KnowledgeAdmin.create_segments`."""
        segments = [{"content": c} for c in contents]
        body = self._call("POST", self._segments_path(dataset, ref), json={"segments": segments})
        rows = body.get("data") if isinstance(body, dict) else None
        if not isinstance(rows, list):
            raise StoreError("远程知识库返回的分段格式无效")
        return [segment_record(r) for r in rows if isinstance(r, dict)]

    def update_segment(self, dataset: str, ref: str, segment_id: str, content: str) -> SegmentInfo:
        """See :meth:`KnowledgeAdmin.update_segment`."""
        path = f"{self._segments_path(dataset, ref)}/{_segment(segment_id)}"
        body = self._call("POST", path, json={"segment": {"content": content}})
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict):
            raise StoreError("远程知识库返回的分段格式无效")
        return segment_record(data)

    def delete_segment(self, dataset: str, ref: str, segment_id: str) -> SegmentInfo:
        """See :meth:`KnowledgeAdmin.delete_segment`."""
        path = f"{self._segments_path(dataset, ref)}/{_segment(segment_id)}"
        data = self._call("GET", path).get("data")
        if not isinstance(data, dict):
            raise StoreError("远程知识库返回的分段格式无效")
        self._call("DELETE", path)
        return segment_record(data)

    def delete_document(self, dataset: str, ref: str) -> DocumentInfo:
        """See :meth:`KnowledgeAdmin.delete_document`."""
        doc = self.find_document(dataset, ref)
        self._call("DELETE", f"{self._path(dataset)}/documents/{_segment(doc.id)}")
        return doc

    def status(self) -> KnowledgeStatus:
        """See :meth:`KnowledgeAdmin.status` (the vector size is not known remotely: 0)."""
        datasets = self.list_datasets()
        embedder = next((d.embedding_model for d in datasets if d.embedding_model), "")
        return KnowledgeStatus(
            location=self.base,
            embedder=embedder,
            dimensions=0,
            datasets=datasets,
            stored_chunks=sum(d.chunks for d in datasets),
        )

    def close(self) -> None:
        """Close the HTTP client. Idempotent."""
        self._client.close()

    def __enter__(self) -> RemoteAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers

    def _info(self, dataset: str) -> DatasetInfo:
        """The dataset whose name or id is ``dataset`` (from the list: Dify's dataset
        paths take ids only); 404 :class:`ManageError` when there is none."""
        for info in self.list_datasets():
            if dataset in (info.id, info.name):
                return info
        raise ManageError(f"没有数据集 {dataset}", status=404, code="not_found")

    def _path(self, dataset: str) -> str:
        return _dataset_path(self._info(dataset).id)

    def _pages(self, path: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        page = 1
        while True:
            body = self._call("GET", path, params={"page": page, "limit": 100})
            rows = body.get("data") if isinstance(body, dict) else None
            if not isinstance(rows, list):
                raise StoreError("远程知识库返回的列表格式无效")
            items.extend(r for r in rows if isinstance(r, dict))
            if not body.get("has_more") or not rows:
                return items
            page += 1

    def _call(self, method: str, path: str, *, listing: bool = False, **kwargs: Any) -> Any:
        """The JSON answer (an object; a list where ``listing``); errors as in the class
        docstring."""
        try:
            response = self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise StoreError(f"远程知识库 {self.base} 不可用: {type(exc).__name__}") from exc
        if response.status_code == 204:
            return {}
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code in (200, 201):
            if not isinstance(body, list if listing else dict):
                raise StoreError("远程知识库返回的数据不是 JSON 对象")
            return body
        message = ""
        code = "invalid_param"
        if isinstance(body, dict):
            message = str(body.get("message") or "")
            code = str(body.get("code") or code)
        status = response.status_code
        if status == 405 or (status == 404 and message.startswith(_NO_ROUTE)):
            endpoint = f"{method} {path}"
            raise EndpointMissing(
                f"远程服务 {self.base} 没有知识库接口 {endpoint}（HTTP {status}）", endpoint
            )
        if status in (401, 403):
            raise KeyRefused(
                f"远程知识库 {self.base} 拒绝了管理请求"
                "（knowledge_admin_key 或 knowledge_key 不是它的管理密钥）"
            )
        if 400 <= status < 500:
            raise ManageError(message or f"HTTP {status}", status=status, code=code)
        raise StoreError(f"远程知识库 {self.base} 出错: HTTP {status} {message}".rstrip())


def _segment(value: str) -> str:
    return quote(value, safe="")


def _dataset_path(dataset: str) -> str:
    return f"/v1/datasets/{_segment(dataset)}"


__all__ = ["EndpointMissing", "KeyRefused", "RemoteAdmin", "origin_of"]
