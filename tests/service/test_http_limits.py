"""The request head is bounded in size and time, however its bytes arrive: a real uvicorn
server on loopback with gcite's protocol class, raw sockets as clients."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from gcite.service.http import MAX_HEAD_BYTES, BoundedHttpToolsProtocol

HANG_GUARD_S = 120.0  # only against a hang: the deadline itself is enforced by the server


class QuickHeadProtocol(BoundedHttpToolsProtocol):
    head_timeout_s = 0.5


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    if scope["path"] == "/slow":  # a response lasting longer than the head deadline
        for _ in range(6):
            await send({"type": "http.response.body", "body": b"x", "more_body": True})
            await asyncio.sleep(0.25)
    await send({"type": "http.response.body", "body": b"ok"})


class PatientHeadProtocol(BoundedHttpToolsProtocol):
    """The size limit alone: a head that takes long to arrive on a busy machine is never
    cut off on time, so the size checks cannot end in 408 instead of 400."""

    head_timeout_s = HANG_GUARD_S


def _serve(protocol: type[BoundedHttpToolsProtocol]) -> Iterator[tuple[int, uvicorn.Server]]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="critical", http=protocol, lifespan="off")
    runner = uvicorn.Server(config)
    thread = threading.Thread(target=runner.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + HANG_GUARD_S
    while not runner.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert runner.started
    yield sock.getsockname()[1], runner
    runner.should_exit = True
    thread.join(HANG_GUARD_S)
    sock.close()


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[int, uvicorn.Server]]:
    """A server with a short head deadline (the tests of the deadline)."""
    yield from _serve(QuickHeadProtocol)


@pytest.fixture(scope="module")
def patient() -> Iterator[tuple[int, uvicorn.Server]]:
    """A server whose head deadline is a hang guard (the tests of the size limit)."""
    yield from _serve(PatientHeadProtocol)


def _connect(port: int) -> socket.socket:
    client = socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S)
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return client


def _read_all(client: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    out = b""
    while True:
        try:
            data = client.recv(65536)
        except ConnectionResetError:
            return out
        if not data:
            return out
        out += data


def _head(size: int) -> bytes:
    """A GET whose head is ``size`` bytes long (one long header)."""
    start = b"GET / HTTP/1.1\r\nhost: x\r\nx-pad: "
    pad = size - len(start) - 4
    return start + b"a" * pad + b"\r\n\r\n"


@pytest.mark.parametrize("size", [17 * 1024, 40 * 1024, 100 * 1024])
def test_an_oversized_head_in_one_read_is_refused(
    patient: tuple[int, uvicorn.Server], size: int
) -> None:
    port, _ = patient
    with _connect(port) as client:
        client.sendall(_head(size))  # one write: the server reads it in one go
        answer = _read_all(client)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:80]


def test_an_oversized_head_in_many_reads_is_refused(patient: tuple[int, uvicorn.Server]) -> None:
    port, _ = patient
    data = _head(20 * 1024)
    with _connect(port) as client:
        try:
            for start in range(0, len(data), 1024):
                client.sendall(data[start : start + 1024])
                time.sleep(0.001)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = _read_all(client)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:80]


def test_a_head_under_the_limit_is_served(patient: tuple[int, uvicorn.Server]) -> None:
    port, _ = patient
    with _connect(port) as client:
        client.sendall(
            _head(MAX_HEAD_BYTES - 1024).replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n")
        )
        answer = _read_all(client)
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"ok\r\n0\r\n\r\n")


def test_slow_and_silent_heads_are_cut_off(server: tuple[int, uvicorn.Server]) -> None:
    port, runner = server
    idle = len(runner.server_state.connections)
    clients = [_connect(port) for _ in range(40)]
    for number, client in enumerate(clients):
        if number % 2:
            client.sendall(b"GET / HTTP/1.1\r\nhost: x\r\nx-slow: ")  # never finished
    for number, client in enumerate(clients):
        answer = _read_all(client)  # returns once the server closes the connection
        assert answer.startswith(b"HTTP/1.1 408 ") if number % 2 else answer == b""
        client.close()
    deadline = time.monotonic() + HANG_GUARD_S
    while len(runner.server_state.connections) > idle and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(runner.server_state.connections) == idle


def test_a_long_response_and_the_next_request_are_not_cut(
    server: tuple[int, uvicorn.Server],
) -> None:
    port, _ = server
    with _connect(port) as client:
        client.sendall(b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n")
        first = b""
        while not first.endswith(b"ok\r\n0\r\n\r\n"):
            first += client.recv(65536)
        client.sendall(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        second = _read_all(client)
    assert first.startswith(b"HTTP/1.1 200 ") and second.startswith(b"HTTP/1.1 200 ")
