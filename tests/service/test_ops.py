"""Operations: body-read deadline, one structured log line per
request, /health and /ready, the start-up model probe and the offline fallback."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_streams import LiveServer, body, raw_events, run_service

from gcite.config import ApiKey, Settings
from gcite.generate.probe import _verify, probe_model
from gcite.knowledge import ingest_paths
from gcite.testing import free_port
from support.openai_standin import OpenAIStandin

DOC = "# 访客登记\n\n访客进入大厦须在一层大堂服务台登记并出示身份证件。\n"
SECRET = "app-3f9c0d7e-secret"
GUARD_S = 120.0  # hang guard only: the body deadline itself is the server's


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("ops")
    (base / "docs").mkdir()
    (base / "docs" / "visitor.md").write_text(DOC, encoding="utf-8")
    assert ingest_paths(
        [base / "docs"], settings=Settings.from_keys(data_dir=base / "data"), dataset="d"
    ).ok
    return base / "data"


def _settings(kb: Path, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": kb,
        "database_url": f"sqlite:///{kb.parent / f'chat-{time.monotonic_ns()}.sqlite3'}",
        "app_keys": [ApiKey(SECRET, (), name="front-desk")],
        "retrieval_keys": [ApiKey("kb-secret-9", ("x",), name="dify")],
        "body_read_timeout_s": 0.5,
        "ping_interval_s": 0.2,
    }
    values.update(extra)
    return Settings.from_keys(**values)


@pytest.fixture(scope="module")
def live(kb: Path) -> Iterator[LiveServer]:
    with run_service(_settings(kb)) as server:
        yield server


@pytest.fixture(scope="module")
def patient(kb: Path) -> Iterator[LiveServer]:
    """The service with a body deadline that is only a hang guard: for the tests of what
    must not be cut off, however slowly a busy machine moves the bytes."""
    with run_service(_settings(kb, body_read_timeout_s=GUARD_S)) as server:
        yield server


def _lines(caplog: pytest.LogCaptureFixture, at_least: int = 0) -> list[dict[str, Any]]:
    """The access log lines so far, once there are ``at_least`` of them (a line is written
    just after its response is sent; :data:`GUARD_S` bounds the wait, a hang guard)."""
    deadline = time.monotonic() + GUARD_S
    while True:
        lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "gcite.access"]
        if len(lines) >= at_least or time.monotonic() > deadline:
            return lines
        time.sleep(0.02)


def _port(live: LiveServer) -> int:
    return int(live.base_url.rsplit(":", 1)[1])


def test_health_and_ready(live: LiveServer) -> None:
    assert httpx.get(live.base_url + "/health").json() == {"status": "ok"}
    ready = httpx.get(live.base_url + "/ready")
    assert ready.status_code == 200 and ready.json()["checks"] == {"store": True, "model": True}


def test_ready_is_503_when_the_model_is_down(kb: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}/v1"
    with run_service(_settings(kb, llm_base_url=down, llm_model="m")) as server:
        ready = httpx.get(server.base_url + "/ready")
        assert ready.status_code == 503
        assert ready.json() == {"status": "not_ready", "checks": {"store": True, "model": False}}
        assert httpx.get(server.base_url + "/health").status_code == 200


def test_one_log_line_per_request_with_key_name_never_the_secret(
    live: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gcite.access")
    headers = {"Authorization": f"Bearer {SECRET}", "X-Request-Id": "req-42"}
    response = httpx.post(
        live.base_url + "/v1/chat-messages",
        json=body("访客在哪里登记？", user="ops", mode="blocking"),
        headers=headers,
        timeout=60,
    )
    assert response.status_code == 200, response.text
    assert response.headers["x-request-id"] == "req-42"
    conv = response.json()["conversation_id"]
    httpx.get(
        f"{live.base_url}/v1/conversations/{conv}/chunk-metadata",
        params={"user": "ops"},
        headers={"Authorization": f"Bearer {SECRET}"},
    )
    lines = _lines(caplog, 2)
    assert SECRET not in caplog.text
    chat = [line for line in lines if line["request_id"] == "req-42"]
    assert len(chat) == 1
    [line] = chat
    assert line["route"] == "/v1/chat-messages" and line["status"] == 200
    assert line["key"] == "front-desk" and line["method"] == "POST"
    for name in ("retrieval_ms", "merge_ms", "first_token_ms", "total_ms"):
        assert isinstance(line[name], float) and line[name] >= 0, name
    assert line["cited"] >= 1
    plan_b = lines[-1]
    assert plan_b["route"] == "/v1/conversations/{conversation_id}/chunk-metadata"
    assert conv not in json.dumps(plan_b)
    assert len(plan_b["request_id"]) == 32  # generated


def test_key_names_for_unknown_and_missing_keys(
    live: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gcite.access")
    httpx.post(live.base_url + "/retrieval", headers={"Authorization": "Bearer kb-secret-9"})
    httpx.post(live.base_url + "/retrieval", headers={"Authorization": "Bearer guess"})
    httpx.get(live.base_url + "/health", headers={"X-Request-Id": "bad id with spaces"})
    lines = _lines(caplog, 3)
    assert [line["key"] for line in lines] == ["dify", "unknown", "-"]
    assert "kb-secret-9" not in caplog.text and "guess" not in caplog.text
    assert lines[-1]["request_id"] != "bad id with spaces"


def _slow_client(port: int, path: str = "/v1/chat-messages") -> socket.socket:
    key = "kb-secret-9" if path == "/retrieval" else SECRET
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
        'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"qu'.encode()
    )
    return sock


def _read_all(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        pass
    return data


def test_a_slow_body_is_cut_off_with_one_log_line(
    live: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    sock = _slow_client(_port(live))
    for _ in range(3):  # keep dribbling: bytes alone do not extend the deadline much
        time.sleep(0.2)
        try:
            sock.sendall(b"x")
        except OSError:
            break
    reply = _read_all(sock, timeout=GUARD_S)
    sock.close()
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
    assert b"request_timeout" in reply  # the body deadline, not a client timeout
    aborted = [line for line in _lines(caplog, 1) if line.get("aborted")]
    assert len(aborted) == 1
    assert aborted[0]["aborted"] == "body_timeout" and aborted[0]["status"] == 408
    assert aborted[0]["key"] == "front-desk"
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_many_slow_clients_are_all_released(live: LiveServer) -> None:
    socks = [_slow_client(_port(live), "/retrieval") for _ in range(40)]
    deadline = time.monotonic() + GUARD_S
    closed = 0
    for sock in socks:
        data = _read_all(sock, timeout=max(0.1, deadline - time.monotonic()))
        closed += data.startswith(b"HTTP/1.1 408")
        sock.close()
    assert closed == len(socks)


def test_a_client_leaving_mid_body_is_one_line_without_traceback(
    patient: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    for path in ("/v1/chat-messages", "/retrieval"):
        sock = _slow_client(_port(patient), path)
        time.sleep(0.1)
        sock.close()
    lines = _lines(caplog, 2)
    assert [line["aborted"] for line in lines] == ["client_left", "client_left"]
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_large_body_at_a_fair_speed_is_not_cut_off(live: LiveServer) -> None:
    payload = json.dumps(body("访客在哪里登记？" + " " * 200_000, user="big", mode="blocking"))
    response = httpx.post(
        live.base_url + "/v1/chat-messages",
        content=payload.encode(),
        headers={"Authorization": f"Bearer {SECRET}", "Content-Type": "application/json"},
        timeout=60,
    )
    assert response.status_code in (200, 400), response.text  # answered, not 408


def test_start_up_probe(llm_standin: OpenAIStandin) -> None:
    down = probe_model(Settings.from_keys(llm_base_url=f"http://127.0.0.1:{free_port()}/v1"))
    assert not down.ok and "无法连接模型服务" in down.reason
    assert probe_model(Settings.from_keys(llm_base_url=llm_standin.base_url, llm_model="m")).ok
    assert probe_model(Settings()).ok  # extractive


def test_the_probe_checks_certificates_wherever_tls_may_be_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for scheme in ("http", "https", "all"):
        for name in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY"):
            monkeypatch.delenv(name, raising=False)
    assert not _verify("http://127.0.0.1:8001/v1/models")
    assert not _verify("HTTP://model.internal/v1/models")
    assert _verify("https://api.example.com/v1/models")
    monkeypatch.setenv("HTTPS_PROXY", "https://proxy.example.com:3128")
    assert _verify("http://127.0.0.1:8001/v1/models")  # a proxy may be reached over TLS


async def test_fallback_to_the_offline_answerer_is_marked(kb: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}/v1"
    settings = _settings(kb, llm_base_url=down, llm_model="m", on_model_error="extractive")
    with run_service(settings) as server:
        ready = httpx.get(server.base_url + "/ready")
        assert ready.status_code == 200
        async with httpx.AsyncClient(timeout=60) as client:
            events = await raw_events(
                client,
                server.base_url + "/v1/chat-messages",
                body("访客在哪里登记？", user="fb"),
                {"Authorization": f"Bearer {SECRET}"},
            )
    end = next(e for e in events if e["event"] == "message_end")
    fallback = end["metadata"]["gcite"]["fallback"]
    assert fallback["backend"] == "extractive" and "连接" in fallback["reason"]
    answer = "".join(e.get("answer", "") for e in events if e["event"] == "message")
    assert "大堂" in answer


async def test_without_fallback_a_down_model_is_an_error_event(kb: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}/v1"
    with run_service(_settings(kb, llm_base_url=down, llm_model="m")) as server:
        async with httpx.AsyncClient(timeout=60) as client:
            events = await raw_events(
                client,
                server.base_url + "/v1/chat-messages",
                body("访客在哪里登记？", user="nofb"),
                {"Authorization": f"Bearer {SECRET}"},
            )
    assert events[-1]["event"] == "error"
