"""The knowledge-management seam: datasets and documents listed, created, replaced, deleted.

:class:`KnowledgeAdmin` is a :class:`typing.Protocol` beside
:class:`~gcite.knowledge.protocol.KnowledgeStore` (which searches). Two implementations:
:class:`gcite.knowledge.manage.LocalAdmin` (the data dir's own store) and
:class:`gcite.knowledge.remote_admin.RemoteAdmin` (Dify's Knowledge API of another gcite,
e.g. the knowledge process of ``gcite serve --workers N``). Get one from
:class:`gcite.knowledge.access.KnowledgeAccess`; every implementation passes
:mod:`gcite.testing.admin_contract`.

Records are frozen dataclasses; errors are :class:`ManageError` (the caller's mistake:
``status`` 400 / 404 / 409 with a Dify ``code``) and
:class:`~gcite.errors.StoreError` (the store or the remote end failed: not the caller's
fault). Every method blocks: call it from a worker thread in async code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from gcite.errors import GciteError


class ManageError(GciteError):
    """A management request that cannot be done because of what was asked.

    ``status``: the HTTP status to answer (400 bad input, 404 unknown dataset or document,
    409 duplicate name); ``code``: Dify's error code; the message is Chinese.
    """

    def __init__(self, message: str, *, status: int = 400, code: str = "invalid_param") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


#: Dify's metadata field types.
METADATA_TYPES = ("string", "number", "time")


@dataclass(frozen=True)
class TagInfo:
    """One knowledge tag (Dify's ``type: "knowledge"`` tag): id, name (1..50
    characters, unique) and ``binding_count`` (the datasets it is bound to)."""

    id: str
    name: str
    binding_count: int = 0


@dataclass(frozen=True)
class DatasetInfo:
    """One dataset: stable id, name, numbers of documents and chunks, and the embedding
    model its vectors were made with (``""`` before the first document); ``description``,
    ``created_at`` / ``updated_at`` (Unix seconds, 0 when not known), ``word_count``
    (characters of its documents' text) and the metadata fields declared for it
    (``metadata_fields``: ``{name: Dify type}``, besides those its documents carry);
    ``tags``: the tags bound to it, sorted by name."""

    id: str
    name: str
    documents: int
    chunks: int
    embedding_model: str = ""
    description: str = ""
    created_at: int = 0
    updated_at: int = 0
    word_count: int = 0
    metadata_fields: dict[str, str] = field(default_factory=dict)
    tags: tuple[TagInfo, ...] = ()


@dataclass(frozen=True)
class DocumentInfo:
    """One document of a dataset: id, file name, dataset name, where its file is kept
    (``path``, ``""`` when not known), stored chunks (``segments``), last change (Unix
    seconds) and its metadata (``doc_metadata``; empty when not known); ``created_at``
    (first ingestion, kept on update; Unix seconds), ``position`` (1..n in order of
    creation), ``word_count`` (characters of its text) and ``tokens`` (its text's tokens
    as gcite's tokeniser counts them); 0 when not known."""

    id: str
    name: str
    dataset: str
    path: str
    segments: int
    updated_at: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: int = 0
    position: int = 0
    word_count: int = 0
    tokens: int = 0


@dataclass(frozen=True)
class SegmentInfo:
    """One stored chunk of a document (Dify's segment): id, document id, ``position``
    (1-based in the document), text, ``word_count`` (characters), ``tokens`` (gcite's
    tokeniser), ``index_node_hash`` (hash of the text) and ``created_at`` (Unix seconds)."""

    id: str
    document_id: str
    position: int
    content: str
    word_count: int
    tokens: int
    index_node_hash: str
    created_at: int = 0


@dataclass(frozen=True)
class Upserted:
    """A document after :meth:`KnowledgeAdmin.upsert_document`; ``created`` is False when
    it replaced one with the same name (or the one named by ``replace``);
    ``roles_change``: ``(roles before, roles after)`` (sorted) when the replacement changed
    the document's ``access_roles``, else ``None``."""

    document: DocumentInfo
    created: bool
    roles_change: tuple[tuple[str, ...], tuple[str, ...]] | None = None


@dataclass(frozen=True)
class KnowledgeStatus:
    """What ``gcite status`` shows: where the store is, its embedder and vector size
    (0 when not known), the datasets, and the number of stored chunks."""

    location: str
    embedder: str
    dimensions: int
    datasets: list[DatasetInfo]
    stored_chunks: int


@runtime_checkable
class KnowledgeAdmin(Protocol):
    """Manage one knowledge base (module docstring). ``dataset`` arguments are a dataset's
    name or id; document ``ref`` arguments a document's id or file name."""

    def list_datasets(self) -> list[DatasetInfo]:
        """Every dataset, sorted by name."""
        ...

    def create_dataset(self, name: str) -> DatasetInfo:
        """Create an empty dataset; 409 ``dataset_name_duplicate`` when the name exists,
        400 for an empty or invalid name."""
        ...

    def delete_dataset(self, dataset: str) -> DatasetInfo:
        """Remove a dataset with all its documents; returns it as it was. 404 if unknown."""
        ...

    def update_dataset(
        self,
        dataset: str,
        *,
        description: str | None = None,
        metadata_fields: Mapping[str, str] | None = None,
    ) -> DatasetInfo:
        """Change a dataset's ``description`` and its declared ``metadata_fields``
        (``{name: "string" | "number" | "time"}``, replacing the declared set; ``None``:
        keep it); returns the dataset as it is now. 404 if unknown, 400 for a description
        over 400 characters or a bad field name or type."""
        ...

    def list_documents(self, dataset: str) -> list[DocumentInfo]:
        """The documents of ``dataset``, sorted by name; 404 when the dataset is unknown."""
        ...

    def list_tags(self) -> list[TagInfo]:
        """Every knowledge tag with its ``binding_count``, newest first."""
        ...

    def create_tag(self, name: str) -> TagInfo:
        """Create a tag; 400 ``invalid_param`` for a name that is empty, longer than 50
        characters or already a tag's."""
        ...

    def rename_tag(self, tag_id: str, name: str) -> TagInfo:
        """Rename a tag (its bindings are kept); 404 ``not_found`` when unknown, 400 as
        for :meth:`create_tag`."""
        ...

    def delete_tag(self, tag_id: str) -> TagInfo:
        """Remove a tag and its bindings; returns it as it was. 404 when unknown."""
        ...

    def bind_tags(self, dataset: str, tag_ids: list[str]) -> DatasetInfo:
        """Bind tags to a dataset (binding a bound tag again changes nothing); returns the
        dataset as it is now. 404 for an unknown dataset or tag (nothing is bound then),
        400 for an empty ``tag_ids``."""
        ...

    def unbind_tags(self, dataset: str, tag_ids: list[str]) -> DatasetInfo:
        """Remove tags from a dataset (a tag not bound to it is no error); returns the
        dataset as it is now. 404 for an unknown dataset, 400 for an empty ``tag_ids``."""
        ...

    def list_segments(self, dataset: str, ref: str) -> list[SegmentInfo]:
        """The stored chunks of a document in order of ``position``; 404 when the dataset
        or the document is unknown."""
        ...

    def create_segments(self, dataset: str, ref: str, contents: list[str]) -> list[SegmentInfo]:
        """Add chunks with the texts ``contents`` at the end of a document, indexed with
        its metadata (its roles too); returns them. 404 unknown document, 400 empty text."""
        ...

    def update_segment(self, dataset: str, ref: str, segment_id: str, content: str) -> SegmentInfo:
        """Replace the text of one chunk (same id and position); 404 when unknown."""
        ...

    def delete_segment(self, dataset: str, ref: str, segment_id: str) -> SegmentInfo:
        """Remove one chunk; returns it as it was. 404 when unknown."""
        ...

    def retrieve(
        self,
        dataset: str,
        query: str,
        *,
        top_k: int,
        score_threshold: float = 0.0,
        condition: Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Search one dataset without a role filter (an admin sees every document):
        Dify Knowledge Retrieval ``result`` items, best first (:mod:`gcite.knowledge.results`).
        404 when the dataset is unknown, 400 for a malformed ``condition``."""
        ...

    def find_document(self, dataset: str, ref: str) -> DocumentInfo:
        """One document; 404 when unknown, 400 when a name matches several documents."""
        ...

    def upsert_document(
        self,
        dataset: str,
        *,
        name: str,
        data: bytes,
        metadata: Mapping[str, Any] | None = None,
        replace: str | None = None,
    ) -> Upserted:
        """Create document ``name`` from file bytes, or replace the one with that name.

        ``name``'s suffix chooses the converter (without a supported one it is Markdown
        and gets ``.md``); ``metadata`` (e.g. ``access_roles``) is in force from the first
        moment; without it a replaced document keeps its metadata (its roles above all).
        ``replace``: the id or name of the document to replace (an update: ``name`` may be
        empty; another name renames it, its id kept). The replacement is atomic: searches
        see the old version until the new one is complete. A document that cannot be
        converted, or refused metadata, is 4xx and changes nothing.
        """
        ...

    def update_document_metadata(
        self, dataset: str, ref: str, metadata: Mapping[str, Any]
    ) -> DocumentInfo:
        """Set metadata values of a document (the names given; the others, its roles
        among them, are kept) and re-index it; returns it as it is now. 404 when unknown,
        400 for refused metadata (e.g. a malformed ``access_roles``: nothing changes)."""
        ...

    def delete_document(self, dataset: str, ref: str) -> DocumentInfo:
        """Remove a document; returns it as it was. 404 when unknown."""
        ...

    def status(self) -> KnowledgeStatus:
        """Where the store is and what it holds."""
        ...

    def close(self) -> None:
        """Release what this admin holds. Idempotent."""
        ...


def match_document(documents: Iterable[DocumentInfo], ref: str) -> DocumentInfo:
    """The one document of ``documents`` whose id or file name is ``ref``.

    Raises :class:`ManageError` 404 ``document_not_found`` when none matches, 400 when
    the name matches several (the message lists their ids)."""
    matches = [d for d in documents if ref in (d.id, d.name)]
    if not matches:
        raise ManageError(f"数据集中没有文档 {ref}", status=404, code="document_not_found")
    if len(matches) > 1:
        ids = ", ".join(d.id for d in matches)
        raise ManageError(f"有多个文档名为 {ref}，请用文档 id 指定: {ids}")
    return matches[0]


__all__ = [
    "METADATA_TYPES",
    "DatasetInfo",
    "DocumentInfo",
    "KnowledgeAdmin",
    "KnowledgeStatus",
    "ManageError",
    "SegmentInfo",
    "TagInfo",
    "Upserted",
    "match_document",
]
