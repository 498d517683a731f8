"""Reasoning models and broken Unicode through the real service (uvicorn on loopback).

The LLM is the OpenAI-protocol stand-in, scripted as reasoning models send their
reasoning (``reasoning_content`` / ``reasoning`` delta fields, or ``<think>`` tags the
model writes itself) and as a provider that cuts a character outside the BMP between two
chunks (lone JSON surrogate escapes). Checked on the wire, through the project's stream
client, and in what the service stores and feeds back: reasoning never cites, never
reaches ``retriever_resources``, the cited ids, Plan B or the panel, never goes back
into the history; the token usage still counts it; broken Unicode never breaks a stream.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_streams import LiveServer, body, client_view, raw_events

from gcite.stream.sse import AnswerResult
from support.openai_standin import OpenAIStandin, Script

pytestmark = pytest.mark.asyncio(loop_scope="session")

QUESTION = "访客怎么登记？"
ANSWER = "访客须在服务台登记[C:1]。"


def _url(service: LiveServer) -> str:
    return service.base_url + "/v1/chat-messages"


async def _plan_b(
    client: httpx.AsyncClient, service: LiveServer, message_id: str, user: str
) -> dict[str, Any]:
    response = await client.get(
        f"{service.base_url}/v1/messages/{message_id}/chunk-metadata",
        params={"user": user},
        headers=service.headers(),
    )
    assert response.status_code == 200, response.text
    payload: dict[str, Any] = response.json()
    return payload


def _only_answer_cites(result: AnswerResult) -> None:
    """The answer cites chunk 1; the reasoning's [C:2] counts nowhere."""
    assert result.error is None and result.finished
    assert result.answer == "访客须在服务台登记。"
    assert result.citations == [("1", 1)] and result.invalid == []
    assert [row["raw_id"] for row in result.panel] == ["1"]
    gcite = result.metadata["gcite"]
    assert gcite["cited_ids"] == ["1"] and gcite["invalid_ids"] == []
    resources = result.metadata["retriever_resources"]
    assert len(resources) == 1 and resources[0]["doc_metadata"]["chunk_id"] == "1"


@pytest.mark.parametrize(
    ("field", "placeholder"),
    [("reasoning_content", None), ("reasoning", "")],  # DeepSeek / Qwen; vLLM now / Ollama
)
async def test_reasoning_fields_arrive_tagged_and_never_cite(
    service: LiveServer,
    llm: OpenAIStandin,
    client: httpx.AsyncClient,
    field: str,
    placeholder: str | None,
) -> None:
    user = f"thinker-{field}"
    llm.push(
        Script(
            reasoning=["先看片段[C:2]", "和[C:9]，再答"],
            deltas=["访客须在服务台", "登记[C:1]。"],
            reasoning_field=field,
            reasoning_placeholder=placeholder,
            usage=(100, 7),
        )
    )
    first = await client_view(client, _url(service), body(QUESTION, user=user), service.headers())
    # on the wire: Dify's reasoning_format "tagged", a <think> block at the answer's start
    assert first.raw_answer == "<think>\n先看片段[C:2]和[C:9]，再答\n</think>" + ANSWER
    assert first.reasoning == "\n先看片段[C:2]和[C:9]，再答\n"
    _only_answer_cites(first)
    # the usage still counts the reasoning tokens (the provider's figure)
    assert first.metadata["usage"]["completion_tokens"] == 7
    plan_b = await _plan_b(client, service, first.message_id, user)
    assert plan_b["cited_ids"] == ["1"]
    # the next turn: the earlier answer goes back without its reasoning (and markers)
    llm.push(Script.text("登记后领取临时门禁卡[C:1]。", size=4))
    second = await client_view(
        client,
        _url(service),
        body("然后呢？", user=user, conversation_id=first.conversation_id),
        service.headers(),
    )
    assert second.error is None
    assert llm.requests[-1]["messages"][1:] == [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "访客须在服务台登记。"},
        {"role": "user", "content": "然后呢？"},
    ]
    history = await client.get(
        service.base_url + "/v1/messages",
        params={"conversation_id": first.conversation_id, "user": user},
        headers=service.headers(),
    )
    assert history.json()["data"][0]["answer"] == ANSWER


async def test_think_tags_written_by_the_model_never_cite(
    service: LiveServer, llm: OpenAIStandin, client: httpx.AsyncClient
) -> None:
    user = "tagged-model"
    llm.push(Script.text("<think>\n先看片段[C:2]\n</think>\n\n" + ANSWER, size=3))
    first = await client_view(client, _url(service), body(QUESTION, user=user), service.headers())
    assert first.reasoning == "\n先看片段[C:2]\n"
    _only_answer_cites(first)
    assert (await _plan_b(client, service, first.message_id, user))["cited_ids"] == ["1"]
    llm.push(Script.text("好的。", size=4))
    await client_view(
        client,
        _url(service),
        body("然后呢？", user=user, conversation_id=first.conversation_id),
        service.headers(),
    )
    assert llm.requests[-1]["messages"][2] == {
        "role": "assistant",
        "content": "访客须在服务台登记。",
    }


