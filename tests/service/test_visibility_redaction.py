"""Stored answers under the key's current roles (issue 16 item 3): every document retrieved
for a turn counts, cited or not; history, GET /v1/messages and both Plan B endpoints
redact what the key can no longer see, and say so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_streams import body, client_view, context_blocks, run_service

from gcite.config import ApiKey, Settings
from gcite.service.visibility import REDACTED_ANSWER
from support.openai_standin import OpenAIStandin, Script

pytestmark = pytest.mark.asyncio(loop_scope="session")

SECRET = "三号保险柜"
KEY = "key-rotating"
HEADERS = {"Authorization": f"Bearer {KEY}"}


def _settings(kb: Path, db: Path, llm: OpenAIStandin, roles: tuple[str, ...]) -> Settings:
    return Settings.from_keys(
        data_dir=kb,
        database_url=f"sqlite:///{db}",
        top_k=5,
        ping_interval_s=0.2,
        llm_base_url=llm.base_url,
        llm_model="standin",
        app_keys=[ApiKey(KEY, roles, name="rotating")],
    )


def _uses_secret_cites_public(request: dict[str, Any]) -> Script:
    """An answer that uses the secret document's text but cites only the public one."""
    blocks = context_blocks(request)
    public = next(i for i, text in blocks.items() if "访客" in text)
    used = SECRET if any(SECRET in text for text in blocks.values()) else "（无）"
    return Script.text(f"钥匙在{used}，访客请登记[C:{public}]。", size=4)


async def test_an_uncited_now_hidden_document_is_redacted_everywhere(
    role_kb: Path, llm: OpenAIStandin, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    db = tmp_path / "chat.sqlite3"
    llm.responder = _uses_secret_cites_public
    question = body("监控中心备用钥匙放在哪里？访客怎么登记？", user="u")
    with run_service(_settings(role_kb, db, llm, ("安保主管",))) as live:
        url = live.base_url + "/v1/chat-messages"
        first = await client_view(client, url, question, HEADERS)
        assert SECRET in first.answer
        cited = first.metadata["retriever_resources"]
        assert cited and all(SECRET not in r["content"] for r in cited)  # not cited
        conv = first.conversation_id
    # the key loses the role; the same conversation goes on
    with run_service(_settings(role_kb, db, llm, ())) as live:
        base = live.base_url
        second = await client_view(
            client,
            base + "/v1/chat-messages",
            body("还有呢？", user="u", conversation_id=conv),
            HEADERS,
        )
        assert second.error is None
        prompt = json.dumps(llm.requests[-1]["messages"], ensure_ascii=False)
        assert SECRET not in prompt  # the earlier answer is not in the history
        assert "监控中心备用钥匙放在哪里" in prompt  # its question stays

        params = {"conversation_id": conv, "user": "u"}
        listed = (await client.get(base + "/v1/messages", params=params, headers=HEADERS)).json()
        earlier = listed["data"][0]
        assert earlier["answer"] == REDACTED_ANSWER and earlier["redacted"] is True
        assert earlier["redacted_chunks"] >= 1
        assert SECRET not in json.dumps(listed, ensure_ascii=False)

        plan_b = await client.get(
            f"{base}/v1/conversations/{conv}/chunk-metadata", params={"user": "u"}, headers=HEADERS
        )
        assert SECRET not in plan_b.text
        assert plan_b.json()["data"][0]["redacted"] is True
        one = await client.get(
            f"{base}/v1/messages/{earlier['id']}/chunk-metadata",
            params={"user": "u"},
            headers=HEADERS,
        )
        assert SECRET not in one.text
        item = one.json()
        assert item["redacted"] is True and item["chunk_count"] == len(item["chunk_metadata"])
        assert all("访客" in c["content"] for c in item["chunk_metadata"])
    # the role comes back: nothing was lost
    with run_service(_settings(role_kb, db, llm, ("安保主管",))) as live:
        params = {"conversation_id": conv, "user": "u"}
        again = await client.get(live.base_url + "/v1/messages", params=params, headers=HEADERS)
        assert SECRET in again.json()["data"][0]["answer"]
        assert "redacted" not in again.json()["data"][0]
