"""The contract of the :class:`gcite.eval.runner.Asker` seam, run on both askers.

Every asker: warms up, answers a question as an :class:`Observation` (the answer without
markers, the cited chunks as dicts, the run's chunks, a positive latency, no error), takes
earlier turns, and is closed by :func:`run_questions` even when asking raises.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.dify_standin import Reply, dify_answer, dify_standin
from gcite.eval import Observation, parse_lines
from gcite.eval.runner import Asker, LocalAsker, RemoteAsker, run_questions

ROWS = [
    {"id": "one", "question": "夜间巡更要打卡多少个点位？", "gold_docs": ["01-patrol.md"]},
    {
        "id": "two",
        "question": "白天呢",
        "turns": [{"query": "夜间巡更多久一次", "answer": "每 1 小时一次。"}],
        "gold_docs": ["01-patrol.md"],
    },
]
CHUNKS = [
    {
        "id": "1",
        "source_type": "rag",
        "content": "日间巡更每 2 小时一次；夜间巡更必须走完全部 24 个点位。",
        "document_name": "01-patrol.md",
        "score": 0.9,
    }
]


def _local(eval_demo_dir: Path) -> Iterator[Asker]:
    from gcite.cli.demo import demo_settings

    yield LocalAsker(demo_settings(eval_demo_dir))


def _remote(_: Path) -> Iterator[Asker]:
    with dify_standin() as server:
        for _ in range(3):
            server.replies.append(Reply(body=dify_answer(["全部 24 个点位[C:1]。"], CHUNKS)))
        yield RemoteAsker(server.url + "/v1/chat-messages", "")


@pytest.fixture(params=[_local, _remote], ids=["local", "remote"])
def asker(request: pytest.FixtureRequest, eval_demo_dir: Path) -> Iterator[Asker]:
    factory: Callable[[Path], Iterator[Asker]] = request.param
    yield from factory(eval_demo_dir)


def test_asker_contract(asker: Asker) -> None:
    questions = parse_lines([json.dumps(r, ensure_ascii=False) for r in ROWS])

    async def run() -> list[Observation]:
        await asker.warm_up()
        try:
            return [await asker.ask(q) for q in questions]
        finally:
            await asker.aclose()

    for seen in asyncio.run(run()):
        assert seen.error is None and isinstance(seen.answer, str) and seen.answer
        assert "[C:" not in seen.answer
        assert all(isinstance(c, dict) for c in seen.cited)
        assert seen.retrieved and all(isinstance(c, dict) for c in seen.retrieved)
        assert seen.latency_ms > 0
        if seen.cited:
            assert seen.first_text_ms is not None and seen.first_text_ms <= seen.latency_ms


class _Failing:
    """An asker whose second question raises (a service that went away)."""

    def __init__(self) -> None:
        self.closed = 0
        self.asked = 0

    async def warm_up(self) -> None:
        return None

    async def ask(self, question: Any) -> Observation:
        self.asked += 1
        if self.asked == 2:
            raise RuntimeError("gone")
        return Observation("根据现有资料无法确定")

    async def aclose(self) -> None:
        self.closed += 1


def test_run_questions_closes_the_asker_when_asking_raises() -> None:
    questions = parse_lines([json.dumps(r, ensure_ascii=False) for r in ROWS])
    failing = _Failing()
    seen: list[str] = []
    with pytest.raises(RuntimeError, match="gone"):
        asyncio.run(run_questions(questions, failing, on_verdict=lambda i, v: seen.append(v.id)))
    assert failing.closed == 1 and seen == ["one"]
