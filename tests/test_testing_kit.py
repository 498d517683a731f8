"""gcite.testing's helpers: a live service on loopback, a free port, and no pytest at import."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from gcite.testing import busy_port, free_port, live_service


def test_importing_the_kit_needs_no_pytest() -> None:
    code = (
        "import sys, gcite.testing, gcite.testing.memory, gcite.testing.server, "
        "gcite.testing.corpus, gcite.testing.archdoc\n"
        "from gcite.testing import MemoryStore, live_service, free_port\n"
        "assert 'pytest' not in sys.modules, 'pytest imported'"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_live_service_serves_until_the_block_ends() -> None:
    events: list[str] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, object]]:
        events.append("start")
        yield {"counter": events}
        events.append("stop")

    app = FastAPI(lifespan=lifespan)

    @app.get("/ping")
    def ping() -> dict[str, str]:
        return {"pong": "ok"}

    state: dict[str, object] = {}
    with live_service(app, state=state) as base_url:
        assert state == {"counter": events} and state["counter"] is events
        assert base_url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{base_url}/ping", timeout=30).json() == {"pong": "ok"}
        assert events == ["start"]
    assert events == ["start", "stop"]
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{base_url}/ping", timeout=30)


def test_a_service_whose_start_up_fails_raises() -> None:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        raise RuntimeError("no store")
        yield

    with (
        pytest.raises(RuntimeError, match="did not start"),
        live_service(FastAPI(lifespan=lifespan)),
    ):
        pass


def test_free_port_can_be_bound() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_busy_port_is_taken_until_the_block_ends() -> None:
    with busy_port() as port, socket.socket() as other, pytest.raises(OSError):
        other.bind(("127.0.0.1", port))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


THIRD_PARTY = """
import json

import pytest

from gcite.testing import MemoryStore
from gcite.testing.corpus import DATASET, MANIFEST, write_mixed
from gcite.testing.store_contract import KnowledgeStoreContract


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    base = tmp_path_factory.mktemp("kb")
    write_mixed(base / "docs")
    (base / "manifest.json").write_text(json.dumps(MANIFEST, ensure_ascii=False), "utf-8")
    return base


def _open(base):
    store = MemoryStore()
    store.ingest([base / "docs"], dataset=DATASET, manifest=base / "manifest.json")
    return store


class TestMyStore(KnowledgeStoreContract):
    @pytest.fixture
    def store(self, corpus):
        with _open(corpus) as store:
            yield store

    @pytest.fixture
    def reopen(self, corpus):
        return lambda: _open(corpus)
"""


def test_a_contract_suite_runs_outside_gcites_own_tests(tmp_path: Path) -> None:
    """What docs/testing.md tells a third party to write runs with plain pytest: no
    conftest of gcite's, no configuration, another folder."""
    (tmp_path / "test_my_store.py").write_text(THIRD_PARTY, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_my_store.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "passed" in result.stdout and "failed" not in result.stdout
