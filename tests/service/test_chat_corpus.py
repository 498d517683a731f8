"""Role filtering end to end on the shared law corpus (``law_store``): the key's roles decide."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from service_streams import LiveServer, body, node_events, raw_events, run_service

from gcite.config import ApiKey, Settings

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.corpus]

SHANGHAI = "上海市住宅物业管理规定"
QUESTION = "上海的住宅物业，业主大会和业主委员会是怎么规定的？"


@pytest.fixture(scope="module")
def law_service(law_store: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    settings: Settings = law_store.settings
    db = tmp_path_factory.mktemp("law-db") / "chat.sqlite3"
    keys = [ApiKey("k-nobody", ()), ApiKey("k-manager", ("物业经理",))]
    live_settings = Settings.from_keys(
        data_dir=settings.data_dir,
        embed_backend=settings.embed.backend,
        database_url=f"sqlite:///{db}",
        app_keys=keys,
        top_k=8,
        kb_timeout_s=60.0,
    )
    with run_service(live_settings) as live:
        yield live


def _documents(events: list[dict[str, Any]]) -> list[str]:
    result = node_events(events, "node_finished", "knowledge-retrieval")[0]["data"]["outputs"]
    return [str(item["metadata"].get("document_name", "")) for item in result["result"]]


async def test_restricted_law_only_for_the_role_bound_to_the_key(
    law_service: LiveServer, law_store: Any, client: httpx.AsyncClient
) -> None:
    url = law_service.base_url + "/v1/chat-messages"
    manager = _documents(
        await raw_events(client, url, body(QUESTION), law_service.headers("k-manager"))
    )
    assert any(SHANGHAI in name for name in manager)
    sneaky = body(QUESTION, user="物业经理", inputs={"roles": ["物业经理"]})
    nobody = await raw_events(client, url, sneaky, law_service.headers("k-nobody"))
    names = _documents(nobody)
    assert names and not any(SHANGHAI in name for name in names)
    assert not any("北京市物业管理条例" in name for name in names)
    answer = "".join(e["answer"] for e in nobody if e["event"] == "message")
    end = next(e for e in nobody if e["event"] == "message_end")
    cited = [r["document_name"] for r in end["metadata"]["retriever_resources"]]
    assert not any(SHANGHAI in name for name in cited)
    assert answer
