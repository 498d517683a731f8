"""The KnowledgeAdmin contract: one suite every management implementation passes.

Subclass :class:`KnowledgeAdminContract` in a pytest module and provide two fixtures:

- ``admin``: a :class:`gcite.knowledge.admin.KnowledgeAdmin` on a knowledge base with no
  dataset named like the ones the suite makes;
- ``search``: a function ``(query, roles) -> set of document names`` (:data:`Search`)
  searching the same knowledge base, as the chat would (``roles=None``: no role filter).

Each test uses datasets of its own name, so one knowledge base may serve the whole class.
Nothing here knows which backend runs underneath. Needs pytest (the ``testing`` extra).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from gcite.knowledge.admin import (
    DatasetInfo,
    DocumentInfo,
    KnowledgeAdmin,
    KnowledgeStatus,
    ManageError,
    SegmentInfo,
    TagInfo,
)

Search = Callable[[str, list[str] | None], set[str]]

FACT = "紫藤花园东侧的自行车棚夜间二十二点后上锁。"
NEW_FACT = "紫藤花园东侧的自行车棚改为夜间二十三点后上锁。"


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class KnowledgeAdminContract:
    """Behaviour of :class:`gcite.knowledge.admin.KnowledgeAdmin`, whatever the backend."""

    def test_satisfies_the_protocol(self, admin: Any) -> None:
        assert isinstance(admin, KnowledgeAdmin)

    def test_datasets_are_created_listed_and_deleted(self, admin: KnowledgeAdmin) -> None:
        name = _name("库")
        made = admin.create_dataset(name)
        assert isinstance(made, DatasetInfo)
        assert (made.name, made.documents, made.chunks) == (name, 0, 0) and made.id
        listed = {d.name: d for d in admin.list_datasets()}
        assert listed[name].id == made.id
        names = [d.name for d in admin.list_datasets()]
        assert names == sorted(names)
        gone = admin.delete_dataset(made.id)  # by id as well as by name
        assert gone.name == name
        assert name not in {d.name for d in admin.list_datasets()}

    def test_a_duplicate_name_is_409_and_a_bad_name_400(self, admin: KnowledgeAdmin) -> None:
        name = _name("库")
        admin.create_dataset(name)
        with pytest.raises(ManageError) as dup:
            admin.create_dataset(name)
        assert (dup.value.status, dup.value.code) == (409, "dataset_name_duplicate")
        for bad in ["", "   ", "a/b", "x" * 200]:
            with pytest.raises(ManageError) as refused:
                admin.create_dataset(bad)
            assert refused.value.status == 400
        admin.delete_dataset(name)

    def test_unknown_datasets_and_documents_are_404(self, admin: KnowledgeAdmin) -> None:
        missing = _name("没有")
        calls: tuple[Callable[[], object], ...] = (
            lambda: admin.delete_dataset(missing),
            lambda: admin.list_documents(missing),
            lambda: admin.upsert_document(missing, name="a.md", data=b"# a\n\ntext"),
        )
        for call in calls:
            with pytest.raises(ManageError) as exc:
                call()
            assert exc.value.status == 404
        name = _name("库")
        admin.create_dataset(name)
        calls = (
            lambda: admin.find_document(name, "nope.md"),
            lambda: admin.delete_document(name, "nope.md"),
        )
        for call in calls:
            with pytest.raises(ManageError) as exc:
                call()
            assert exc.value.status == 404
        admin.delete_dataset(name)

    def test_a_document_is_created_replaced_and_deleted_and_search_follows(
        self, admin: KnowledgeAdmin, search: Search
    ) -> None:
        name = _name("库")
        admin.create_dataset(name)
        made = admin.upsert_document(name, name="bikes", data=f"# 车棚\n\n{FACT}".encode())
        assert made.created and isinstance(made.document, DocumentInfo)
        doc = made.document
        assert (doc.name, doc.dataset) == ("bikes.md", name) and doc.segments >= 1
        assert [d.id for d in admin.list_documents(name)] == [doc.id]
        assert admin.find_document(name, "bikes.md").id == doc.id
        assert admin.find_document(name, doc.id).name == "bikes.md"
        assert "bikes.md" in search("自行车棚几点上锁", None)
        [info] = [d for d in admin.list_datasets() if d.name == name]
        assert (info.documents, info.chunks) == (1, doc.segments)

        again = admin.upsert_document(name, name="bikes.md", data=f"# 车棚\n\n{NEW_FACT}".encode())
        assert not again.created and again.document.id == doc.id
        updated = admin.upsert_document(
            name, name="", data=f"# 车棚\n\n{NEW_FACT}再次更新。".encode(), replace=doc.id
        )
        assert not updated.created and updated.document.id == doc.id
        renamed = admin.upsert_document(
            name, name="other.md", data=f"# 车棚\n\n{FACT}".encode(), replace=doc.id
        )
        assert (renamed.document.id, renamed.document.name) == (doc.id, "other.md")
        assert [d.name for d in admin.list_documents(name)] == ["other.md"]
        found = search("自行车棚几点上锁", None)
        assert "other.md" in found and "bikes.md" not in found

        removed = admin.delete_document(name, doc.id)
        assert removed.id == doc.id
        assert admin.list_documents(name) == []
        assert "bikes.md" not in search("自行车棚几点上锁", None)
        admin.delete_dataset(name)

    def test_metadata_roles_hold_from_the_first_moment(
        self, admin: KnowledgeAdmin, search: Search
    ) -> None:
        name = _name("库")
        admin.create_dataset(name)
        admin.upsert_document(
            name,
            name="guarded.md",
            data=f"# 车棚\n\n{FACT}".encode(),
            metadata={"access_roles": ["安保主管"]},
        )
        assert "guarded.md" not in search("自行车棚几点上锁", [])
        assert "guarded.md" in search("自行车棚几点上锁", ["安保主管"])
        with pytest.raises(ManageError) as bad:
            admin.upsert_document(
                name, name="bad.md", data=b"# x\n\ny", metadata={"access_roles": 3}
            )
        assert bad.value.status == 400
        assert [d.name for d in admin.list_documents(name)] == ["guarded.md"]
        admin.delete_dataset(name)

    def test_a_document_that_cannot_be_parsed_is_422_and_changes_nothing(
        self, admin: KnowledgeAdmin
    ) -> None:
        name = _name("库")
        admin.create_dataset(name)
        with pytest.raises(ManageError) as broken:
            admin.upsert_document(name, name="broken.pdf", data=b"not a pdf at all")
        assert broken.value.status == 422  # the converter's status: unparsable
        assert admin.list_documents(name) == []
        admin.delete_dataset(name)

    def test_status_counts_what_is_stored(self, admin: KnowledgeAdmin) -> None:
        name = _name("库")
        admin.create_dataset(name)
        admin.upsert_document(name, name="a.md", data=f"# 车棚\n\n{FACT}".encode())
        info = admin.status()
        assert isinstance(info, KnowledgeStatus)
        assert info.embedder and info.location
        [mine] = [d for d in info.datasets if d.name == name]
        assert mine.documents == 1 and mine.chunks >= 1
        assert info.stored_chunks >= mine.chunks
        admin.delete_dataset(name)

    def test_records_carry_dify_values(self, admin: KnowledgeAdmin) -> None:
        name = _name("库")
        made = admin.create_dataset(name)
        assert made.created_at > 0
        first = admin.upsert_document(name, name="a.md", data=f"# 车棚\n\n{FACT}".encode())
        second = admin.upsert_document(name, name="b.md", data=f"# 车棚\n\n{NEW_FACT}".encode())
        assert (first.document.position, second.document.position) == (1, 2)
        assert first.document.word_count > 10 and first.document.tokens > 3
        assert first.document.created_at > 0
        again = admin.upsert_document(name, name="a.md", data=f"# 车棚\n\n{FACT}再次。".encode())
        assert again.document.created_at == first.document.created_at
        assert again.document.position == 1
        info = admin.update_dataset(name, description="说明", metadata_fields={"负责人": "string"})
        assert (info.description, info.metadata_fields) == ("说明", {"负责人": "string"})
        assert info.word_count > 0 and info.updated_at >= info.created_at
        with pytest.raises(ManageError) as bad:
            admin.update_dataset(name, metadata_fields={"x": "list"})
        assert bad.value.status == 400
        admin.delete_dataset(name)

    def test_segments_are_listed_added_changed_and_removed(
        self, admin: KnowledgeAdmin, search: Search
    ) -> None:
        name = _name("库")
        admin.create_dataset(name)
        doc = admin.upsert_document(
            name,
            name="guarded.md",
            data=f"# 车棚\n\n{FACT}".encode(),
            metadata={"access_roles": ["安保主管"]},
        ).document
        listed = admin.list_segments(name, doc.id)
        assert [s.position for s in listed] == list(range(1, doc.segments + 1))
        assert all(isinstance(s, SegmentInfo) and s.document_id == doc.id for s in listed)
        [made] = admin.create_segments(name, doc.id, ["地下车库的消防通道禁止停车。"])
        assert made.position == len(listed) + 1
        assert "guarded.md" in search("消防通道能停车吗", ["安保主管"])
        assert "guarded.md" not in search("消防通道能停车吗", [])  # the roles hold
        changed = admin.update_segment(name, doc.id, made.id, "消防通道全天禁止停放车辆。")
        assert (changed.id, changed.content) == (made.id, "消防通道全天禁止停放车辆。")
        removed = admin.delete_segment(name, doc.id, made.id)
        assert removed.id == made.id
        assert [s.id for s in admin.list_segments(name, doc.id)] == [s.id for s in listed]
        with pytest.raises(ManageError) as missing:
            admin.update_segment(name, doc.id, made.id, "x")
        assert missing.value.status == 404
        admin.delete_dataset(name)

    def test_retrieve_and_metadata_updates_keep_roles(
        self, admin: KnowledgeAdmin, search: Search
    ) -> None:
        name = _name("库")
        admin.create_dataset(name)
        doc = admin.upsert_document(
            name,
            name="guarded.md",
            data=f"# 车棚\n\n{FACT}".encode(),
            metadata={"access_roles": ["安保主管"]},
        ).document
        items = admin.retrieve(name, "自行车棚几点上锁", top_k=3)
        assert items and items[0]["metadata"]["document_name"] == "guarded.md"
        assert items[0]["metadata"]["position"] == 1
        updated = admin.update_document_metadata(name, doc.id, {"负责人": "张三"})
        assert updated.metadata["负责人"] == "张三"
        assert updated.metadata["access_roles"] == ["安保主管"]
        assert "guarded.md" not in search("自行车棚几点上锁", [])
        assert "guarded.md" in search("自行车棚几点上锁", ["安保主管"])
        with pytest.raises(ManageError) as missing:
            admin.retrieve(_name("没有"), "车棚", top_k=3)
        assert missing.value.status == 404
        admin.delete_dataset(name)

    def test_tags_are_created_renamed_bound_and_deleted(self, admin: KnowledgeAdmin) -> None:
        first, second = _name("标签"), _name("标签")
        a = admin.create_tag(first)
        b = admin.create_tag(second)
        assert isinstance(a, TagInfo) and (a.name, a.binding_count) == (first, 0) and a.id
        assert a.id != b.id
        listed = {t.id: t for t in admin.list_tags()}
        assert (listed[a.id].name, listed[b.id].name) == (first, second)
        name = _name("库")
        admin.create_dataset(name)
        assert admin.list_datasets() and _dataset(admin, name).tags == ()
        bound = admin.bind_tags(name, [a.id, b.id])
        assert {t.id for t in bound.tags} == {a.id, b.id}
        admin.bind_tags(name, [a.id])  # again: nothing changes
        assert {t.id: t.binding_count for t in admin.list_tags()}[a.id] == 1
        renamed = admin.rename_tag(a.id, first + "新")
        assert (renamed.id, renamed.name, renamed.binding_count) == (a.id, first + "新", 1)
        assert {t.name for t in _dataset(admin, name).tags} == {first + "新", second}
        after = admin.unbind_tags(name, [b.id, _name("没有")])  # an unbound id is no error
        assert [t.id for t in after.tags] == [a.id]
        gone = admin.delete_tag(a.id)
        assert gone.id == a.id and gone.binding_count == 1
        assert a.id not in {t.id for t in admin.list_tags()}
        assert _dataset(admin, name).tags == ()
        admin.delete_tag(b.id)
        admin.delete_dataset(name)

    def test_tag_names_follow_dify_and_unknown_tags_are_404(self, admin: KnowledgeAdmin) -> None:
        first = _name("标签")
        tag = admin.create_tag(first)
        with pytest.raises(ManageError) as dup:
            admin.create_tag(first)
        assert (dup.value.status, str(dup.value)) == (400, "Tag name already exists")
        for bad in ["", "   ", "x" * 51]:
            with pytest.raises(ManageError) as refused:
                admin.create_tag(bad)
            assert refused.value.status == 400
        assert admin.create_tag("y" * 50).name == "y" * 50
        other = next(t for t in admin.list_tags() if t.name == "y" * 50)
        with pytest.raises(ManageError) as taken:
            admin.rename_tag(other.id, first)
        assert taken.value.status == 400
        missing = str(uuid.uuid4())
        calls: list[Callable[[], TagInfo]] = [
            lambda: admin.rename_tag(missing, _name("标签")),
            lambda: admin.delete_tag(missing),
        ]
        for call in calls:
            with pytest.raises(ManageError) as unknown:
                call()
            assert (unknown.value.status, unknown.value.code) == (404, "not_found")
        name = _name("库")
        admin.create_dataset(name)
        with pytest.raises(ManageError) as unknown_tag:
            admin.bind_tags(name, [tag.id, missing])
        assert unknown_tag.value.status == 404
        assert _dataset(admin, name).tags == ()  # nothing bound
        with pytest.raises(ManageError) as empty:
            admin.bind_tags(name, [])
        assert empty.value.status == 400
        with pytest.raises(ManageError) as no_dataset:
            admin.bind_tags(_name("没有"), [tag.id])
        assert no_dataset.value.status == 404
        admin.bind_tags(name, [tag.id])
        admin.delete_dataset(name)  # its bindings go with it
        assert {t.id: t.binding_count for t in admin.list_tags()}[tag.id] == 0
        admin.delete_tag(tag.id)
        admin.delete_tag(other.id)


def _dataset(admin: KnowledgeAdmin, name: str) -> DatasetInfo:
    return next(d for d in admin.list_datasets() if d.name == name)
