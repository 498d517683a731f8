"""``gcite eval --url`` against a scripted Dify deployment (a real loopback HTTP server):
the request bodies, earlier turns in one conversation, a stream that breaks off."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

from cli.dify_standin import Reply, dify_answer, dify_standin
from eval.conftest import run_gcite
from gcite.eval import parse_lines
from gcite.eval.runner import RemoteAsker, run_questions

CHUNKS = [
    {
        "id": "1",
        "source_type": "rag",
        "content": "夜间巡更必须走完 A、B、C 三条线路的全部 24 个点位；",
        "document_title": "巡更路线与打卡规范",
        "document_name": "01-patrol.md",
        "score": 0.91,
    },
    {
        "id": "2",
        "source_type": "rag",
        "content": "物业须在 30 分钟内到场。",
        "document_name": "02-faults.md",
        "score": 0.62,
    },
]
QUESTIONS = [
    {
        "id": "f",
        "question": "白天呢",
        "turns": [{"query": "夜间巡更多久一次", "answer": "（文件中的回答不会发送）"}, "再问一句"],
        "gold_docs": ["01-patrol.md"],
        "answer_keywords": ["24"],
    },
    {"id": "b", "question": "断掉的流", "gold_docs": ["01-patrol.md"]},
]


def test_turns_share_one_conversation_and_a_broken_stream_is_an_error() -> None:
    questions = parse_lines([json.dumps(q, ensure_ascii=False) for q in QUESTIONS])
    ticks = itertools.count()
    with dify_standin() as server:
        for _ in range(2):  # the two earlier turns
            server.replies.append(Reply(body=dify_answer(["先前的回答"], CHUNKS)))
        server.replies.append(
            Reply(body=dify_answer(["全部 24 个点位[C:1]，", "另见[C:2]。"], CHUNKS), piece=3)
        )
        broken = dify_answer(["只说了一半"], CHUNKS, end=False)
        server.replies.append(Reply(body=broken, piece=5, break_after=True))
        asker = RemoteAsker(
            server.url + "/v1/chat-messages", "app-secret", clock=lambda: next(ticks) / 1000
        )
        follow, cut = asyncio.run(run_questions(questions, asker))
        requests = server.requests
    assert [r["json"]["query"] for r in requests] == [
        "夜间巡更多久一次",
        "再问一句",
        "白天呢",
        "断掉的流",
    ]
    assert "conversation_id" not in requests[0]["json"]
    assert [r["json"].get("conversation_id") for r in requests[1:3]] == ["conv-1", "conv-1"]
    assert "conversation_id" not in requests[3]["json"]  # every question its own conversation
    for request in requests:
        assert request["path"] == "/v1/chat-messages"
        assert request["headers"]["Authorization"] == "Bearer app-secret"
        assert request["json"]["response_mode"] == "streaming"
        assert request["json"]["user"] == "gcite-eval"
    assert follow.outcome == "right" and follow.answer == "全部 24 个点位，另见。"
    assert follow.cited == 2 and follow.cited_gold == 1 and follow.precision == 0.5
    assert follow.gold_rank == 1 and follow.gold_score == 0.91
    assert not follow.verifier_checked  # this deployment sends no gcite_verification
    assert follow.latency_ms > 0  # the injected clock ticked
    assert cut.outcome == "error" and "stream_interrupted" in (cut.error or "")
    assert cut.answer == "只说了一半"


def test_cli_against_a_dify_deployment(tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    row = {"id": "x", "question": "夜里巡逻刷几个点", "answer_keywords": ["24"]}
    questions.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    with dify_standin() as server:
        server.replies.append(Reply(body=dify_answer(["24 个[C:1]"], CHUNKS)))
        proc = run_gcite(
            "eval", str(questions), "--url", server.url, "--html", str(tmp_path / "r.html")
        )
    assert proc.returncode == 0, proc.stderr
    assert "[1/1] x 答对" in proc.stderr and "可答问题答对：1/1（100%）" in proc.stdout
    assert "24 个" in (tmp_path / "r.html").read_text("utf-8")
