"""Follow-up questions (issue 14 item 2), through the real service on loopback.

The retrieval query of a turn is built from the conversation: offline by carrying the
earlier turn's subject (gcite.chatflow.followup.carry_subject), with a model by a
condense-question call (its own timeout, a fallback). Checked on the sample handbook
(extractive backend, no model) and on the law corpus (offline, and with the OpenAI
stand-in answering the condense call, slowly, or with nonsense).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_streams import LiveServer, body, node_events, raw_events, run_service

from gcite.chatflow.followup import carry_subject, earlier_queries, looks_like_followup
from gcite.config import ApiKey, Settings
from support.openai_standin import OpenAIStandin, Script

HANDBOOK = Path(__file__).resolve().parents[2] / "src" / "gcite" / "sample_data" / "handbook"
KEY = "k-follow"


def test_followups_are_recognised_and_carry_the_subject() -> None:
    for text in (
        "那白天呢？",
        "还有呢？",
        "那上海呢？",
        "如果是周末，巡更怎么安排？",
        "它多久检修一次？",
    ):
        assert looks_like_followup(text), text
    for text in ("访客车位在哪里，怎么停车？", "电梯维保单位多久要做一次清洁润滑？", "？？", ""):
        assert not looks_like_followup(text), text
    assert carry_subject("那白天呢？", ["夜间巡更多久一次？"]) == "夜间巡更多久一次？ 那白天呢？"
    assert carry_subject("那白天呢？", []) == "那白天呢？"
    assert carry_subject("会议室怎么预订？", ["夜间巡更多久一次？"]) == "会议室怎么预订？"
    # ellipsis: no leading 那, the subject left out (a predicate or a question alone)
    for text in (
        "要提前多久订",
        "当天能用几次",
        "大会议室呢，要提前多久订",
        "刚才说的那个要带证件吗",
    ):
        assert looks_like_followup(text), text
    assert (
        carry_subject("要提前多久订？", ["会议室怎么预订？"]) == "会议室怎么预订？ 要提前多久订？"
    )
    # a question naming its own subject is standalone, however short its predicate
    for text in ("夜班巡更要打几个点？", "报修电话是多少", "停车场晚上几点关门"):
        assert not looks_like_followup(text), text
    # a chain of follow-ups keeps the first subject
    assert earlier_queries(["夜间巡更多久一次？", "那白天呢？", "周末呢？"])[-1] == (
        "夜间巡更多久一次？ 那白天呢？ 周末呢？"
    )


def _kr(events: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    started = node_events(events, "node_started", "knowledge-retrieval")[0]["data"]["inputs"]
    finished = node_events(events, "node_finished", "knowledge-retrieval")[0]["data"]
    return str(started["query"]), list((finished["outputs"] or {}).get("result") or [])


async def _turn(
    client: httpx.AsyncClient, live: LiveServer, query: str, conv: str = ""
) -> tuple[str, str, list[dict[str, Any]], list[dict[str, Any]]]:
    payload = body(query, user="follow", **({"conversation_id": conv} if conv else {}))
    events = await raw_events(
        client, live.base_url + "/v1/chat-messages", payload, live.headers(KEY)
    )
    conv_id = next(e["conversation_id"] for e in events if "conversation_id" in e)
    searched, items = _kr(events)
    return conv_id, searched, items, events


def _settings(data_dir: Path, db: Path, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "embed_backend": "use",
        "database_url": f"sqlite:///{db}",
        "app_keys": [ApiKey(KEY, ("物业经理", "安保主管"))],
        "top_k": 8,
        "kb_timeout_s": 60.0,
    }
    values.update(extra)
    return Settings.from_keys(**values)


@pytest.fixture(scope="module")
def handbook_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from gcite.knowledge import ingest_paths

    data = tmp_path_factory.mktemp("handbook") / "data"
    report = ingest_paths(
        [HANDBOOK],
        settings=Settings.from_keys(data_dir=data, embed_backend="use"),
        dataset="员工手册",
    )
    assert report.added == 7 and not report.failed
    return data


@pytest.fixture(scope="module")
def handbook_service(
    handbook_data: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    db = tmp_path_factory.mktemp("handbook-db") / "chat.sqlite3"
    with run_service(_settings(handbook_data, db)) as live:
        yield live


@pytest.mark.asyncio(loop_scope="session")
async def test_offline_followup_on_the_handbook_keeps_the_subject(
    handbook_service: LiveServer, client: httpx.AsyncClient
) -> None:
    conv, searched, items, _ = await _turn(client, handbook_service, "夜间巡更多久一次？")
    assert searched == "夜间巡更多久一次？"
    assert items and {i["title"] for i in items} == {"01-patrol.md"}
    _, searched, items, events = await _turn(client, handbook_service, "那白天呢？", conv)
    assert searched == "夜间巡更多久一次？ 那白天呢？"
    assert items and items[0]["title"] == "01-patrol.md"
    answer = "".join(e["answer"] for e in events if e["event"] == "message")
    assert "日间巡更每 2 小时一次" in answer
    # the same words opening a new conversation: no subject, nothing relevant enough
    _, searched, alone, events = await _turn(client, handbook_service, "那白天呢？")
    assert searched == "那白天呢？" and alone == []
    answer = "".join(e["answer"] for e in events if e["event"] == "message")
    assert "根据现有资料无法确定" in answer


@pytest.mark.asyncio(loop_scope="session")
async def test_offline_off_topic_question_retrieves_nothing(
    handbook_service: LiveServer, client: httpx.AsyncClient
) -> None:
    _, _, items, events = await _turn(client, handbook_service, "大厦食堂周五的特价菜是什么？")
    assert items == []
    end = next(e for e in events if e["event"] == "message_end")
    assert end["metadata"]["retriever_resources"] == []


@pytest.mark.asyncio(loop_scope="session")
async def test_offline_elliptical_followup_carries_the_subject(
    handbook_service: LiveServer, client: httpx.AsyncClient
) -> None:
    conv, _, _, _ = await _turn(client, handbook_service, "会议室怎么预订？")
    # no leading 那, the subject left out
    _, searched, items, _ = await _turn(client, handbook_service, "最多提前几天？", conv)
    assert searched == "会议室怎么预订？ 最多提前几天？"
    assert items and items[0]["title"] == "05-meeting-rooms.md"


@pytest.mark.asyncio(loop_scope="session")
async def test_model_path_rewrites_followups_and_gates_retrieval(
    handbook_data: Path,
    llm: OpenAIStandin,
    client: httpx.AsyncClient,
    tmp_path: Path,
) -> None:
    rewrite = "会议室最多可以提前几天预订？"
    llm.responder = _condense_or_answer(rewrite)
    settings = _settings(
        handbook_data,
        tmp_path / "chat.sqlite3",
        llm_base_url=llm.base_url,
        llm_model="standin-model",
        llm_api_key="sk-test",
        condense_timeout_s=60.0,  # a hang guard: the stand-in answers at once
    )
    with run_service(settings) as live:
        conv, _, _, _ = await _turn(client, live, "会议室怎么预订？")
        # an elliptical follow-up goes to the model's rewrite
        _, searched, items, _ = await _turn(client, live, "最多提前几天？", conv)
        assert searched == rewrite
        assert any("最多提前几天？" in r["messages"][-1]["content"] for r in llm.requests)
        assert items and items[0]["title"] == "05-meeting-rooms.md"
        # below the threshold but standing out of the list: the gate admits it for the
        # model too (retrieved with the model's threshold alone it would be dropped)
        _, _, items, _ = await _turn(client, live, "外卖小哥能送上楼吗")
        assert [i["title"] for i in items][:1] == ["06-visitors.md"]
        assert items[0]["metadata"]["score"] < settings.knowledge.score_threshold
        prompt = "".join(str(m["content"]) for m in llm.requests[-1]["messages"])
        assert "外卖架" in prompt  # the chunk's words, not the question's
        # an off-topic question: nothing passes the gate, the model sees no chunk
        _, _, items, _ = await _turn(client, live, "明天天气咋样，会下雨不")
        assert items == []


@pytest.fixture(scope="module")
def law_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("law-follow") / "chat.sqlite3"


FIRST = "北京一栋写字楼公用的消火栓要检测维修，费用由谁出？"
REWRITE = "上海的写字楼公用消火栓检测维修费用由谁承担？"


@pytest.mark.corpus
@pytest.mark.asyncio(loop_scope="session")
async def test_offline_followup_on_the_law_corpus(
    law_store: Any, law_db: Path, client: httpx.AsyncClient
) -> None:
    with run_service(_settings(law_store.settings.data_dir, law_db)) as live:
        conv, _, first, _ = await _turn(client, live, FIRST)
        assert any("北京市消防条例" in i["title"] for i in first)
        _, searched, items, _ = await _turn(client, live, "那上海呢？", conv)
    assert searched == f"{FIRST} 那上海呢？"
    titles = [i["title"] for i in items]
    assert any("上海市消防条例" in t for t in titles), titles


def _condense_or_answer(rewrite: str, delay: float = 0.0) -> Any:
    def respond(request: dict[str, Any]) -> Script:
        prompt = request["messages"][-1]["content"]
        if "独立问题" in prompt:
            return Script.text(rewrite, first_token_delay_s=delay)
        return Script.text("见资料[C:1]。")

    return respond


@pytest.mark.corpus
@pytest.mark.asyncio(loop_scope="session")
async def test_model_condenses_the_followup(
    law_store: Any, law_db: Path, llm: OpenAIStandin, client: httpx.AsyncClient
) -> None:
    settings = _settings(
        law_store.settings.data_dir,
        law_db,
        llm_base_url=llm.base_url,
        llm_model="standin-model",
        llm_api_key="sk-test",
        condense_timeout_s=60.0,  # never met: the stand-in answers at once (a hang guard)
    )
    llm.responder = _condense_or_answer(REWRITE)
    with run_service(settings) as live:
        conv, searched, _, _ = await _turn(client, live, FIRST)
        assert searched == FIRST
        assert not any("独立问题" in r["messages"][-1]["content"] for r in llm.requests)
        _, searched, items, _ = await _turn(client, live, "那上海呢？", conv)
        assert searched == REWRITE
        condense = [r for r in llm.requests if "独立问题" in r["messages"][-1]["content"]]
        assert len(condense) == 1
        prompt = condense[0]["messages"][-1]["content"]
        assert FIRST in prompt and "那上海呢？" in prompt and "[C:" not in prompt
        assert any("上海市消防条例" in i["title"] for i in items)
        # a standalone question in the same conversation is not rewritten
        _, searched, _, _ = await _turn(client, live, "电梯维保单位多久要做一次清洁润滑？", conv)
        assert searched == "电梯维保单位多久要做一次清洁润滑？"


@pytest.mark.corpus
@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("rewrite, delay", [(REWRITE, 5.0), ("见资料[C:1]。", 0.0), ("", 0.0)])
async def test_condense_falls_back_to_the_offline_rewrite(
    law_store: Any,
    law_db: Path,
    llm: OpenAIStandin,
    client: httpx.AsyncClient,
    rewrite: str,
    delay: float,
) -> None:
    settings = _settings(
        law_store.settings.data_dir,
        law_db,
        llm_base_url=llm.base_url,
        llm_model="standin-model",
        llm_api_key="sk-test",
        condense_timeout_s=1.0,
    )
    llm.responder = _condense_or_answer(rewrite, delay)
    with run_service(settings) as live:
        conv, _, _, _ = await _turn(client, live, FIRST)
        _, searched, items, events = await _turn(client, live, "那上海呢？", conv)
    assert searched == f"{FIRST} 那上海呢？"  # timeout / not a question / empty: subject carried
    assert items
    answer = "".join(e["answer"] for e in events if e["event"] == "message")
    assert answer == "见资料[C:1]。"  # the answer itself still came
