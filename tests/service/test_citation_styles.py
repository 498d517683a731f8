"""Citation styles end to end: a ``numbers`` key gets display numbers, a ``markers`` key ``[C:N]``.

Real service under uvicorn, the OpenAI stand-in writing ``[C:N]`` markers one character per
delta (every marker split across deltas), the web stand-in; the stored message is read back.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from service_streams import LiveServer, body, context_blocks, raw_events

from gcite.service.store import ConversationStore
from gcite.stream.render import CITE_SEPARATOR
from support.openai_standin import OpenAIStandin, Script
from support.web_standin import WebStandin

pytestmark = pytest.mark.asyncio(loop_scope="session")

QUESTION = "监控中心的备用钥匙放在哪里？"
SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")


def cited_numbers(text: str) -> list[int]:
    """The display numbers in a ``numbers``-style text, in order (``¹˒²`` -> [1, 2])."""
    out: list[int] = []
    digits = ""
    for ch in text + " ":
        if ch in "⁰¹²³⁴⁵⁶⁷⁸⁹":
            digits += ch.translate(SUPERSCRIPTS)
        else:
            if digits:
                out.append(int(digits))
            digits = ""
            assert ch != CITE_SEPARATOR or out, "a separator only follows a number"
    return out


def citing_responder(cited: dict[str, str]) -> Any:
    """Cites the web chunk first, then the knowledge-base chunk twice, then a missing id."""

    def respond(request: dict[str, Any]) -> Script:
        blocks = context_blocks(request)
        rag = next(i for i, text in blocks.items() if "备用钥匙" in text)
        web_id = max(blocks, key=int)
        cited.update(rag=rag, web=web_id)
        answer = (
            f"据公开资料[C:{web_id}]，钥匙在三号保险柜[C:{rag}][C:{web_id}]，"
            f"须两人[C:99]在场[C:{rag}]。"
        )
        return Script.text(answer, size=1)

    return respond


def answer_text(events: list[dict[str, Any]]) -> list[str]:
    return [e["answer"] for e in events if e["event"] == "message"]


async def test_numbers_key_gets_display_numbers_matching_the_resource_positions(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    cited: dict[str, str] = {}
    llm.responder = citing_responder(cited)
    url = service.base_url + "/v1/chat-messages"
    events = await raw_events(client, url, body(QUESTION), service.headers("key-stock"))
    deltas = answer_text(events)
    shown = "".join(deltas)
    assert shown == "据公开资料¹，钥匙在三号保险柜²˒¹，须两人在场²。"
    assert all(deltas) and not any("[" in d for d in deltas)  # no part of a marker, ever
    end = events[-1]
    assert end["event"] == "message_end"
    resources = end["metadata"]["retriever_resources"]
    positions = {r["position"]: r["doc_metadata"]["chunk_id"] for r in resources}
    assert positions == {1: cited["web"], 2: cited["rag"]}
    assert sorted(set(cited_numbers(shown))) == sorted(positions)
    assert end["metadata"]["gcite"]["cited_ids"] == [cited["web"], cited["rag"]]
    assert end["metadata"]["gcite"]["invalid_ids"] == ["99"]
    finished = next(e for e in events if e["event"] == "workflow_finished")
    assert finished["data"]["outputs"]["answer"] == shown
    llm_done = [e for e in events if e["event"] == "node_finished"][-1]
    assert llm_done["data"]["node_type"] == "llm" and llm_done["data"]["outputs"]["text"] == shown

    # stored: the raw answer (history, G-Cite clients) and what this client saw
    store = ConversationStore(service.settings.service.database_url)
    try:
        record = store.get_message(end["message_id"])
    finally:
        store.close()
    assert record is not None and record.shown_answer == shown
    assert record.answer.count("[C:") == 5 and "[C:99]" in record.answer
    # read back: the history endpoint gives this key what it saw; a markers key never sees it
    params = {"conversation_id": end["conversation_id"], "user": "u1"}
    page = await client.get(
        service.base_url + "/v1/messages", params=params, headers=service.headers("key-stock")
    )
    assert page.status_code == 200
    assert [m["answer"] for m in page.json()["data"]] == [shown]


async def test_numbers_key_blocking_answer_and_markers_key_unchanged(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    cited: dict[str, str] = {}
    llm.responder = citing_responder(cited)
    url = service.base_url + "/v1/chat-messages"
    blocking = await client.post(
        url, json=body(QUESTION, mode="blocking"), headers=service.headers("key-stock")
    )
    assert blocking.status_code == 200
    answer = blocking.json()["answer"]
    assert answer == "据公开资料¹，钥匙在三号保险柜²˒¹，须两人在场²。"
    assert [r["position"] for r in blocking.json()["metadata"]["retriever_resources"]] == [1, 2]

    events = await raw_events(client, url, body(QUESTION), service.headers("key-guard"))
    raw = "".join(answer_text(events))
    assert raw == (
        f"据公开资料[C:{cited['web']}]，钥匙在三号保险柜[C:{cited['rag']}][C:{cited['web']}]，"
        f"须两人[C:99]在场[C:{cited['rag']}]。"
    )
    end = events[-1]
    store = ConversationStore(service.settings.service.database_url)
    try:
        record = store.get_message(end["message_id"])
    finally:
        store.close()
    assert record is not None and (record.answer, record.shown_answer) == (raw, None)
