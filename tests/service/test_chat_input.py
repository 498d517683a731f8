"""Hostile request bodies: always a 400/413 in the endpoint's error shape, never a 500,
never stored; stored data always readable."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_streams import LiveServer, run_service

from gcite.config import ApiKey, Settings
from gcite.service.auth import Caller
from gcite.service.chat import MAX_BODY_BYTES
from gcite.service.store import ConversationStore

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _nested(depth: int) -> str:
    """A JSON value nested ``depth`` levels deep (objects and arrays alternating)."""
    return '{"a":[' * (depth // 2) + "1" + "]}" * (depth // 2)


def _chat(user: str, **fields: str) -> bytes:
    """A chat body; ``fields`` are raw JSON texts replacing the defaults."""
    values = {
        "query": '"你好"',
        "inputs": "{}",
        "response_mode": '"blocking"',
        "user": json.dumps(user),
        **fields,
    }
    return ("{" + ",".join(f'"{k}":{v}' for k, v in values.items()) + "}").encode()


BAD_CHAT_BODIES = {
    "deep-inputs": {"inputs": '{"x":' + _nested(40) + "}"},
    "very-deep-inputs": {"inputs": '{"x":' + _nested(5000) + "}"},
    "deep-unknown-field": {"files": _nested(300)},
    "surrogate-query": {"query": '"\\ud800 钥匙"'},
    "surrogate-input-value": {"inputs": '{"k": "\\udfff"}'},
    "surrogate-input-key": {"inputs": '{"\\ud83d": "v"}'},
    "nan-input": {"inputs": '{"x": NaN}'},
    "infinity-input": {"inputs": '{"x": [-Infinity]}'},
    "conversation-id-zero": {"conversation_id": "0"},
    "conversation-id-false": {"conversation_id": "false"},
    "conversation-id-list": {"conversation_id": "[]"},
    "response-mode-zero": {"response_mode": "0"},
    "response-mode-false": {"response_mode": "false"},
}


async def _conversations(
    service: LiveServer, client: httpx.AsyncClient, user: str
) -> list[dict[str, Any]]:
    response = await client.get(
        service.base_url + "/v1/conversations", params={"user": user}, headers=service.headers()
    )
    assert response.status_code == 200, response.text
    data: list[dict[str, Any]] = response.json()["data"]
    return data


@pytest.mark.parametrize("case", sorted(BAD_CHAT_BODIES))
@pytest.mark.parametrize("mode", ["blocking", "streaming"])
async def test_hostile_chat_bodies_are_invalid_param(
    service: LiveServer, client: httpx.AsyncClient, case: str, mode: str
) -> None:
    user = f"hostile-{case}-{mode}"
    fields = {"response_mode": json.dumps(mode), **BAD_CHAT_BODIES[case]}
    response = await client.post(
        service.base_url + "/v1/chat-messages",
        content=_chat(user, **fields),
        headers={**service.headers(), "Content-Type": "application/json"},
    )
    assert response.status_code == 400, response.text
    payload = response.json()
    assert payload["code"] == "invalid_param" and payload["status"] == 400
    assert await _conversations(service, client, user) == []  # nothing stored


def _raw_request(base_url: str, head: str, body: bytes = b"") -> bytes:
    """Send one HTTP/1.1 request over a plain socket; the response bytes (up to close)."""
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(head.encode() + body)
        chunks: list[bytes] = []
        while True:
            data = sock.recv(65536)
            if not data:
                break
            chunks.append(data)
            if b"\r\n\r\n" in b"".join(chunks) and b"request_too_large" in b"".join(chunks):
                break
    return b"".join(chunks)


@pytest.mark.parametrize("path", ["/v1/chat-messages", "/v1/chat-messages/some-task/stop"])
async def test_content_length_over_the_limit_is_refused_before_reading(
    service: LiveServer, path: str
) -> None:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-guard\r\n"
        f"Content-Type: application/json\r\nContent-Length: {MAX_BODY_BYTES * 50}\r\n\r\n"
    )
    # no body is ever sent: the answer must come from the header alone
    reply = await asyncio.to_thread(_raw_request, service.base_url, head)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert b"request_too_large" in reply


@pytest.mark.parametrize("path", ["/v1/chat-messages", "/v1/chat-messages/some-task/stop"])
async def test_chunked_body_over_the_limit_is_refused(
    service: LiveServer, client: httpx.AsyncClient, path: str
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"user": "u", "query": "'
        for _ in range(40):
            yield b"a" * 65536
        yield b'"}'

    response = await client.post(
        service.base_url + path,
        content=chunks(),  # no Content-Length: Transfer-Encoding: chunked
        headers={**service.headers(), "Content-Type": "application/json"},
    )
    assert response.status_code == 413, response.text
    assert response.json()["code"] == "request_too_large"


async def test_stop_body_is_validated_like_chat(
    service: LiveServer, client: httpx.AsyncClient
) -> None:
    url = service.base_url + "/v1/chat-messages/some-task/stop"
    headers = {**service.headers(), "Content-Type": "application/json"}
    for raw in (('{"user": ' + _nested(5000) + "}").encode(), b'{"user": "\\ud800"}'):
        response = await client.post(url, content=raw, headers=headers)
        assert response.status_code == 400 and response.json()["code"] == "invalid_param"


async def test_listing_survives_whatever_was_stored(
    service: LiveServer, client: httpx.AsyncClient
) -> None:
    # a row written before these checks existed: inputs nested 260 levels deep
    deep: dict[str, Any] = {}
    cursor = deep
    for _ in range(259):
        cursor["a"] = {}
        cursor = cursor["a"]
    owner = Caller(ApiKey("key-guard", ("安保主管",)), ("安保主管",), "message").owner("old-row")
    store = ConversationStore(service.settings.db_url)
    try:
        record = await asyncio.to_thread(
            store.start_message, user=owner, query="旧问题", inputs=deep
        )
    finally:
        store.close()
    listed = await _conversations(service, client, "old-row")
    assert [c["id"] for c in listed] == [record.conversation_id]
    assert listed[0]["inputs"] == {}
    page = await client.get(
        service.base_url + "/v1/messages",
        params={"conversation_id": record.conversation_id, "user": "old-row"},
        headers=service.headers(),
    )
    assert page.status_code == 200 and page.json()["data"][0]["inputs"] == {}


async def test_hostile_retrieval_bodies_are_3001(
    role_kb: Path, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    settings = Settings.from_keys(
        data_dir=role_kb,
        database_url=f"sqlite:///{tmp_path / 'r.sqlite3'}",
        retrieval_keys=[ApiKey("rk", ())],
    )
    condition = '{"logical_operator": "and", "conditions": [%s]}'
    leaf = '{"name": "document_title", "comparison_operator": "is", "value": %s}'
    bodies = [
        '{"query": "访客", "knowledge_id": "服务测试库", "x": ' + _nested(40) + "}",
        '{"query": "访客", "knowledge_id": "服务测试库", "x": ' + _nested(5000) + "}",
        '{"query": "\\ud800", "knowledge_id": "服务测试库"}',
        '{"query": "访客", "knowledge_id": "服务测试库", "metadata_condition": '
        + condition % (leaf % '"\\udc00"')
        + "}",
    ]
    with run_service(settings) as live:
        for raw in bodies:
            response = await client.post(
                live.base_url + "/retrieval",
                content=raw.encode(),
                headers={"Authorization": "Bearer rk", "Content-Type": "application/json"},
            )
            assert response.status_code == 400, response.text
            payload = response.json()
            assert payload["error_code"] == 3001 and payload["error_msg"]
