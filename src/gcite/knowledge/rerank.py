"""An optional rerank step through a rerank HTTP API (Jina / Cohere / Xinference protocol).

The protocol the three share (and Dify's rerank model providers speak)::

    POST {rerank_url}                      (e.g. https://host/v1/rerank)
    Authorization: Bearer {rerank_api_key} (when set)
    {"model": "...", "query": "...", "documents": ["...", ...], "top_n": N,
     "return_documents": false}
    -> 200 {"results": [{"index": 3, "relevance_score": 0.91}, ...], ...}

``results`` lists (some of) the documents by ``index`` into ``documents`` with a
``relevance_score`` in 0-1, best first (order is not relied on: they are sorted
here). Configured by URL (``rerank_url``, ``rerank_model``, ``rerank_api_key``,
``rerank_timeout_s``); the store then sends the text of its best candidates
(:data:`RERANK_CANDIDATES`) and reports the reranker's ``relevance_score`` as the
score, so ``score_threshold`` applies to it. A failing reranker (timeout, HTTP
error, malformed answer) raises :class:`RerankError`; the store logs it and keeps
its own relevance order and scores (documented fallback, the search still answers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import httpx

from gcite.errors import StoreError

RERANK_CANDIDATES = 20
MAX_DOCUMENT_CHARS = 2000


class RerankError(StoreError):
    """The rerank API failed or answered something that is not a rerank result."""


class RerankClient:
    """Synchronous client of one rerank endpoint (``url`` is the full ``.../rerank`` URL)."""

    def __init__(
        self,
        url: str,
        model: str = "",
        api_key: str = "",
        *,
        timeout_s: float = 5.0,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.url = url
        self.model = model
        self._client = httpx.Client(headers=headers, timeout=timeout_s)

    def rerank(self, query: str, documents: Sequence[str], top_n: int) -> list[tuple[int, float]]:
        """``(index, relevance_score)`` pairs, best first, at most ``top_n``.

        Raises :class:`RerankError` on transport errors, HTTP status >= 400 and malformed
        answers (no ``results`` list, an index out of range, a score that is not a finite
        number).
        """
        if not documents:
            return []
        body: dict[str, Any] = {
            "query": query,
            "documents": [d[:MAX_DOCUMENT_CHARS] for d in documents],
            "top_n": min(max(int(top_n), 1), len(documents)),
            "return_documents": False,
        }
        if self.model:
            body["model"] = self.model
        try:
            response = self._client.post(self.url, json=body)
        except httpx.HTTPError as exc:
            raise RerankError(f"重排序服务请求失败: {exc}") from exc
        if response.status_code >= 400:
            raise RerankError(f"重排序服务返回 HTTP {response.status_code}: {response.text[:200]}")
        try:
            results = response.json()["results"]
            pairs = [(int(r["index"]), float(r["relevance_score"])) for r in results]
        except (ValueError, KeyError, TypeError) as exc:
            raise RerankError(f"重排序服务返回的数据格式无效: {exc}") from exc
        for index, score in pairs:
            if not 0 <= index < len(documents) or not math.isfinite(score):
                raise RerankError(f"重排序服务返回的结果无效: index={index} score={score}")
        best: dict[int, float] = {}
        for index, score in pairs:
            best[index] = max(score, best.get(index, score))
        unique = sorted(best.items(), key=lambda pair: -pair[1])
        return unique[: body["top_n"]]

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()


__all__ = ["MAX_DOCUMENT_CHARS", "RERANK_CANDIDATES", "RerankClient", "RerankError"]
