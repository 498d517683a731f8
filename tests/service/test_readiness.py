"""The readiness gate: a process that is not ready answers proxied requests 503
``not_ready`` before anything runs (so nginx sends them to another machine), and serves
direct clients as before.

A real service on loopback; "not ready" is real too: its model endpoint refuses
connections, or the server begins to stop (``Readiness.drain``, what SIGTERM does).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_streams import LiveServer, run_service

from gcite.config import ApiKey, Settings
from gcite.knowledge import ingest_paths
from gcite.service.readiness import RETRY_AFTER_S, Readiness
from gcite.testing import free_port

KEY = "app-ready-secret"
APP = {"Authorization": f"Bearer {KEY}"}
PROXIED = {**APP, "X-Forwarded-For": "10.0.0.7"}


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("ready")
    (base / "docs").mkdir()
    (base / "docs" / "visitor.md").write_text("# 访客\n\n访客在一层大堂登记。\n", encoding="utf-8")
    settings = Settings.from_keys(data_dir=base / "data")
    assert ingest_paths([base / "docs"], settings=settings, dataset="d").ok
    return base / "data"


def _settings(kb: Path, **extra: Any) -> Settings:
    return Settings.from_keys(
        data_dir=kb,
        database_url=f"sqlite:///{kb.parent / f'chat-{time.monotonic_ns()}.sqlite3'}",
        app_keys=[ApiKey(KEY, (), name="front-desk")],
        **extra,
    )


@pytest.fixture
def model_down(kb: Path) -> Iterator[LiveServer]:
    down = f"http://127.0.0.1:{free_port()}/v1"
    with run_service(_settings(kb, llm_base_url=down, llm_model="m")) as server:
        ready = httpx.get(server.base_url + "/ready", headers=PROXIED, timeout=60)
        assert ready.status_code == 503  # /ready answers for itself, proxied or not
        assert ready.json()["checks"] == {"store": True, "model": False}
        yield server


def test_a_process_that_is_not_ready_answers_proxied_requests_503(
    model_down: LiveServer,
) -> None:
    answer = httpx.get(model_down.base_url + "/v1/parameters", headers=PROXIED, timeout=60)
    assert answer.status_code == 503
    assert answer.headers["retry-after"] == str(RETRY_AFTER_S)
    assert answer.json()["code"] == "not_ready" and answer.json()["status"] == 503
    assert "模型服务无法连接" in answer.json()["message"]
    assert httpx.get(model_down.base_url + "/health", headers=PROXIED).status_code == 200


def test_a_client_talking_to_the_machine_itself_is_served_as_before(
    model_down: LiveServer,
) -> None:
    answer = httpx.get(model_down.base_url + "/v1/parameters", headers=APP, timeout=60)
    assert answer.status_code == 200, answer.text


def test_the_503_comes_before_the_body_is_read(model_down: LiveServer) -> None:
    """A POST whose body has not arrived yet is answered at once: nothing of it ran."""
    host, port = model_down.base_url.removeprefix("http://").split(":")
    head = (
        "POST /v1/chat-messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {KEY}\r\nX-Forwarded-For: 10.0.0.7\r\n"
        "Content-Length: 100000\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=60) as sock:  # a hang guard
        sock.sendall(head.encode() + b'{"query": "')
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = sock.recv(4096)
            assert chunk, reply
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 503 "), reply


def test_a_draining_process_is_not_ready(kb: Path) -> None:
    with run_service(_settings(kb)) as server:
        assert httpx.get(server.base_url + "/v1/parameters", headers=PROXIED).status_code == 200
        readiness = server.state["readiness"]
        assert isinstance(readiness, Readiness) and readiness.ready
        readiness.drain()  # what SIGTERM does first (gcite.service.server)
        ready = httpx.get(server.base_url + "/ready", timeout=60)
        assert ready.status_code == 503 and ready.json()["checks"]["draining"] is False
        answer = httpx.get(server.base_url + "/v1/parameters", headers=PROXIED, timeout=60)
        assert answer.status_code == 503 and "服务正在停止" in answer.json()["message"]


async def test_a_failing_check_counts_as_not_ready() -> None:
    async def broken(*, background: bool = False) -> dict[str, bool]:
        raise RuntimeError("boom")

    readiness = Readiness(broken)
    assert readiness.ready  # nothing known yet: requests come
    assert await readiness.refresh() == {"store": False}
    assert not readiness.ready
