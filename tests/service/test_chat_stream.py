"""The chat service end to end: real uvicorn server, OpenAI and web stand-ins, the SSE client."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_streams import (
    WEB_KEY,
    LiveServer,
    body,
    client_view,
    context_blocks,
    iter_events,
    names,
    node_events,
    raw_events,
    run_service,
)

from gcite.config import ApiKey, Settings
from support.clock import until
from support.openai_standin import OpenAIStandin, Script
from support.web_standin import Reply, WebStandin

GUARD_S = 120.0  # hang guard only (a loaded machine may need tens of seconds)

pytestmark = pytest.mark.asyncio(loop_scope="session")

QUESTION = "监控中心的备用钥匙放在哪里？"


def _cite_responder(answer_for: Any, size: int = 3, **kwargs: Any) -> Any:
    """A stand-in responder writing ``answer_for(blocks)`` where blocks = {id: content}."""

    def respond(request: dict[str, Any]) -> Script:
        return Script.text(answer_for(context_blocks(request)), size=size, **kwargs)

    return respond


def _id_with(blocks: dict[str, str], needle: str) -> str:
    return next(i for i, text in blocks.items() if needle in text)


async def test_event_order_envelope_and_metadata_before_text(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    llm.push(Script.text("监控中心备用钥匙在三号保险柜[C:1]。", size=2))
    events = await raw_events(
        client, service.base_url + "/v1/chat-messages", body(QUESTION), service.headers()
    )
    seq = names(events)
    first_text = seq.index("message")
    assert seq[:7] == [
        "workflow_started",
        "node_started",
        "node_started",
        "node_finished",
        "node_finished",
        "node_started",
        "node_finished",
    ]
    assert seq[7] == "node_started" and first_text == 8
    assert seq[-3:] == ["node_finished", "workflow_finished", "message_end"]  # Dify's order
    assert set(seq[first_text:-3]) == {"message"}
    real = [e for e in events if e["event"] != "ping"]
    kinds = [e["data"]["node_type"] for e in real if e["event"] == "node_started"]
    assert kinds == ["knowledge-retrieval", "tool", "code", "llm"]
    code_done = node_events(events, "node_finished", "code")[0]
    assert real.index(code_done) < first_text
    assert code_done["data"]["title"] == "Chunk编号"
    outputs = code_done["data"]["outputs"]
    assert set(outputs) == {"formatted_chunks", "chunk_count", "chunk_metadata"}
    ids = [c["id"] for c in outputs["chunk_metadata"]]
    assert ids == [str(i) for i in range(1, outputs["chunk_count"] + 1)]
    assert {c["source_type"] for c in outputs["chunk_metadata"]} == {"rag", "web"}
    assert outputs["formatted_chunks"].startswith("[C:1]\n")
    # the envelope: same ids everywhere, task_id on all events
    env = {(e["message_id"], e["conversation_id"], e["created_at"], e["task_id"]) for e in real}
    assert len(env) == 1
    assert all(isinstance(e["created_at"], int) for e in real)
    kr_done = node_events(events, "node_finished", "knowledge-retrieval")[0]
    assert kr_done["data"]["status"] == "succeeded"
    assert kr_done["data"]["outputs"]["result"][0]["metadata"]["_source"] == "knowledge"
    llm_done = node_events(events, "node_finished", "llm")[0]
    assert llm_done["data"]["outputs"]["text"] == "监控中心备用钥匙在三号保险柜[C:1]。"
    finished = real[-2]["data"]  # workflow_finished, then message_end (Dify's order)
    assert finished["status"] == "succeeded"
    # the model received the seed §5.2 prompt with formatted_chunks as context
    system = llm.requests[-1]["messages"][0]["content"]
    assert "欧爪宝" in system and outputs["formatted_chunks"] in system
    assert llm.requests[-1]["messages"][-1] == {"role": "user", "content": QUESTION}


async def test_retriever_resources_are_the_cited_chunks_in_display_order(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    cited: dict[str, str] = {}

    def answer(blocks: dict[str, str]) -> str:
        rag = _id_with(blocks, "备用钥匙")
        web_id = max(blocks, key=int)  # web chunks come after the knowledge base
        cited.update(rag=rag, web=web_id)
        return f"据公开资料[C:{web_id}]，钥匙在三号保险柜[C:{rag}]，须两人在场[C:{rag}]。"

    llm.responder = _cite_responder(answer, size=1)  # one character per delta: split markers
    url = service.base_url + "/v1/chat-messages"
    result = await client_view(client, url, body(QUESTION), service.headers())
    assert result.error is None and result.finished
    assert "[C:" not in result.answer
    assert result.answer == "据公开资料，钥匙在三号保险柜，须两人在场。"
    assert result.citations == [(cited["web"], 1), (cited["rag"], 2)]
    resources = result.metadata["retriever_resources"]
    assert [r["position"] for r in resources] == [1, 2]
    assert [r["doc_metadata"]["chunk_id"] for r in resources] == [cited["web"], cited["rag"]]
    by_id = {c["id"]: c for c in result.chunk_metadata}
    web_chunk, rag_chunk = by_id[cited["web"]], by_id[cited["rag"]]
    assert resources[0]["data_source_type"] == "web"
    assert resources[0]["document_name"] == web_chunk["document_title"]
    assert resources[0]["doc_metadata"]["url"] == web_chunk["url"]
    assert resources[1]["data_source_type"] == "upload_file"
    assert resources[1]["content"] == rag_chunk["content"]
    assert resources[1]["dataset_name"] == "服务测试库"
    assert result.metadata["gcite"] == {
        "backend": "openai:standin-model",
        "cited_ids": [cited["web"], cited["rag"]],
        "invalid_ids": [],
    }
    usage = result.metadata["usage"]
    assert usage["completion_tokens"] == len(result.raw_answer)  # the stand-in's count
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["time_to_first_token"] is not None
    assert [p["raw_id"] for p in result.panel] == [cited["web"], cited["rag"]]


async def test_invalid_ids_are_reported_and_not_listed(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    llm.push(Script.text("钥匙在保险柜[C:99]。访客需登记[C:1][C:0]。", size=4))
    url = service.base_url + "/v1/chat-messages"
    result = await client_view(client, url, body(QUESTION), service.headers())
    assert result.metadata["gcite"]["invalid_ids"] == ["99", "0"]
    assert result.metadata["gcite"]["cited_ids"] == ["1"]
    assert [r["doc_metadata"]["chunk_id"] for r in result.metadata["retriever_resources"]] == ["1"]
    assert result.invalid == ["99", "0"]
    assert result.answer == "钥匙在保险柜。访客需登记。"


async def test_text_chunk_events_for_keys_that_ask_for_them(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    llm.push(Script.text("钥匙在保险柜[C:1]。", size=3))
    url = service.base_url + "/v1/chat-messages"
    events = await raw_events(client, url, body(QUESTION), service.headers("key-text"))
    texts = [e for e in events if e["event"] == "text_chunk"]
    assert texts and not [e for e in events if e["event"] == "message"]
    assert "".join(e["data"]["text"] for e in texts) == "钥匙在保险柜[C:1]。"
    assert all(e["task_id"] and e["workflow_run_id"] for e in texts)
    llm.push(Script.text("钥匙在保险柜[C:1]。", size=3))
    result = await client_view(client, url, body(QUESTION), service.headers("key-text"))
    assert result.answer == "钥匙在保险柜。" and result.citations == [("1", 1)]


@pytest.fixture(scope="module")
def short_web_service(
    service: LiveServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The chat service with a web search deadline the hanging stand-in always passes
    (a search that never answers meets it however fast or slow the machine is)."""
    db = tmp_path_factory.mktemp("db-short-web") / "chat.sqlite3"
    settings = service.settings.with_keys(database_url=f"sqlite:///{db}", web_timeout_s=1.0)
    with run_service(settings) as live:
        yield live


