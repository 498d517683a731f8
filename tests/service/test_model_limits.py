"""A model call past its limits ends the run cleanly: Dify's
``error`` event after ``workflow_finished(failed)``, the partial answer stored as failed."""

from __future__ import annotations

import asyncio
import time
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
GUARD_S = 120.0  # hang guard only


def _limited(data_dir: Path, db_dir: Path, llm_base_url: str, idle_s: float) -> Settings:
    return Settings.from_keys(
        data_dir=data_dir,
        database_url=f"sqlite:///{db_dir / 'chat.sqlite3'}",
        app_keys=[ApiKey("key-guard", ("安保主管",))],
        ping_interval_s=0.1,
        llm_base_url=llm_base_url,
        llm_model="standin",
        llm_idle_timeout_s=idle_s,
        llm_total_timeout_s=600.0,
        max_answer_chars=60,
        max_stream_line_bytes=200_000,
    )


@pytest.fixture(scope="module")
def idle_service(
    role_kb: Path, llm_standin: OpenAIStandin, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """A short no-text deadline: the keep-alive case waits for it to pass (it may pass
    later on a busy machine, never earlier)."""
    settings = _limited(role_kb, tmp_path_factory.mktemp("idle"), llm_standin.base_url, 2.0)
    with run_service(settings) as live:
        yield live


@pytest.fixture(scope="module")
def capped_service(
    role_kb: Path, llm_standin: OpenAIStandin, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """Size caps only: its deadlines are hang guards, so however slow the machine, a
    capped answer never ends on a deadline instead."""
    settings = _limited(role_kb, tmp_path_factory.mktemp("caps"), llm_standin.base_url, 600.0)
    with run_service(settings) as live:
        yield live


async def _stored(live: LiveServer, client: httpx.AsyncClient, user: str) -> dict[str, Any]:
    """The user's last message once it is no longer running (a hang guard bounds it)."""
    deadline = time.monotonic() + GUARD_S
    while True:
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
        assert time.monotonic() < deadline, "no stored message"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize(
    ("served", "script", "fragment"),
    [
        (
            "idle_service",
            Script(deltas=["访客车辆"], trickle=b": keep-alive\n\n"),
            "没有返回新的回答文字",
        ),
        ("capped_service", Script.text("停" * 200, size=5), "长度上限 60"),
        ("capped_service", Script(deltas=["访客车辆"], endless_line=True), "字节"),
    ],
    ids=["keep-alive", "answer-size", "stream-line"],
)
async def test_a_run_past_a_limit_fails_cleanly(
    request: pytest.FixtureRequest,
    llm: OpenAIStandin,
    client: httpx.AsyncClient,
    served: str,
    script: Script,
    fragment: str,
) -> None:
    limited_service: LiveServer = request.getfixturevalue(served)
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
    if fragment != "长度上限 60":  # past the size cap the stand-in may have sent it all
        assert await asyncio.to_thread(llm.wait_for_disconnect, 1, GUARD_S)
