"""A :class:`~gcite.knowledge.protocol.KnowledgeStore` reached over Dify's External Knowledge API.

:class:`RemoteStore` calls ``POST {knowledge_url}/retrieval`` (the endpoint gcite serves,
docs/dify-external-knowledge.md, or any Dify-compatible external knowledge endpoint) with one
key (``knowledge_key``) that holds every role, and narrows each request to the caller's roles
with an ``access_roles`` condition. The server's narrowing rules
(:mod:`gcite.service.retrieval_roles`) only ever narrow, and ``roles=[]`` or an empty role value
fails closed (documents without roles only). Dataset listing uses the management API
(``GET {origin}/v1/datasets``) with an admin key of that service (``knowledge_admin_key``,
by default the same key).

Mapping of errors: HTTP 400/3002 -> :class:`FilterError`; 404/2001, any other status, a
timeout or an unreachable endpoint -> :class:`StoreError`. One long-lived ``httpx.Client``
(keep-alive pool) per store; thread-safe, synchronous like every store.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from gcite.dify.external_knowledge import record_item
from gcite.errors import FilterError, StoreError
from gcite.knowledge.filters import ROLE_FIELD, Cond, Group, Node, Not, parse_condition
from gcite.knowledge.results import rank
from gcite.knowledge.search_args import clamp_top_k


def condition_json(node: Node) -> dict[str, Any]:
    """A parsed condition back in Dify's JSON shape (``Not`` has no Dify form: FilterError)."""
    if isinstance(node, Cond):
        return {"name": node.name, "comparison_operator": node.op, "value": node.value}
    if isinstance(node, Group):
        return {
            "logical_operator": node.op,
            "conditions": [condition_json(child) for child in node.children],
        }
    if isinstance(node, Not):
        raise FilterError("远程知识库不支持 not 条件")
    raise FilterError(f"无法识别的条件: {node!r}")


class RemoteStore:
    """Hybrid search through ``/retrieval``; see the module docstring.

    ``url``: the endpoint base (``http://host:port{retrieval_prefix}``; ``/retrieval`` is
    appended, as Dify does). ``key``: a retrieval key holding every role. ``admin_key``:
    an admin key of the management API, for :meth:`datasets` (default ``key``: the
    internal key of ``gcite serve --workers`` is both). ``timeout_s``: per request.
    """

    def __init__(self, url: str, key: str, *, admin_key: str = "", timeout_s: float = 5.0) -> None:
        if not url.strip():
            raise StoreError("knowledge_url 为空")
        self._url = url.rstrip("/")
        parts = urlsplit(self._url)
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._client = httpx.Client(
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout_s,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=32),
        )
        self._admin_headers = {"Authorization": f"Bearer {admin_key or key}"}
        self._closed = False
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ protocol

    def search(
        self,
        query: str,
        *,
        dataset: str | None = None,
        roles: Sequence[str] | None = None,
        condition: Mapping[str, Any] | Node | None = None,
        top_k: int = 5,
        score_threshold: float = 0.0,
    ) -> list[dict[str, Any]]:
        """Search one dataset (or every dataset when ``dataset`` is ``None``)."""
        self._check_open()
        wanted = _role_list(roles)
        extra = self._condition(condition)
        if not query.strip():
            return []
        names = [dataset] if dataset is not None else self.datasets()
        top_k = clamp_top_k(top_k)
        items: list[dict[str, Any]] = []
        for name in names:
            items.extend(self._retrieve(name, query, wanted, extra, top_k, score_threshold))
        return rank(items)[:top_k]

    def datasets(self) -> list[str]:
        """Dataset names from the management API (``GET /v1/datasets``), sorted."""
        self._check_open()
        names: list[str] = []
        page = 1
        while True:
            data = self._call(
                "GET",
                f"{self._origin}/v1/datasets",
                params={"page": page},
                headers=self._admin_headers,
            )
            rows = data.get("data") if isinstance(data, dict) else None
            if not isinstance(rows, list):
                raise StoreError("远程知识库返回的数据集列表格式无效")
            names.extend(str(r.get("name") or r.get("id")) for r in rows if isinstance(r, dict))
            if not data.get("has_more"):
                return sorted(set(names))
            page += 1

    def visible_document_ids(
        self, document_ids: Sequence[str], *, roles: Sequence[str], dataset: str | None = None
    ) -> set[str]:
        """Ids among ``document_ids`` with a chunk visible to ``roles`` (one search per id)."""
        self._check_open()
        wanted = _role_list(roles)
        assert wanted is not None
        names = self.datasets()
        if dataset is not None:
            if dataset not in names:
                return set()
            names = [dataset]
        visible: set[str] = set()
        for document_id in dict.fromkeys(d for d in document_ids if isinstance(d, str) and d):
            cond = {"name": "document_id", "comparison_operator": "is", "value": document_id}
            for name in names:
                if self._retrieve(name, "文档", wanted, cond, 1, 0.0):
                    visible.add(document_id)
                    break
        return visible

    def close(self) -> None:
        """Close the HTTP client. Idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._client.close()

    def __enter__(self) -> RemoteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("远程知识库连接已关闭")

    @staticmethod
    def _condition(condition: Mapping[str, Any] | Node | None) -> dict[str, Any] | None:
        if condition is None:
            return None
        node = (
            condition if isinstance(condition, Cond | Group | Not) else parse_condition(condition)
        )
        return condition_json(node)

    def _retrieve(
        self,
        dataset: str,
        query: str,
        roles: list[str] | None,
        extra: dict[str, Any] | None,
        top_k: int,
        score_threshold: float,
    ) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        if roles is not None:
            # An empty value fails closed on the server: documents without roles only.
            parts.append({"name": ROLE_FIELD, "comparison_operator": "in", "value": roles})
        if extra is not None:
            parts.append(extra)
        body: dict[str, Any] = {
            "knowledge_id": dataset,
            "query": query,
            "retrieval_setting": {"top_k": top_k, "score_threshold": score_threshold},
        }
        if parts:
            body["metadata_condition"] = {"logical_operator": "and", "conditions": parts}
        data = self._call("POST", f"{self._url}/retrieval", json=body)
        records = data.get("records") if isinstance(data, dict) else None
        if not isinstance(records, list):
            raise StoreError("远程知识库返回的 records 格式无效")
        return [record_item(r, dataset) for r in records if isinstance(r, dict)]

    def _call(self, method: str, url: str, **kwargs: Any) -> Any:
        try:
            response = self._client.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            raise StoreError(f"远程知识库不可用: {exc}") from exc
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code == 200:
            return data
        code = data.get("error_code") if isinstance(data, dict) else None
        message = ""
        if isinstance(data, dict):
            message = str(data.get("error_msg") or data.get("message") or "")
        if response.status_code == 400 and code == 3002:
            raise FilterError(message or "条件无效")
        raise StoreError(f"远程知识库错误 HTTP {response.status_code} {code}: {message}")


def _role_list(roles: Sequence[str] | None) -> list[str] | None:
    if roles is None:
        return None
    if isinstance(roles, str) or not all(isinstance(r, str) for r in roles):
        raise FilterError("roles 必须是字符串列表")
    return list(dict.fromkeys(roles))


__all__ = ["RemoteStore", "condition_json"]
