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
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from gcite.dify.knowledge_api import dataset_record, document_record
from gcite.errors import StoreError
from gcite.knowledge.admin import (
    DatasetInfo,
    DocumentInfo,
    KnowledgeStatus,
    ManageError,
    Upserted,
)

UPLOAD_TIMEOUT_S = 600.0
POLL_S = 0.1  # between two indexing-status calls while the service indexes a document
"""Longest wait for one call (seconds): an upload is converted and embedded before the
answer."""


class KeyRefused(StoreError):
    """The remote service refused the key (HTTP 401 / 403): not an admin key there."""


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
        info = dataset_record(self._call("GET", _dataset_path(dataset)))
        self._call("DELETE", _dataset_path(dataset))
        return info

    # ------------------------------------------------------------------ documents

    def list_documents(self, dataset: str) -> list[DocumentInfo]:
        """See :meth:`KnowledgeAdmin.list_documents`."""
        name = self._dataset_name(dataset)
        bodies = self._pages(f"{_dataset_path(dataset)}/documents")
        return [document_record(b, name) for b in bodies]

    def find_document(self, dataset: str, ref: str) -> DocumentInfo:
        """See :meth:`KnowledgeAdmin.find_document`."""
        name = self._dataset_name(dataset)
        body = self._call("GET", f"{_dataset_path(dataset)}/documents/{_segment(ref)}")
        return document_record(body, name)

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
        path = _dataset_path(dataset)
        if replace is None:
            existing = {d.name for d in self.list_documents(dataset)}
            url = f"{path}/document/create-by-file"
        else:
            existing = set()
            name = name or self.find_document(dataset, replace).name  # the file's name
            url = f"{path}/documents/{_segment(replace)}/update-by-file"
        fields: dict[str, Any] = {"indexing_technique": "high_quality"}
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
        doc = document_record(document, self._dataset_name(dataset))
        if document.get("indexing_status") != "completed":
            self._wait_indexed(path, str(body.get("batch") or ""))
            doc = self.find_document(dataset, doc.id)
        created = replace is None and doc.name not in existing
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

    def delete_document(self, dataset: str, ref: str) -> DocumentInfo:
        """See :meth:`KnowledgeAdmin.delete_document`."""
        doc = self.find_document(dataset, ref)
        self._call("DELETE", f"{_dataset_path(dataset)}/documents/{_segment(doc.id)}")
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

    def _dataset_name(self, dataset: str) -> str:
        for info in self.list_datasets():
            if dataset in (info.id, info.name):
                return info.name
        raise ManageError(f"没有数据集 {dataset}", status=404, code="not_found")

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

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
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
        if response.status_code == 200:
            if not isinstance(body, dict):
                raise StoreError("远程知识库返回的数据不是 JSON 对象")
            return body
        message = ""
        code = "invalid_param"
        if isinstance(body, dict):
            message = str(body.get("message") or "")
            code = str(body.get("code") or code)
        status = response.status_code
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


__all__ = ["KeyRefused", "RemoteAdmin", "origin_of"]
