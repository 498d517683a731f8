"""The Service API around the stream: Dify errors, blocking mode, roles, history, Plan B."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from service_streams import LiveServer, body, client_view, node_events, raw_events

from gcite.generate.prompt import NO_ANSWER
from support.openai_standin import OpenAIStandin, Script
from support.web_standin import WebStandin

pytestmark = pytest.mark.asyncio(loop_scope="session")

SECRET = "三号保险柜"
QUESTION = "监控中心的备用钥匙放在哪里？"


def _dify_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    payload = response.json()
    assert set(payload) == {"code", "message", "status"}
    assert payload["code"] == code and payload["status"] == status
    assert isinstance(payload["message"], str) and payload["message"]
    return payload


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({"inputs": {}, "user": "u1", "response_mode": "streaming"}, "query"),
        ({"query": "   ", "inputs": {}, "user": "u1"}, "query"),
        ({"query": 42, "inputs": {}, "user": "u1"}, "query"),
        ({"query": "你好", "inputs": {}}, "user"),
        ({"query": "你好", "inputs": [], "user": "u1"}, "inputs"),
        ({"query": "你好", "inputs": {}, "user": "u1", "response_mode": "fast"}, "response_mode"),
        ({"query": "你好", "user": "u1", "conversation_id": 7}, "conversation_id"),
        ({"query": "长" * 10_001, "user": "u1"}, "too long"),
    ],
)
async def test_bad_bodies_are_invalid_param(
    service: LiveServer, client: httpx.AsyncClient, payload: dict[str, Any], fragment: str
) -> None:
    response = await client.post(
        service.base_url + "/v1/chat-messages", json=payload, headers=service.headers()
    )
    assert fragment in _dify_error(response, 400, "invalid_param")["message"]


async def test_malformed_and_huge_bodies(service: LiveServer, client: httpx.AsyncClient) -> None:
    url = service.base_url + "/v1/chat-messages"
    headers = {**service.headers(), "Content-Type": "application/json"}
    _dify_error(await client.post(url, content=b"{not json", headers=headers), 400, "invalid_param")
    _dify_error(await client.post(url, content=b"[1, 2]", headers=headers), 400, "invalid_param")
    huge = b'{"query": "' + b"a" * 1_100_000 + b'", "user": "u"}'
    _dify_error(await client.post(url, content=huge, headers=headers), 413, "request_too_large")


async def test_keys_are_checked(service: LiveServer, client: httpx.AsyncClient) -> None:
    url = service.base_url + "/v1/chat-messages"
    payload = body("你好", mode="blocking")
    _dify_error(await client.post(url, json=payload), 401, "unauthorized")
    wrong = {"Authorization": "Bearer not-a-key"}
    _dify_error(await client.post(url, json=payload, headers=wrong), 401, "unauthorized")
    basic = {"Authorization": "Basic key-guard"}
    _dify_error(await client.post(url, json=payload, headers=basic), 401, "unauthorized")
    listing = await client.get(service.base_url + "/v1/conversations", params={"user": "u1"})
    _dify_error(listing, 401, "unauthorized")


async def test_unknown_conversation_is_not_found(
    service: LiveServer, client: httpx.AsyncClient
) -> None:
    response = await client.post(
        service.base_url + "/v1/chat-messages",
        json=body("你好", conversation_id="00000000-0000-0000-0000-000000000000"),
        headers=service.headers(),
    )
    assert _dify_error(response, 404, "not_found")["message"] == "Conversation Not Exists."
    missing = await client.get(
        service.base_url + "/v1/messages",
        params={"conversation_id": "nope", "user": "u1"},
        headers=service.headers(),
    )
    _dify_error(missing, 404, "not_found")
    _dify_error(
        await client.get(service.base_url + "/v1/messages", headers=service.headers()),
        400,
        "invalid_param",
    )


async def test_blocking_mode(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    llm.push(Script.text("钥匙在三号保险柜[C:1]。", size=2))
    response = await client.post(
        service.base_url + "/v1/chat-messages",
        json=body(QUESTION, mode="blocking"),
        headers=service.headers(),
    )
    assert response.status_code == 200
    payload = response.json()
    assert payload["event"] == "message" and payload["mode"] == "advanced-chat"
    assert payload["answer"] == "钥匙在三号保险柜[C:1]。"
    assert payload["id"] == payload["message_id"] and payload["conversation_id"]
    assert payload["task_id"] and isinstance(payload["created_at"], int)
    resources = payload["metadata"]["retriever_resources"]
    assert [r["position"] for r in resources] == [1]
    assert payload["metadata"]["usage"]["total_tokens"] > 0
    # Dify's default response_mode is blocking
    llm.push(Script.text("好的。"))
    default = await client.post(
        service.base_url + "/v1/chat-messages",
        json={"query": "你好", "user": "u1"},
        headers=service.headers(),
    )
    assert default.json()["answer"] == "好的。"


async def test_blocking_failure_is_an_http_error(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    llm.push(Script(status=503))
    response = await client.post(
        service.base_url + "/v1/chat-messages",
        json=body(QUESTION, mode="blocking"),
        headers=service.headers(),
    )
    assert "503" in _dify_error(response, 400, "completion_request_error")["message"]


async def test_roles_come_from_the_key_only(
    offline_service: LiveServer, client: httpx.AsyncClient
) -> None:
    url = offline_service.base_url + "/v1/chat-messages"
    guard = await client_view(client, url, body(QUESTION), offline_service.headers("key-guard"))
    assert SECRET in guard.answer
    assert guard.citations and guard.metadata["gcite"]["backend"] == "extractive"
    titles = {r["document_name"] for r in guard.metadata["retriever_resources"]}
    assert any("control-room" in t for t in titles)
    # a visitor key asking for the role in every request field still sees nothing secret
    sneaky = body(QUESTION, user="安保主管", inputs={"roles": ["安保主管"], "role": "安保主管"})
    events = await raw_events(client, url, sneaky, offline_service.headers("key-visitor"))
    result = node_events(events, "node_finished", "knowledge-retrieval")[0]["data"]["outputs"]
    assert all(SECRET not in item["content"] for item in result["result"])
    assert all("control-room" not in item["metadata"]["document_name"] for item in result["result"])
    text = "".join(e["answer"] for e in events if e["event"] == "message")
    assert SECRET not in text


async def test_extractive_backend_says_it_cannot_tell(
    offline_service: LiveServer, client: httpx.AsyncClient
) -> None:
    url = offline_service.base_url + "/v1/chat-messages"
    result = await client_view(
        client, url, body("大厦食堂周五的特价菜是什么？"), offline_service.headers()
    )
    assert result.raw_answer == NO_ANSWER
    assert result.citations == [] and result.metadata["retriever_resources"] == []
    assert result.metadata["gcite"] == {"backend": "extractive", "cited_ids": [], "invalid_ids": []}


async def test_history_listing_and_plan_b(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    url = service.base_url + "/v1/chat-messages"
    headers = service.headers()
    llm.push(Script.text("访客须在服务台登记[C:1]。", size=3))
    first = await client_view(client, url, body("访客怎么登记？", user="multi"), headers)
    conv = first.conversation_id
    cited_title = first.panel[0]["chunk"]["document_title"]
    llm.push(Script.text("登记后领取临时门禁卡[C:1]。", size=3))
    second = await client_view(
        client, url, body("然后呢？", user="multi", conversation_id=conv), headers
    )
    assert second.conversation_id == conv
    # the model saw the earlier turn, markers stripped, and the chunks cited before (seed §6)
    messages = llm.requests[-1]["messages"]
    assert messages[1:] == [
        {"role": "user", "content": "访客怎么登记？"},
        {"role": "assistant", "content": "访客须在服务台登记。"},
        {"role": "user", "content": "然后呢？"},
    ]
    assert "已引用" in messages[0]["content"] and cited_title in messages[0]["content"]
    # Dify history endpoints
    page = await client.get(
        service.base_url + "/v1/messages",
        params={"conversation_id": conv, "user": "multi"},
        headers=headers,
    )
    data = page.json()
    assert data["has_more"] is False and data["limit"] == 20
    assert [m["query"] for m in data["data"]] == ["访客怎么登记？", "然后呢？"]
    assert data["data"][0]["answer"] == "访客须在服务台登记[C:1]。"
    assert data["data"][0]["retriever_resources"][0]["position"] == 1
    older = await client.get(
        service.base_url + "/v1/messages",
        params={"conversation_id": conv, "user": "multi", "first_id": second.message_id},
        headers=headers,
    )
    assert [m["id"] for m in older.json()["data"]] == [first.message_id]
    other_user = await client.get(
        service.base_url + "/v1/messages",
        params={"conversation_id": conv, "user": "someone-else"},
        headers=headers,
    )
    _dify_error(other_user, 404, "not_found")
    convs = await client.get(
        service.base_url + "/v1/conversations", params={"user": "multi"}, headers=headers
    )
    listed = convs.json()["data"]
    assert [c["id"] for c in listed] == [conv] and listed[0]["name"] == "访客怎么登记？"
    # Plan B: chunk metadata by message id and by conversation id
    by_message = await client.get(
        f"{service.base_url}/v1/messages/{first.message_id}/chunk-metadata",
        params={"user": "multi"},
        headers=headers,
    )
    plan_b = by_message.json()
    assert plan_b["chunk_metadata"] == first.chunk_metadata
    assert plan_b["chunk_count"] == len(first.chunk_metadata) and plan_b["cited_ids"] == ["1"]
    by_conv = await client.get(
        f"{service.base_url}/v1/conversations/{conv}/chunk-metadata",
        params={"user": "multi"},
        headers=headers,
    )
    assert [m["message_id"] for m in by_conv.json()["data"]] == [
        first.message_id,
        second.message_id,
    ]
    _dify_error(
        await client.get(
            f"{service.base_url}/v1/messages/{first.message_id}/chunk-metadata",
            params={"user": "intruder"},
            headers=headers,
        ),
        404,
        "not_found",
    )


async def test_conversations_belong_to_their_key(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    llm.push(Script.text("钥匙在三号保险柜[C:1]。"))
    url = service.base_url + "/v1/chat-messages"
    guard = await client_view(client, url, body(QUESTION, user="shared"), service.headers())
    conv = guard.conversation_id
    visitor = service.headers("key-visitor")
    # another key with the same user string can neither continue nor read the conversation
    follow_up = await client.post(
        url, json=body("再说一遍", user="shared", conversation_id=conv), headers=visitor
    )
    _dify_error(follow_up, 404, "not_found")
    params = {"conversation_id": conv, "user": "shared"}
    listing = await client.get(service.base_url + "/v1/messages", params=params, headers=visitor)
    _dify_error(listing, 404, "not_found")
    chunks = await client.get(
        f"{service.base_url}/v1/messages/{guard.message_id}/chunk-metadata",
        params={"user": "shared"},
        headers=visitor,
    )
    _dify_error(chunks, 404, "not_found")
    mine = await client.get(
        service.base_url + "/v1/conversations", params={"user": "shared"}, headers=visitor
    )
    assert mine.json()["data"] == []
