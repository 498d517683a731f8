"""The knowledge base's bookkeeping: datasets, documents and the embedder, with stable ids.

:class:`Catalog` is persisted as ``<data_dir>/catalog.json`` (written atomically); the
pgvector store keeps the same data in its tables (``gcite.knowledge.stores.pgvector``).
:func:`stable_id` gives the deterministic ids of datasets, documents and segments.
Errors: :class:`gcite.errors.StoreError` for an unreadable or malformed catalog.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gcite.errors import StoreError

CATALOG_FORMAT = 1
CATALOG_NAME = "catalog.json"
NAMESPACE = uuid.UUID("6f1c3c2e-8f0b-4a4e-9a53-2c6d0e9b7a11")


def stable_id(*parts: str) -> str:
    """A deterministic UUID (string) for ids: dataset, document, segment."""
    return str(uuid.uuid5(NAMESPACE, "\x00".join(parts)))


def dataset_by_ref(names: Iterable[str], ref: str) -> str | None:
    """The name among dataset ``names`` that is ``ref`` or whose id (:func:`stable_id`
    ``("dataset", name)``, the id the Knowledge API shows) is ``ref``; ``None``."""
    known = list(names)
    if ref in known:
        return ref
    return next((n for n in known if stable_id("dataset", n) == ref), None)


@dataclass
class Catalog:
    """Dataset bookkeeping persisted as ``<data_dir>/catalog.json``.

    ``datasets[name] = {"dataset_id", "array_fields": [...], "tag_ids"?: [...],
    "documents": {document_id: {"path", "root", "name", "title", "hash", "segments"}}}``
    (``title``: the title ingestion found for the document, its chunks' when no
    ``document_title`` was given);
    ``tags[tag_id] = {"name", "created_at"}`` (:mod:`gcite.knowledge.tags`).
    """

    path: Path
    embedder: str = ""
    dim: int = 0
    datasets: dict[str, dict[str, Any]] = field(default_factory=dict)
    tags: dict[str, dict[str, Any]] = field(default_factory=dict)
    revision: int = field(default=0, compare=False)
    """Counts the saves (and reloads) of this catalog: what was derived from one state
    (the query vocabulary) is current while the revision is the same."""

    @classmethod
    def load(cls, path: Path) -> Catalog:
        """Read the catalog; raises :class:`StoreError` when it is unreadable or malformed."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise StoreError(f"知识库数据损坏: 无法读取 {path}: {exc}") from exc
        if (
            not isinstance(raw, dict)
            or raw.get("format") != CATALOG_FORMAT
            or not isinstance(raw.get("datasets"), dict)
            or not isinstance(raw.get("tags", {}), dict)
            or not all(isinstance(t, dict) for t in raw.get("tags", {}).values())
        ):
            raise StoreError(f"知识库数据损坏: {path} 不是 gcite 知识库目录文件")
        return cls(
            path,
            str(raw.get("embedder", "")),
            int(raw.get("dim", 0)),
            raw["datasets"],
            raw.get("tags", {}),
        )

    def save(self) -> None:
        """Write atomically (temporary file + rename)."""
        data = {
            "format": CATALOG_FORMAT,
            "embedder": self.embedder,
            "dim": self.dim,
            "datasets": self.datasets,
            "tags": self.tags,
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)
        self.revision += 1

    def dataset(self, name: str) -> dict[str, Any]:
        """The entry of ``name``, created when missing."""
        entry = self.datasets.setdefault(
            name, {"dataset_id": stable_id("dataset", name), "array_fields": [], "documents": {}}
        )
        return entry

    def array_fields(self) -> frozenset[str]:
        """Names of list-valued metadata fields over all datasets."""
        return frozenset(f for d in self.datasets.values() for f in d.get("array_fields", []))

    def refresh(self, *, sync: bool = False) -> None:
        """Bring the catalog up to date with changes made by other processes: nothing to
        do for a data dir, which one process owns (the pgvector catalog reloads; ``sync``:
        also with every change committed before this call, at the cost of a round trip)."""
        return None


__all__ = ["CATALOG_FORMAT", "CATALOG_NAME", "NAMESPACE", "Catalog", "dataset_by_ref", "stable_id"]
