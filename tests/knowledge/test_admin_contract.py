"""Both KnowledgeAdmin implementations pass the one contract (:mod:`gcite.testing.admin_contract`).

- :class:`gcite.knowledge.manage.LocalAdmin`: the data dir's own embedded store, reached
  through :class:`gcite.knowledge.access.KnowledgeAccess` (as the service and the CLI do),
  and the same over the pgvector store;
- :class:`gcite.knowledge.remote_admin.RemoteAdmin`: a real gcite service (uvicorn on a
  free loopback port) managed through its Knowledge API, as a worker of ``gcite serve
  --workers N`` or a ``knowledge_url`` service is.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from gcite.config import ApiKey, Settings
from gcite.errors import StoreError
from gcite.knowledge.access import KnowledgeAccess
from gcite.knowledge.manage import LocalAdmin
from gcite.knowledge.remote_admin import RemoteAdmin
from gcite.service.app import create_app
from gcite.testing.admin_contract import KnowledgeAdminContract, Search
from support.pg import fresh_database

KEY = "admin-every-role"
ROLES = ("安保主管",)


def _search_with(access: KnowledgeAccess) -> Search:
    def search(query: str, roles: list[str] | None) -> set[str]:
        items = access.store().search(query, roles=roles, top_k=10)
        return {str(i["metadata"]["document_name"]) for i in items}

    return search


@pytest.fixture(scope="module")
def local_access(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeAccess]:
    base = tmp_path_factory.mktemp("local-admin")
    with KnowledgeAccess(Settings.from_keys(data_dir=base / "data", embed_backend="use")) as access:
        yield access


class TestLocalAdmin(KnowledgeAdminContract):
    @pytest.fixture
    def access(self, local_access: KnowledgeAccess) -> KnowledgeAccess:
        return local_access

    @pytest.fixture
    def admin(self, access: KnowledgeAccess) -> Any:
        admin = access.admin()
        assert isinstance(admin, LocalAdmin)
        return admin

    @pytest.fixture
    def search(self, access: KnowledgeAccess) -> Search:
        return _search_with(access)


@pytest.fixture(scope="module")
def pgvector_settings(tmp_path_factory: pytest.TempPathFactory, pgvector_url: str) -> Settings:
    return Settings.from_keys(
        data_dir=tmp_path_factory.mktemp("pgvector-admin") / "data",
        embed_backend="use",
        store="pgvector",
        knowledge_database_url=fresh_database(pgvector_url),
    )


@pytest.fixture(scope="module")
def pgvector_access(pgvector_settings: Settings) -> Iterator[KnowledgeAccess]:
    with KnowledgeAccess(pgvector_settings) as access:
        yield access


class TestPgvectorAdmin(KnowledgeAdminContract):
    """The local admin on the pgvector store (the catalog in the database's tables)."""

    @pytest.fixture
    def access(self, pgvector_access: KnowledgeAccess) -> KnowledgeAccess:
        return pgvector_access

    @pytest.fixture
    def admin(self, access: KnowledgeAccess) -> Any:
        admin = access.admin()
        assert isinstance(admin, LocalAdmin)
        return admin

    @pytest.fixture
    def search(self, access: KnowledgeAccess) -> Search:
        return _search_with(access)


@pytest.mark.parametrize("backend", ["local", "pgvector"])
def test_tags_and_bindings_survive_a_restart(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Tags and bindings are stored (catalog.json, or the pgvector tables): a second
    KnowledgeAccess on the same data sees them, and a deleted tag stays deleted."""
    if backend == "pgvector":
        url = fresh_database(request.getfixturevalue("pgvector_url"))
        extra: dict[str, Any] = {"store": "pgvector", "knowledge_database_url": url}
    else:
        extra = {}
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use", **extra)
    with KnowledgeAccess(settings) as access:
        admin = access.admin()
        admin.create_dataset("标签库")
        kept, dropped = admin.create_tag("保留"), admin.create_tag("删除")
        admin.bind_tags("标签库", [kept.id, dropped.id])
        admin.rename_tag(kept.id, "保留的")
        admin.delete_tag(dropped.id)
    with KnowledgeAccess(settings) as access:
        admin = access.admin()
        assert [(t.id, t.name, t.binding_count) for t in admin.list_tags()] == [
            (kept.id, "保留的", 1)
        ]
        info = next(d for d in admin.list_datasets() if d.name == "标签库")
        assert [(t.id, t.name) for t in info.tags] == [(kept.id, "保留的")]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A gcite service on a fresh data dir; its base URL."""
    base = tmp_path_factory.mktemp("remote-admin")
    settings = Settings.from_keys(
        data_dir=base / "data",
        embed_backend="use",
        retrieval_keys=[ApiKey(key=KEY, roles=ROLES)],
        admin_keys=[ApiKey(key=KEY)],
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(settings), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120  # a hang guard
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture(scope="module")
def remote_access(service: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    settings = Settings.from_keys(
        data_dir=tmp_path_factory.mktemp("never-written"),
        knowledge_url=service,  # the service's retrieval_prefix is empty
        knowledge_key=KEY,
    )
    with KnowledgeAccess(settings) as access:
        _warm(access)
        yield access
    assert list(Path(settings.data_dir).iterdir()) == []  # nothing written locally


def _warm(access: KnowledgeAccess) -> None:
    """Load the service's embedding model once (the External Knowledge API answers a
    search that takes longer than Dify's timeout with 504, and the first search of a
    fresh process loads the model): search until one answers, within a hang guard."""
    admin = access.admin()
    admin.create_dataset("预热")
    admin.upsert_document("预热", name="warm.md", data="# 预热\n\n预热文本。".encode())
    deadline = time.monotonic() + 300
    while True:
        try:
            access.store().search("预热", dataset="预热", top_k=1)
            break
        except StoreError:
            assert time.monotonic() < deadline, "the service never answered a search"
    admin.delete_dataset("预热")


class TestRemoteAdmin(KnowledgeAdminContract):
    @pytest.fixture
    def access(self, remote_access: KnowledgeAccess) -> KnowledgeAccess:
        return remote_access

    @pytest.fixture
    def admin(self, access: KnowledgeAccess) -> Any:
        admin = access.admin()
        assert isinstance(admin, RemoteAdmin)
        return admin

    @pytest.fixture
    def search(self, access: KnowledgeAccess) -> Search:
        return _search_with(access)


def test_a_remote_admin_refused_or_unreachable_is_a_store_error(service: str) -> None:
    """Not the caller's fault: the service answers 503 for these (errors.api_error)."""
    with (
        RemoteAdmin(service, "not-an-admin-key") as admin,
        pytest.raises(StoreError, match="knowledge_key"),
    ):
        admin.list_datasets()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    with (
        RemoteAdmin(f"http://127.0.0.1:{closed}", KEY) as admin,
        pytest.raises(StoreError, match="不可用"),
    ):
        admin.list_datasets()