async def test_web_timeout_answers_from_the_knowledge_base(
    short_web_service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    service = short_web_service
    web.default = Reply.hang(60)  # far past web_timeout_s
    llm.push(Script.text("钥匙在三号保险柜[C:1]。", size=3))
    url = service.base_url + "/v1/chat-messages"
    events = await raw_events(client, url, body(QUESTION), service.headers())
    tool = node_events(events, "node_finished", "tool")[0]["data"]
    assert tool["status"] == "failed"
    assert "timeout" in tool["error"].lower() or "超时" in tool["error"]
    code = node_events(events, "node_finished", "code")[0]["data"]["outputs"]
    assert code["chunk_count"] >= 1
    assert {c["source_type"] for c in code["chunk_metadata"]} == {"rag"}
    end = next(e for e in events if e["event"] == "message_end")
    assert [r["data_source_type"] for r in end["metadata"]["retriever_resources"]] == [
        "upload_file"
    ]
    assert names(events)[-2:] == ["workflow_finished", "message_end"]


async def test_connection_dropped_mid_answer(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    llm.push(Script(deltas=["钥匙在保险柜", "[C", ":1]。", "其余"], drop_after=2))
    url = service.base_url + "/v1/chat-messages"
    events = await raw_events(client, url, body(QUESTION, user="dropper"), service.headers())
    seq = names(events)
    assert seq[-2:] == ["workflow_finished", "error"]
    assert "message_end" not in seq
    error = events[-1]
    assert error["code"] == "completion_request_error" and error["status"] == 400
    assert "task_id" not in error and error["message"].startswith("Run failed")
    assert events[-2]["data"]["status"] == "failed"
    # the client releases the held "[C" as text and reports the error
    llm.push(Script(deltas=["钥匙在保险柜", "[C", ":1]。", "其余"], drop_after=2))
    result = await client_view(client, url, body(QUESTION, user="dropper"), service.headers())
    assert result.error is not None and result.error.code == "completion_request_error"
    assert result.answer == "钥匙在保险柜[C"
    # the stored message keeps the partial answer and is marked failed
    conv = result.conversation_id
    page = await client.get(
        service.base_url + "/v1/messages",
        params={"conversation_id": conv, "user": "dropper"},
        headers=service.headers(),
    )
    assert page.status_code == 200
    stored = page.json()["data"][-1]
    assert stored["failed"] is True and stored["status"] == "error"
    assert stored["answer"] == "钥匙在保险柜[C"
    assert stored["error"].startswith("Run failed")


async def test_stop_ends_the_answer_and_closes_the_model_call(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    llm.push(Script.text("一二三四五六七八九十" * 20, size=1, token_delay_s=0.05))
    url = service.base_url + "/v1/chat-messages"
    events: list[dict[str, Any]] = []
    stopped = False
    async for event in iter_events(client, url, body(QUESTION, user="stopper"), service.headers()):
        events.append(event)
        if event["event"] == "message" and not stopped:
            stopped = True
            wrong = await client.post(
                f"{service.base_url}/v1/chat-messages/{event['task_id']}/stop",
                json={"user": "someone-else"},
                headers=service.headers(),
            )
            assert wrong.json() == {"result": "success"}  # silently ignored (Dify)
            reply = await client.post(
                f"{service.base_url}/v1/chat-messages/{event['task_id']}/stop",
                json={"user": "stopper"},
                headers=service.headers(),
            )
            assert reply.status_code == 200 and reply.json() == {"result": "success"}
    seq = names(events)
    assert seq[-2:] == ["workflow_finished", "message_end"]  # Dify's order, also for a stop
    assert events[-2]["data"]["status"] == "stopped"
    llm_done = node_events(events, "node_finished", "llm")[0]["data"]
    assert llm_done["status"] == "stopped"
    answer = "".join(e["answer"] for e in events if e["event"] == "message")
    assert 0 < len(answer) < 200
    assert await asyncio.to_thread(llm.wait_for_disconnect, 1)
    assert llm.completed == 0


async def test_client_disconnect_cancels_the_model_call(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    llm.push(Script.text("一二三四五六七八九十" * 20, size=1, token_delay_s=0.05))
    url = service.base_url + "/v1/chat-messages"
    conversation_id = ""
    async for event in iter_events(client, url, body(QUESTION, user="leaver"), service.headers()):
        if event["event"] == "message":
            conversation_id = event["conversation_id"]
            break  # closes the HTTP response
    assert await asyncio.to_thread(llm.wait_for_disconnect, 1)
    assert llm.completed == 0
    # what was produced is kept, marked as stopped
    deadline = time.monotonic() + GUARD_S
    while True:
        page = await client.get(
            service.base_url + "/v1/messages",
            params={"conversation_id": conversation_id, "user": "leaver"},
            headers=service.headers(),
        )
        stored = page.json()["data"][0]
        if stored["gcite_status"] != "running":
            break
        assert time.monotonic() < deadline, stored
        await asyncio.sleep(0.05)
    assert stored["gcite_status"] == "stopped" and stored["answer"].startswith("一")


async def test_pings_while_the_model_is_silent(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    llm.push(Script.text("钥匙在保险柜[C:1]。", first_token_delay_s=0.5))
    url = service.base_url + "/v1/chat-messages"
    events = await raw_events(client, url, body(QUESTION), service.headers())
    llm_start = next(i for i, e in enumerate(events) if e.get("data", {}).get("node_type") == "llm")
    first_text = next(i for i, e in enumerate(events) if e["event"] == "message")
    assert {"event": "ping"} in events[llm_start:first_text]
    result_names = names(events)
    assert result_names[-1] == "message_end"


async def test_upstream_http_error_becomes_an_error_event(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    llm.push(Script(status=401, error={"message": "bad key", "type": "auth", "code": None}))
    url = service.base_url + "/v1/chat-messages"
    events = await raw_events(client, url, body(QUESTION), service.headers())
    assert names(events)[-2:] == ["workflow_finished", "error"]
    assert "401" in events[-1]["message"] and "bad key" in events[-1]["message"]


async def test_missing_knowledge_base_answers_from_the_web(
    llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    settings = Settings.from_keys(
        data_dir=tmp_path / "no-kb",
        app_keys=[ApiKey("k", ())],
        llm_base_url=llm.base_url,
        llm_model="m",
        web_provider="bocha",
        bocha_api_key=WEB_KEY,
        web_base_url=web.base_url,
        web_count=2,
    )
    llm.push(Script.text("据网上资料[C:1]。", size=2))
    with run_service(settings) as live:
        events = await raw_events(
            client, live.base_url + "/v1/chat-messages", body("巡检怎么做？"), live.headers("k")
        )
    kr = node_events(events, "node_finished", "knowledge-retrieval")[0]["data"]
    assert kr["status"] == "failed" and "StoreError" in kr["error"]
    chunks = node_events(events, "node_finished", "code")[0]["data"]["outputs"]["chunk_metadata"]
    assert chunks and {c["source_type"] for c in chunks} == {"web"}
    end = next(e for e in events if e["event"] == "message_end")
    assert [r["data_source_type"] for r in end["metadata"]["retriever_resources"]] == ["web"]


async def _stored_answer(
    service: LiveServer, client: httpx.AsyncClient, user: str
) -> dict[str, Any]:
    """The only message of ``user``'s only conversation, once it is no longer running."""
    headers = service.headers()
    deadline = time.monotonic() + GUARD_S
    while time.monotonic() < deadline:
        convs = await client.get(
            service.base_url + "/v1/conversations", params={"user": user}, headers=headers
        )
        listed = convs.json()["data"]
        if listed:
            page = await client.get(
                service.base_url + "/v1/messages",
                params={"conversation_id": listed[0]["id"], "user": user},
                headers=headers,
            )
            stored: dict[str, Any] = page.json()["data"][0]
            if stored["gcite_status"] != "running":
                return stored
        await asyncio.sleep(0.05)
    raise AssertionError(f"no finished message for {user}")


async def test_blocking_client_disconnect_cancels_the_model_call(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    llm.push(Script(deltas=["钥匙在", "保险柜[C:1]", "。"], drop_after=None, hang=True))
    url = service.base_url + "/v1/chat-messages"
    user = "blocking-leaver"
    request = asyncio.ensure_future(
        client.post(url, json=body(QUESTION, user=user, mode="blocking"), headers=service.headers())
    )
    await until(lambda: bool(llm.requests) or request.done(), GUARD_S)  # the call is under way
    assert llm.requests and not request.done()
    request.cancel()  # the client goes away: httpx closes the connection
    with contextlib.suppress(asyncio.CancelledError):
        await request
    assert await asyncio.to_thread(llm.wait_for_disconnect, 1)
    stored = await _stored_answer(service, client, user)
    assert stored["gcite_status"] == "stopped" and stored["error"] == "client disconnected"
    assert llm.completed == 0


async def test_stream_ending_without_done_or_finish_reason_is_a_failure(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    frames = [
        b'data: {"choices": [{"delta": {"role": "assistant", "content": ""}}]}\n\n',
        'data: {"choices": [{"delta": {"content": "钥匙在保险柜[C:1]"}}]}\n\n'.encode(),
    ]
    llm.push(Script(raw=frames))  # a clean end of the body, but no finish_reason, no [DONE]
    url = service.base_url + "/v1/chat-messages"
    user = "truncated"
    events = await raw_events(client, url, body(QUESTION, user=user), service.headers())
    assert names(events)[-2:] == ["workflow_finished", "error"]
    assert "message_end" not in names(events)
    llm_done = node_events(events, "node_finished", "llm")[0]["data"]
    assert llm_done["status"] == "failed" and llm_done["outputs"]["text"] == "钥匙在保险柜[C:1]"
    assert events[-1]["code"] == "completion_request_error" and events[-1]["status"] == 400
    stored = await _stored_answer(service, client, user)
    assert stored["failed"] is True and stored["gcite_status"] == "failed"
    assert stored["answer"] == "钥匙在保险柜[C:1]"


async def test_client_disconnect_stores_the_chunks_the_partial_answer_cites(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    llm.push(Script(deltas=["钥匙在保险柜[C:1]。", *("等" * 200)], token_delay_s=0.05))
    url = service.base_url + "/v1/chat-messages"
    user = "leaver-with-citation"
    answer = ""
    async for event in iter_events(client, url, body(QUESTION, user=user), service.headers()):
        if event["event"] == "message":
            answer += event["answer"]
            if "[C:1]" in answer:
                break  # closes the HTTP response
    assert await asyncio.to_thread(llm.wait_for_disconnect, 1)
    stored = await _stored_answer(service, client, user)
    assert stored["gcite_status"] == "stopped" and stored["answer"].startswith("钥匙在保险柜[C:1]")
    resources = stored["retriever_resources"]
    assert [r["doc_metadata"]["chunk_id"] for r in resources] == ["1"]
    assert resources[0]["position"] == 1


async def test_reasoning_streams_as_a_tagged_think_block_the_client_keeps_apart(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    llm.push(Script.text("备用钥匙在三号保险柜[C:1]。", size=3, reasoning=["先找", "钥匙[C:2]"]))
    url = service.base_url + "/v1/chat-messages"
    events = await raw_events(client, url, body(QUESTION), service.headers())
    text = "".join(e["answer"] for e in events if e["event"] == "message")
    assert (
        text == "<think>\n先找钥匙[C:2]\n</think>备用钥匙在三号保险柜[C:1]。"
    )  # Dify's tagged format
    end = next(e for e in events if e["event"] == "message_end")
    assert end["metadata"]["gcite"]["cited_ids"] == ["1"]  # the reasoning cites nothing
    llm.push(Script.text("备用钥匙在三号保险柜[C:1]。", size=3, reasoning=["先找"]))
    view = await client_view(client, url, body(QUESTION), service.headers())
    assert view.answer == "备用钥匙在三号保险柜。"  # the reasoning is kept apart
    assert [raw for raw, _ in view.citations] == ["1"]
