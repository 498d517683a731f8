"""gcite.testing's in-memory store passes the one store contract, and keeps what it is given."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gcite.errors import StoreError
from gcite.roles import RoleValueError
from gcite.testing import MemoryStore
from gcite.testing.corpus import DATASET, MANIFEST, write_mixed
from gcite.testing.store_contract import KnowledgeStoreContract


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("memory-contract")
    write_mixed(base / "docs")
    manifest = base / "manifest.json"
    manifest.write_text(json.dumps(MANIFEST, ensure_ascii=False), encoding="utf-8")
    return base / "docs", manifest


def _filled(corpus: tuple[Path, Path]) -> MemoryStore:
    store = MemoryStore()
    failed = store.ingest([corpus[0]], dataset=DATASET, manifest=corpus[1])
    assert sorted(p.name for p, _ in failed) == ["broken.pdf", "fake.docx"]
    return store


class TestMemoryStore(KnowledgeStoreContract):
    @pytest.fixture
    def store(self, corpus: tuple[Path, Path]) -> Iterator[Any]:
        with _filled(corpus) as store:
            yield store

    @pytest.fixture
    def reopen(self, corpus: tuple[Path, Path]) -> Callable[[], Any]:
        return lambda: _filled(corpus)


def test_add_replaces_a_document_and_validates_its_roles() -> None:
    store = MemoryStore()
    doc = store.add("库", "a.md", "第一条 旧的电梯规定。", {"access_roles": "运维"})
    assert store.add("库", "a.md", "第一条 新的电梯规定。", {"access_roles": ["运维"]}) == doc
    items = store.search("电梯", roles=["运维"])
    assert [i["content"] for i in items] == ["第一条 新的电梯规定。"]
    assert items[0]["metadata"]["doc_metadata"]["document_title"] == "a"
    assert store.search("电梯", roles=[]) == []
    assert store.visible_document_ids([doc], roles=["运维"]) == {doc}
    with pytest.raises(RoleValueError):
        store.add("库", "b.md", "文本", {"access_roles": {"bad": 1}})
    store.close()
    with pytest.raises(StoreError):
        store.add("库", "c.md", "文本")
