"""Knowledge tags as Dify keeps them: named labels, bound to datasets.

The tags live in the catalog (``Catalog.tags``: ``{tag_id: {"name", "created_at"}}``;
the pgvector store's ``gcite_kb_tags`` table), the bindings in each dataset's entry
(``"tag_ids"``: a list of tag ids; the pgvector store's dataset ``info``), so a dataset
and its bindings are saved together and a deleted dataset takes its bindings along.

Rules from Dify (``api/controllers/service_api/dataset/dataset.py``,
``api/services/tag_service.py``): a name has 1..50 characters and is unique (400
``invalid_param`` "Tag name already exists"); renaming or deleting an unknown tag is 404
"Tag not found"; binding needs a non-empty ``tag_ids`` (400 "Tag IDs is required.");
binding a bound tag again, or unbinding one that is not bound, changes nothing. Unlike
Dify, binding an unknown tag id is 404 (Dify stores a binding no listing ever shows).

Every write runs under the store's lock and saves the catalog (atomically: the old or
the new state); the caller serialises writers (:class:`gcite.knowledge.manage.LocalAdmin`
holds its write lock).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from gcite.knowledge.admin import ManageError, TagInfo
from gcite.knowledge.store import HybridStore as KnowledgeStore

#: Dify's limit on a tag's name (``TagNamePayload``).
MAX_TAG_NAME_CHARS = 50
#: Tags of one knowledge base (bounds the catalog; Dify sets none).
MAX_TAGS = 1000


def tag_infos(tags: Mapping[str, Mapping[str, Any]], datasets: Mapping[str, Any]) -> list[TagInfo]:
    """The tags of a catalog with their binding counts over ``datasets`` (catalog
    entries), newest first (as Dify lists them)."""
    counts: dict[str, int] = {}
    for entry in datasets.values():
        for tag_id in set(entry.get("tag_ids") or ()):
            counts[tag_id] = counts.get(tag_id, 0) + 1
    order = sorted(tags, key=lambda t: (-_created(tags[t]), str(tags[t].get("name")), t))
    return [TagInfo(t, str(tags[t].get("name", "")), counts.get(t, 0)) for t in order]


def bound_tags(
    tags: Mapping[str, Mapping[str, Any]], entry: Mapping[str, Any]
) -> tuple[TagInfo, ...]:
    """The tags bound to one dataset entry, sorted by name (``binding_count`` 0: not
    counted here); ids of tags that are gone are skipped."""
    found = [
        TagInfo(t, str(tags[t].get("name", "")))
        for t in set(entry.get("tag_ids") or ())
        if t in tags
    ]
    return tuple(sorted(found, key=lambda t: (t.name, t.id)))


def _created(tag: Mapping[str, Any]) -> int:
    value = tag.get("created_at")
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def checked_name(name: Any) -> str:
    """A tag name as given, or 400 when it is not 1..50 characters of text."""
    if not isinstance(name, str) or not name.strip():
        raise ManageError("标签名称不能为空")
    if len(name) > MAX_TAG_NAME_CHARS:
        raise ManageError(f"标签名称不能超过 {MAX_TAG_NAME_CHARS} 个字符")
    return name


def checked_ids(tag_ids: Any) -> list[str]:
    """A binding's ``tag_ids``: a non-empty list of strings (400 as Dify words it)."""
    if not isinstance(tag_ids, list) or not tag_ids:
        raise ManageError("Tag IDs is required.")
    if not all(isinstance(t, str) for t in tag_ids):
        raise ManageError("tag_ids 必须是字符串列表")
    return list(dict.fromkeys(tag_ids))


def _not_found() -> ManageError:
    return ManageError("Tag not found", status=404, code="not_found")


def _unique(tags: Mapping[str, Mapping[str, Any]], name: str, tag_id: str = "") -> None:
    if any(t != tag_id and v.get("name") == name for t, v in tags.items()):
        raise ManageError("Tag name already exists")


def list_tags(store: KnowledgeStore) -> list[TagInfo]:
    """Every tag with its binding count, newest first."""
    with store.lock:
        return tag_infos(store.catalog.tags, store.catalog.datasets)


def _info(store: KnowledgeStore, tag_id: str) -> TagInfo:
    return next(t for t in tag_infos(store.catalog.tags, store.catalog.datasets) if t.id == tag_id)


def create_tag(store: KnowledgeStore, name: Any) -> TagInfo:
    """Create a tag (see :meth:`KnowledgeAdmin.create_tag`)."""
    name = checked_name(name)
    with store.lock:
        catalog = store.catalog
        _unique(catalog.tags, name)
        if len(catalog.tags) >= MAX_TAGS:
            raise ManageError(f"标签数量已达上限（{MAX_TAGS} 个）")
        tag_id = str(uuid.uuid4())
        catalog.tags = {**catalog.tags, tag_id: {"name": name, "created_at": int(time.time())}}
        store.save()
        return _info(store, tag_id)


def rename_tag(store: KnowledgeStore, tag_id: str, name: Any) -> TagInfo:
    """Rename a tag (see :meth:`KnowledgeAdmin.rename_tag`)."""
    name = checked_name(name)
    with store.lock:
        catalog = store.catalog
        if tag_id not in catalog.tags:
            raise _not_found()
        _unique(catalog.tags, name, tag_id)
        catalog.tags = {**catalog.tags, tag_id: {**catalog.tags[tag_id], "name": name}}
        store.save()
        return _info(store, tag_id)


def delete_tag(store: KnowledgeStore, tag_id: str) -> TagInfo:
    """Remove a tag and its bindings (see :meth:`KnowledgeAdmin.delete_tag`)."""
    with store.lock:
        catalog = store.catalog
        if tag_id not in catalog.tags:
            raise _not_found()
        info = _info(store, tag_id)
        for entry in catalog.datasets.values():
            if tag_id in (entry.get("tag_ids") or ()):
                entry["tag_ids"] = [t for t in entry["tag_ids"] if t != tag_id]
        catalog.tags = {k: v for k, v in catalog.tags.items() if k != tag_id}
        store.save()
        return info


def set_bindings(store: KnowledgeStore, name: str, tag_ids: list[str], *, bind: bool) -> None:
    """Bind (``bind``) or unbind ``tag_ids`` on dataset ``name`` (an existing dataset's
    name); binding an unknown tag is 404 and binds nothing."""
    with store.lock:
        catalog = store.catalog
        if bind and any(t not in catalog.tags for t in tag_ids):
            raise _not_found()
        entry = catalog.datasets[name]
        current = list(entry.get("tag_ids") or ())
        have, given = set(current), set(tag_ids)
        if bind:
            wanted = current + [t for t in dict.fromkeys(tag_ids) if t not in have]
        else:
            wanted = [t for t in current if t not in given]
        if wanted == current:
            return
        entry["tag_ids"] = wanted  # in place: an ingestion may hold this entry
        store.save()


__all__ = [
    "MAX_TAGS",
    "MAX_TAG_NAME_CHARS",
    "bound_tags",
    "checked_ids",
    "checked_name",
    "create_tag",
    "delete_tag",
    "list_tags",
    "rename_tag",
    "set_bindings",
    "tag_infos",
]
