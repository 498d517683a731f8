"""What a key may see across turns and datasets: current roles, the configured dataset,
no ``access_roles`` in what chat clients receive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from service_streams import body, client_view, context_blocks, run_service

from gcite.config import ApiKey, Settings
from support.openai_standin import OpenAIStandin, Script

pytestmark = pytest.mark.asyncio(loop_scope="session")

DATASET = "服务测试库"  # the dataset of the `role_kb` fixture
SECRET = "三号保险柜"
SECRET_TITLE = "监控中心值守规程"


def _chat_settings(data_dir: Path, db: Path, llm: OpenAIStandin, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "database_url": f"sqlite:///{db}",
        "dataset": DATASET,
        "top_k": 3,
        "llm_base_url": llm.base_url,
        "llm_model": "standin-model",
        "llm_api_key": "sk-test",
        "kb_timeout_s": 20.0,
    }
    values.update(extra)
    return Settings(**values)


def _cite(needle: str) -> Any:
    """A responder citing the context block containing ``needle`` (else block 1)."""

    def respond(request: dict[str, Any]) -> Script:
        blocks = context_blocks(request)
        chosen = next((i for i, text in blocks.items() if needle in text), "1")
        return Script.text(f"答复如下[C:{chosen}]。", size=3)

    return respond


async def test_earlier_cited_chunks_follow_the_keys_current_roles(
    role_kb: Path, llm: OpenAIStandin, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    db = tmp_path / "chat.sqlite3"
    llm.responder = _cite("备用钥匙")
    guard = _chat_settings(role_kb, db, llm, app_keys=[ApiKey("key-rotating", ("安保主管",))])
    headers = {"Authorization": "Bearer key-rotating"}
    with run_service(guard) as live:
        url = live.base_url + "/v1/chat-messages"
        first = await client_view(client, url, body("监控中心的备用钥匙放在哪里？"), headers)
        cited = first.metadata["retriever_resources"]
        assert cited and SECRET in cited[0]["content"]
        conv = first.conversation_id
        await client_view(client, url, body("还有呢？", conversation_id=conv), headers)
        system = llm.requests[-1]["messages"][0]["content"]
        assert "已引用" in system and SECRET_TITLE in system  # still allowed: still listed
    # the same key loses the role: earlier cited chunks of that document are not listed again
    visitor = _chat_settings(role_kb, db, llm, app_keys=[ApiKey("key-rotating", ())])
    with run_service(visitor) as live:
        url = live.base_url + "/v1/chat-messages"
        third = await client_view(client, url, body("再说一遍？", conversation_id=conv), headers)
        assert third.error is None
        system = llm.requests[-1]["messages"][0]["content"]
        assert SECRET not in system and SECRET_TITLE not in system
        assert "control-room" not in system
