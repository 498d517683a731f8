"""Reasoning of earlier answers never reaches a prompt: not the answer's, not the
follow-up rewrite's (stored answers keep their <think> block for display)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from gcite.chatflow.followup import condense_question
from gcite.chatflow.history import PastTurn, earlier_turns
from gcite.generate.prompt import build_messages, strip_reasoning

STORED = "<think>用户问巡更[C:3]，资料说 24 个点位。</think>\n\n共 24 个巡更点位[C:3]。"


def test_strip_reasoning_keeps_the_answer_and_its_markers() -> None:
    assert strip_reasoning(STORED) == "共 24 个巡更点位[C:3]。"
    assert strip_reasoning("没有思考过程[C:1]。") == "没有思考过程[C:1]。"
    assert strip_reasoning("<thinking>x</thinking>答") == "答"


def test_history_turns_have_no_reasoning() -> None:
    history = earlier_turns([PastTurn(query="巡更有多少点位？", answer=STORED)])
    assert history.turns[0]["answer"] == "共 24 个巡更点位[C:3]。"


def test_the_answer_prompt_has_no_reasoning_of_earlier_answers() -> None:
    messages = build_messages(
        "那白天呢？",
        "",
        history=[{"query": "巡更有多少点位？", "answer": STORED}],
    )
    text = "\n".join(m["content"] for m in messages)
    assert "用户问巡更" not in text and "<think>" not in text
    assert {"role": "assistant", "content": "共 24 个巡更点位。"} in messages


class _Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def warm_up(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def stream(
        self, messages: Sequence[dict[str, str]], *, chunks: Any, query: str, usage: Any = None
    ) -> AsyncIterator[str]:
        self.prompts.append(messages[-1]["content"])

        async def gen() -> AsyncIterator[str]:
            yield "白天巡更多久一次？"

        return gen()


def test_the_follow_up_rewrite_prompt_has_no_reasoning() -> None:
    history = earlier_turns([PastTurn(query="夜间巡更多久一次？", answer=STORED)])
    backend = _Recorder()
    asyncio.run(
        condense_question(
            backend, "那白天呢？", history.turns, ["夜间巡更多久一次？"], timeout_s=120
        )
    )
    assert backend.prompts, "the rewrite was not asked"
    assert "用户问巡更" not in backend.prompts[0] and "<think>" not in backend.prompts[0]
    assert "共 24 个巡更点位" in backend.prompts[0]
