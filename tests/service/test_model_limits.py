"""A model call past its limits ends the run cleanly (issue 16 items 4 and 7): Dify's
``error`` event after ``workflow_finished(failed)``, the partial answer stored as failed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_streams import LiveServer, body, names, node_events, raw_events, run_service

from gcite.config import ApiKey, Settings
from support.openai_standin import OpenAIStandin, Script

pytestmark = pytest.mark.asyncio(loop_scope="session")

QUESTION = "访客车辆停在哪里？"


@pytest.fixture(scope="module")
def limited_service(
    role_kb: Path, llm_standin: OpenAIStandin, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    settings = Settings.from_keys(
        data_dir=role_kb,
        database_url=f"sqlite:///{tmp_path_factory.mktemp('limits') / 'chat.sqlite3'}",
        app_keys=[ApiKey("key-guard", ("安保主管",))],
        ping_interval_s=0.1,
        llm_base_url=llm_standin.base_url,
        llm_model="standin",
        # the keep-alive case waits this long; the others must not meet it on a busy machine
        llm_idle_timeout_s=2.0,
        llm_total_timeout_s=60.0,
        max_answer_chars=60,
        max_stream_line_bytes=200_000,
    )
    with run_service(settings) as live:
        yield live


async def _stored(live: LiveServer, client: httpx.AsyncClient, user: str) -> dict[str, Any]:
    for _ in range(100):
        convs = await client.get(
            live.base_url + "/v1/conversations", params={"user": user}, headers=live.headers()
        )
        listed = convs.json()["data"]
        if listed:
            page = await client.get(
                live.base_url + "/v1/messages",
                params={"conversation_id": listed[0]["id"], "user": user},
                headers=live.headers(),
            )
            data: list[dict[str, Any]] = page.json()["data"]
            if data and data[-1].get("gcite_status") != "running":
                return data[-1]
        await asyncio.sleep(0.05)
    raise AssertionError("no stored message")


@pytest.mark.parametrize(
    ("script", "fragment"),
    [
        (Script(deltas=["访客车辆"], trickle=b": keep-alive\n\n"), "没有返回新的回答文字"),
        (Script.text("停" * 200, size=5), "长度上限 60"),
        (Script(deltas=["访客车辆"], endless_line=True), "字节"),
    ],
    ids=["keep-alive", "answer-size", "stream-line"],
)
async def test_a_run_past_a_limit_fails_cleanly(
    limited_service: LiveServer,
    llm: OpenAIStandin,
    client: httpx.AsyncClient,
    script: Script,
    fragment: str,
) -> None:
    llm.push(script)
    user = f"limits-{fragment[:4]}"
    url = limited_service.base_url + "/v1/chat-messages"
    events = await raw_events(client, url, body(QUESTION, user=user), limited_service.headers())
    assert names(events)[-2:] == ["workflow_finished", "error"]
    assert "message_end" not in names(events)
    error = events[-1]
    assert error["code"] == "completion_request_error" and error["status"] == 400
    assert fragment in error["message"]
    assert events[-2]["data"]["status"] == "failed"
    llm_done = node_events(events, "node_finished", "llm")[0]["data"]
    assert llm_done["status"] == "failed"
    stored = await _stored(limited_service, client, user)
    assert stored["failed"] is True and stored["gcite_status"] == "failed"
    assert fragment in stored["error"]
    assert llm.wait_for_disconnect(1) or fragment == "长度上限 60"
