"""The optional model judge against the OpenAI stand-in on loopback (a real HTTP server)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gcite.config import Settings
from gcite.verify import SupportModel, make_verifier, verify_answer
from gcite.verify.judge import Judge, apply_judge
from support.openai_standin import OpenAIStandin, Script

FAULTS = (
    "一级（紧急）：电梯困人。物业须在 5 分钟内到场。\n"
    "二级（重要）：空调不制冷。物业须在 30 分钟内到场。"
)
CHUNKS = [{"id": "1", "content": FAULTS}, {"id": "2", "content": "会议室可提前 14 天预订。"}]
ANSWER = "空调不制冷时物业须在 30 分钟内到场[C:1]。会议室可以提前预订[C:2]。"


@pytest.fixture(scope="module")
def standin() -> Iterator[OpenAIStandin]:
    server = OpenAIStandin().start()
    try:
        yield server
    finally:
        server.stop()


def _verdicts(standin: OpenAIStandin, *answers: str) -> None:
    standin.reset()
    standin.push(*[Script.text(a) for a in answers])


def test_the_judge_decides_supported_and_keeps_the_offline_span(standin: OpenAIStandin) -> None:
    _verdicts(standin, "否", "是")
    offline = verify_answer(ANSWER, CHUNKS, SupportModel())
    assert [c["supported"] for s in offline["sentences"] for c in s["citations"]] == [True, True]
    judged = apply_judge(
        offline, {c["id"]: c["content"] for c in CHUNKS}, Judge(standin.base_url, "judge-m")
    )
    cites = [c for s in judged["sentences"] for c in s["citations"]]
    assert [(c["judge"], c["supported"]) for c in cites] == [("no", False), ("yes", True)]
    assert "30 分钟" in cites[0]["support"]["text"]  # the offline span stays
    assert judged["judge"] == "judge-m" and judged["judge_errors"] == 0
    assert judged["weak"] == [{"sentence": 0, "id": "1"}] and judged["supported"] == 1
    sent: list[dict[str, Any]] = standin.requests
    assert [r["model"] for r in sent] == ["judge-m", "judge-m"]
    assert all(r["stream"] is False and r["temperature"] == 0 for r in sent)
    assert (
        "空调不制冷" in sent[0]["messages"][0]["content"]
        and FAULTS in sent[0]["messages"][0]["content"]
    )


def test_a_failing_judge_leaves_the_offline_verdict(standin: OpenAIStandin) -> None:
    standin.reset()
    standin.push(Script(status=503), Script(status=503))
    verify = make_verifier(
        Settings.from_keys(
            embed_backend="openai",  # lexical only: no model to load here
            verify_judge_base_url=standin.base_url,
            verify_judge_model="judge-m",
        )
    )
    report = verify(ANSWER, CHUNKS)
    cites = [c for s in report["sentences"] for c in s["citations"]]
    assert [c["judge"] for c in cites] == ["error", "error"]
    assert report["judge_errors"] == 2 and report["supported"] == 2 and report["weak"] == []


def test_without_a_judge_no_call_is_made(standin: OpenAIStandin) -> None:
    standin.reset()
    report = make_verifier(Settings.from_keys(embed_backend="openai"))(ANSWER, CHUNKS)
    assert report["judge"] is None and standin.requests == []


def test_a_slow_judge_stops_at_its_budget_and_the_rest_keeps_the_offline_verdict(
    standin: OpenAIStandin, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gcite.verify.verifier as verifier

    monkeypatch.setattr(verifier, "JUDGE_BUDGET_S", 0.3)
    standin.reset()
    standin.push(Script.text("否", first_token_delay_s=0.6), Script.text("否"))
    verify = make_verifier(
        Settings.from_keys(
            embed_backend="openai",
            verify_judge_base_url=standin.base_url,
            verify_judge_model="judge-m",
        )
    )
    report = verify(ANSWER, CHUNKS)
    cites = [c for s in report["sentences"] for c in s["citations"]]
    # the first call ended past the budget: the second citation was never put to the judge
    assert len(standin.requests) == 1
    assert [c["judge"] for c in cites] == ["no", "error"]
    assert cites[1]["supported"] is True  # the offline verdict stays
    assert report["judge_errors"] == 1
