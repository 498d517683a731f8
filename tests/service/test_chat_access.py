"""What a key may see across turns and datasets: current roles, the configured dataset,
no ``access_roles`` in what chat clients receive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from service_streams import (
    LiveServer,
    RawStream,
    body,
    client_view,
    context_blocks,
    names,
    node_events,
    raw_events,
    run_service,
)

from gcite.config import ApiKey, Settings
from support.openai_standin import OpenAIStandin, Script
from support.web_standin import WebStandin

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
        "kb_timeout_s": 120.0,  # a hang guard: a search is never cut short on a busy machine
    }
    values.update(extra)
    return Settings.from_keys(**values)


def _quote(needle: str) -> Any:
    """A responder quoting the first context line containing ``needle``, with its marker."""

    def respond(request: dict[str, Any]) -> Script:
        blocks = context_blocks(request)
        chosen = next((i for i, text in blocks.items() if needle in text), "1")
        line = next((ln for ln in blocks.get(chosen, "").splitlines() if needle in ln), "没有找到")
        return Script.text(f"{line.rstrip('。')}[C:{chosen}]。", size=3)

    return respond


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
    llm.responder = _quote("备用钥匙")  # the answer itself quotes the secret
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
        assert any(
            m["role"] == "assistant" and SECRET in m["content"]
            for m in llm.requests[-1]["messages"]
        )  # and the earlier answer is in the history
    # the same key loses the role: earlier cited chunks of that document are not listed again
    visitor = _chat_settings(role_kb, db, llm, app_keys=[ApiKey("key-rotating", ())])
    with run_service(visitor) as live:
        url = live.base_url + "/v1/chat-messages"
        third = await client_view(client, url, body("再说一遍？", conversation_id=conv), headers)
        assert third.error is None
        messages = llm.requests[-1]["messages"]
        system = messages[0]["content"]
        assert SECRET not in system and SECRET_TITLE not in system
        assert "control-room" not in system
        # the earlier answers quoted the secret document: they are left out of the history,
        # their questions stay
        assert not any(SECRET in m["content"] for m in messages)
        assert any(m["role"] == "user" and m["content"] == "还有呢？" for m in messages)


HANDBOOK_DOC = """---
document_title: 停车场管理规定
---

# 停车场管理规定

地下车库访客车位在二号电梯厅旁，访客停车须在服务台登记车牌。
"""

OTHER_DOC = """---
document_title: 另一园区停车办法
---

# 另一园区停车办法

北区访客车位在三号门岗西侧，访客停车须扫码缴费后离场。
"""


@pytest.fixture(scope="module")
def two_datasets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store holding two datasets, 手册库 and 别的库, with similar documents."""
    from gcite.knowledge import ingest_paths

    base = tmp_path_factory.mktemp("two-datasets")
    data_dir = base / "data"
    for name, text in (("手册库", HANDBOOK_DOC), ("别的库", OTHER_DOC)):
        folder = base / name
        folder.mkdir()
        (folder / "parking.md").write_text(text, encoding="utf-8")
        report = ingest_paths(
            [folder], settings=Settings.from_keys(data_dir=data_dir), dataset=name
        )
        assert report.added == 1 and not report.failed
    return data_dir


def _kr_result(events: list[dict[str, Any]]) -> dict[str, Any]:
    return node_events(events, "node_finished", "knowledge-retrieval")[0]["data"]


async def test_chat_searches_only_the_configured_dataset(
    two_datasets: Path, llm: OpenAIStandin, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    question = body("访客车位在哪里，怎么停车？")
    headers = {"Authorization": "Bearer k"}
    llm.responder = lambda request: Script.text(
        "".join(f"见[C:{i}]。" for i in context_blocks(request)), size=4
    )

    async def ask(dataset: str) -> list[dict[str, Any]]:
        settings = _chat_settings(
            two_datasets, tmp_path / f"{dataset or 'all'}.sqlite3", llm, dataset=dataset
        )
        settings.app_keys = [ApiKey("k", ())]
        with run_service(settings) as live:
            return await raw_events(client, live.base_url + "/v1/chat-messages", question, headers)

    events = await ask("手册库")
    kr = _kr_result(events)
    assert kr["status"] == "succeeded" and kr["outputs"]["result"]
    assert {i["metadata"]["dataset_name"] for i in kr["outputs"]["result"]} == {"手册库"}
    end = next(e for e in events if e["event"] == "message_end")
    cited = end["metadata"]["retriever_resources"]
    assert cited and {r["dataset_name"] for r in cited} == {"手册库"}
    # empty: every dataset of the store
    everything = _kr_result(await ask(""))["outputs"]["result"]
    assert {i["metadata"]["dataset_name"] for i in everything} == {"手册库", "别的库"}
    # a dataset the store does not have: a failed knowledge node saying so, not a silent []
    events = await ask("没有这个库")
    kr = _kr_result(events)
    assert kr["status"] == "failed" and "没有这个库" in kr["error"]
    assert names(events)[-2:] == ["workflow_finished", "message_end"]


async def test_access_roles_never_reach_chat_clients(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    url = service.base_url + "/v1/chat-messages"
    headers = service.headers("key-guard")
    llm.responder = _cite("备用钥匙")
    raw = b""
    async with client.stream(
        "POST", url, json=body("监控中心的备用钥匙放在哪里？", user="roles-hidden"), headers=headers
    ) as response:
        async for chunk in response.aiter_bytes():
            raw += chunk
    assert SECRET in raw.decode()  # the guard does get the restricted document ...
    assert b"access_roles" not in raw  # ... but not who else may read it
    conv = RawStream().feed(raw)[0]["conversation_id"]
    blocking = await client.post(
        url,
        json=body("还有呢？", user="roles-hidden", mode="blocking", conversation_id=conv),
        headers=headers,
    )
    assert blocking.status_code == 200 and SECRET in blocking.text
    assert "access_roles" not in blocking.text
    params = {"conversation_id": conv, "user": "roles-hidden"}
    stored = [
        await client.get(service.base_url + "/v1/messages", params=params, headers=headers),
        await client.get(
            f"{service.base_url}/v1/conversations/{conv}/chunk-metadata",
            params={"user": "roles-hidden"},
            headers=headers,
        ),
    ]
    for response in stored:
        assert response.status_code == 200 and SECRET in response.text
        assert "access_roles" not in response.text
