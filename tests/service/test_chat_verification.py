"""Citation verification at the end of a run, against the real service on loopback:
``message_end.metadata.gcite_verification`` after every text event, the stored message,
Plan B, and the blocking body."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from service_streams import LiveServer, body, context_blocks, raw_events

from support.openai_standin import OpenAIStandin, Script
from support.web_standin import Reply, WebStandin, bocha_payload

pytestmark = pytest.mark.asyncio(loop_scope="session")

QUESTION = "监控中心的备用钥匙放在哪里？"


async def test_streamed_answer_ends_with_the_verification(
    service: LiveServer, llm: OpenAIStandin, client: httpx.AsyncClient
) -> None:
    # one right citation, one wrong: the visitor rule does not say where the key is
    llm.push(Script.text("备用钥匙存放在三号保险柜内[C:1]。钥匙柜有二十个格子[C:1]。", size=3))
    headers = service.headers("key-guard")
    url = service.base_url + "/v1/chat-messages"
    events = await raw_events(client, url, body(QUESTION, user="verify"), headers)
    kinds = [e["event"] for e in events if e["event"] != "ping"]
    end = kinds.index("message_end")
    assert "message" in kinds and max(i for i, k in enumerate(kinds) if k == "message") < end
    message_end = events[[e["event"] for e in events].index("message_end")]
    report = message_end["metadata"]["gcite_verification"]
    assert report["version"] == 1 and report["model"].startswith("lexical")
    first, second = report["sentences"]
    right = first["citations"][0]
    assert right["id"] == "1" and right["supported"] is True
    assert "三号保险柜" in right["support"]["text"]
    wrong = second["citations"][0]
    assert wrong["supported"] is False and wrong["score"] < right["score"]
    assert report["weak"] == [{"sentence": 1, "id": "1"}]
    # the support span points into the cited chunk's content
    chunks = {
        str(c["id"]): c
        for e in events
        if e["event"] == "node_finished" and (e["data"].get("outputs") or {}).get("chunk_metadata")
        for c in e["data"]["outputs"]["chunk_metadata"]
    }
    span = right["support"]
    assert chunks["1"]["content"][span["start"] : span["end"]] == span["text"]

    # the second dimension: the key's place is asked and given (the cabinet), answered
    assert report["answers_question"] is True
    assert report["answering"]["parts"][0]["types"] == ["place"]

    message_id = message_end["message_id"]
    plan_b = await client.get(
        f"{service.base_url}/v1/messages/{message_id}/chunk-metadata",
        params={"user": "verify"},
        headers=headers,
    )
    assert plan_b.json()["gcite_verification"] == report


async def test_plan_b_drops_the_verification_of_a_redacted_message() -> None:
    from gcite.service.visibility import redact_chunks

    item = {
        "chunk_metadata": [{"id": "1", "source_type": "rag", "document_id": "d1"}],
        "cited_ids": ["1"],
        "gcite_verification": {"sentences": [{"text": "秘密"}]},
    }
    assert redact_chunks(item, {"d1"})["gcite_verification"] == item["gcite_verification"]
    assert redact_chunks(item, set())["gcite_verification"] is None


async def test_blocking_body_carries_the_verification(
    offline_service: LiveServer, client: httpx.AsyncClient
) -> None:
    url = offline_service.base_url + "/v1/chat-messages"
    response = await client.post(
        url,
        json=body("访客车辆停在哪里？", user="verify-b", mode="blocking"),
        headers=offline_service.headers("key-visitor"),
    )
    data = response.json()
    assert "[C:1]" in data["answer"], data["answer"]
    report = data["metadata"]["gcite_verification"]
    assert report["checked"] >= 1 and report["supported"] == report["checked"]
    assert report["weak"] == []
    cite = report["sentences"][0]["citations"][0]
    assert "访客车位" in cite["support"]["text"]


async def test_a_refusal_has_nothing_to_verify(
    offline_service: LiveServer, client: httpx.AsyncClient
) -> None:
    url = offline_service.base_url + "/v1/chat-messages"
    response = await client.post(
        url,
        json=body("大厦食堂周五的特价菜是什么？", user="verify-c", mode="blocking"),
        headers=offline_service.headers("key-visitor"),
    )
    data = response.json()
    assert data["answer"] == "根据现有资料无法确定"
    report = data["metadata"]["gcite_verification"]
    assert report["checked"] == 0 and report["weak"] == []


async def test_an_answer_that_does_not_answer_is_flagged_in_every_copy(
    service: LiveServer, llm: OpenAIStandin, client: httpx.AsyncClient
) -> None:
    # a supported sentence about the key that does not say where it is
    llm.push(Script.text("取用备用钥匙须两人在场并登记[C:1]。", size=3))
    headers = service.headers("key-guard")
    url = service.base_url + "/v1/chat-messages"
    events = await raw_events(client, url, body(QUESTION, user="verify-n"), headers)
    message_end = next(e for e in events if e["event"] == "message_end")
    report = message_end["metadata"]["gcite_verification"]
    assert report["weak"] == [] and report["supported"] == 1  # supported ...
    assert report["answers_question"] is False  # ... but not where the key is
    (part,) = report["answering"]["parts"]
    assert part == {**part, "text": QUESTION, "types": ["place"], "typed": False}
    # Plan B (read from the stored message) carries the same report
    message_id = message_end["message_id"]
    plan_b = await client.get(
        f"{service.base_url}/v1/messages/{message_id}/chunk-metadata",
        params={"user": "verify-n"},
        headers=headers,
    )
    assert plan_b.json()["gcite_verification"] == report  # read from the stored message


async def test_a_paraphrase_citing_a_lower_ranked_chunk_that_answers_is_not_flagged(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    # a web page (ranked after the knowledge base) says what the handbook says
    page = {
        "title": "安保值守须知",
        "url": "https://security.example.com/keys",
        "snippet": "监控中心备用钥匙存放在地下一层安保办公区的三号保险柜内。",
    }
    web.script(Reply.ok(bocha_payload(QUESTION, [page], minimal=True)))
    cited: dict[str, str] = {}

    def answer(request: dict[str, Any]) -> Script:
        blocks = context_blocks(request)
        cited["web"] = max((i for i, t in blocks.items() if "三号保险柜" in t), key=int)
        cited["rag"] = min((i for i, t in blocks.items() if "三号保险柜" in t), key=int)
        # the model's own words: fewer of the question's words than either source
        return Script.text(f"监控中心的钥匙锁在三号保险柜里[C:{cited['web']}]。", size=3)

    llm.responder = answer
    headers = service.headers("key-guard")
    url = service.base_url + "/v1/chat-messages"
    events = await raw_events(client, url, body(QUESTION, user="verify-p"), headers)
    report = next(e for e in events if e["event"] == "message_end")["metadata"][
        "gcite_verification"
    ]
    assert int(cited["rag"]) < int(cited["web"])  # the handbook chunk ranks above the cited
    # answered in its own words, and the cited page says it as well as the handbook
    assert report["answering"]["parts"][0]["answered"] is True
    assert report["answers_question"] is True
    assert report["answering"]["outranked_by"] is None
