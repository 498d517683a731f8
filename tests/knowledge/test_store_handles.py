"""Open stores and embedders belong to their owner (a :class:`StoreHandles`), not to the
process: stores opened through one owner share the Qdrant Edge shard and the embedder;
another owner in the same process has its own (and is refused the shard while it is
held, as another process would be). Against the embeddings stand-in (a real loopback
server) and a real Qdrant Edge shard."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from gcite.config import Settings
from gcite.errors import StoreError
from gcite.knowledge import ingest_paths, open_store
from gcite.knowledge.store import StoreHandles
from gcite.service.resources import Resources

from .embed_standin import EmbeddingStandin


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    base = tmp_path_factory.mktemp("handles")
    (base / "docs").mkdir()
    (base / "docs" / "a.txt").write_text("电梯每十五日至少进行一次维护保养。", encoding="utf-8")
    with EmbeddingStandin() as server:
        settings = Settings.from_keys(
            data_dir=base / "data",
            embed_backend="openai",
            embed_base_url=server.base_url,
            embed_model="bigram-64",
        )
        assert ingest_paths([base / "docs"], settings=settings, dataset="制度").ok
        yield settings


def test_stores_of_one_owner_share_the_shard_and_the_embedder(settings: Settings) -> None:
    handles = StoreHandles()
    first = open_store(settings, handles=handles)
    second = open_store(settings, handles=handles)
    try:
        assert first.embedder() is second.embedder() is handles.embedders.get(settings)
        first.close()
        assert second.search("电梯维保", top_k=1)  # the shard stays open for the other
    finally:
        first.close()
        second.close()
    with open_store(settings, handles=handles) as again:  # the last close released it
        assert again.search("电梯维保", top_k=1)


def test_another_owner_has_its_own_handle(settings: Settings) -> None:
    with open_store(settings, handles=StoreHandles()) as held:
        with pytest.raises(StoreError, match="正被另一个进程使用"):
            open_store(settings, handles=StoreHandles())  # nothing process-wide shares it
        assert held.embedder() is not StoreHandles().embedders.get(settings)
    with open_store(settings) as alone:  # released: anyone may open it now
        assert alone.search("电梯维保", top_k=1)


def test_the_service_resources_share_one_owner(settings: Settings, tmp_path: Path) -> None:
    service = settings.with_keys(database_url=f"sqlite:///{tmp_path / 'chat.sqlite3'}")
    resources = Resources(service)
    try:
        store = resources.get_store()
        admin = resources.knowledge.admin()
        assert store.embedder() is resources.handles.embedders.get(service)  # type: ignore[attr-defined]
        assert [d.name for d in admin.list_datasets()] == ["制度"]
        with open_store(service, handles=resources.handles) as beside:  # e.g. an ingest
            assert beside.search("电梯维保", top_k=1)
    finally:
        asyncio.run(resources.aclose())