async def test_reasoning_on_text_chunk_events_and_in_blocking_mode(
    service: LiveServer, llm: OpenAIStandin, client: httpx.AsyncClient
) -> None:
    llm.push(Script(reasoning=["想[C:2]"], deltas=[ANSWER]))
    events = await raw_events(
        client, _url(service), body(QUESTION, user="text-chunk"), service.headers("key-text")
    )
    text = "".join(e["data"]["text"] for e in events if e["event"] == "text_chunk")
    assert text == "<think>\n想[C:2]\n</think>" + ANSWER
    llm.push(Script(reasoning=["想[C:2]"], deltas=[ANSWER]))
    response = await client.post(
        _url(service), json=body(QUESTION, user="blocking", mode="blocking"),
        headers=service.headers(),
    )  # fmt: skip
    payload = response.json()
    assert payload["answer"] == "<think>\n想[C:2]\n</think>" + ANSWER
    assert payload["metadata"]["gcite"]["cited_ids"] == ["1"]
    assert len(payload["metadata"]["retriever_resources"]) == 1


async def test_reasoning_only_and_late_reasoning(
    service: LiveServer, llm: OpenAIStandin, client: httpx.AsyncClient
) -> None:
    # a model that only reasoned: the block is closed, the answer is empty, nothing cited
    llm.push(Script(reasoning=["只想了[C:1]"], deltas=[]))
    only = await client_view(client, _url(service), body(QUESTION, user="r1"), service.headers())
    assert only.raw_answer == "<think>\n只想了[C:1]\n</think>"
    assert only.answer == "" and only.citations == [] and only.error is None
    assert only.metadata["retriever_resources"] == []
    # reasoning after the answer started cannot go at its start: not on the wire
    frames = [
        b'data: {"choices": [{"delta": {"content": "\\u8bbf\\u5ba2[C:1]"}}]}\n\n',
        b'data: {"choices": [{"delta": {"reasoning_content": "late [C:2]"}}]}\n\n',
        b'data: {"choices": [{"delta": {"content": "\\u3002"}, "finish_reason": "stop"}]}\n\n',
    ]
    llm.push(Script(raw=frames))
    late = await client_view(client, _url(service), body(QUESTION, user="r2"), service.headers())
    assert late.raw_answer == "访客[C:1]。" and late.citations == [("1", 1)]


async def test_split_surrogates_never_break_the_stream(
    service: LiveServer, llm: OpenAIStandin, client: httpx.AsyncClient
) -> None:
    # "🚪" cut between two chunks (JSON escapes \ud83d then \udeaa), and a lone half
    deltas = ["访客门\ud83d", "\udeaa须登记[C:1]", "。孤\udc00"]
    llm.push(Script(deltas=deltas, reasoning=["想\ud83d", "\ude00"], ascii_json=True))
    result = await client_view(
        client, _url(service), body(QUESTION, user="unicode"), service.headers()
    )
    assert result.error is None and result.finished
    assert result.answer == "访客门🚪须登记。孤\ufffd" and result.citations == [("1", 1)]
    assert result.reasoning == "\n想😀\n"
    history = await client.get(
        service.base_url + "/v1/messages",
        params={"conversation_id": result.conversation_id, "user": "unicode"},
        headers=service.headers(),
    )
    assert history.json()["data"][0]["answer"] == "访客门🚪须登记[C:1]。孤\ufffd"


def test_gcite_ask_url_prints_broken_unicode_without_a_traceback(
    service: LiveServer, llm: OpenAIStandin, tmp_path: Path
) -> None:
    llm.push(Script(deltas=["访客门\ud83d", "\udeaa须登记[C:1]。孤\udc00"], ascii_json=True))
    script = Path(sys.executable).with_name("gcite")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "gcite.cli"]
    proc = subprocess.run(
        [*cmd, "ask", QUESTION, "--url", service.base_url, "--key", "key-guard"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "访客门🚪须登记¹。孤\ufffd" in proc.stdout
    llm.push(Script(deltas=["门\ud83d", "\udeaa"], ascii_json=True))
    proc = subprocess.run(
        [*cmd, "ask", QUESTION, "--url", service.base_url, "--key", "key-guard", "--json"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert "".join(e.get("answer", "") for e in answers if e.get("event") == "message") == "门🚪"
