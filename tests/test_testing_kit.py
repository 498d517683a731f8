"""gcite.testing's helpers: a live service on loopback, a free port, and no pytest at import."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

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
