"""``gcite eval --url`` against a service that misbehaves mid-run (a real loopback HTTP
server): every failure is that question's error verdict, the run finishes and its report
is written; only a service unusable from the first question stops the run."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from cli.dify_standin import Reply, dify_answer, dify_standin
from eval.conftest import run_gcite
from gcite.errors import StreamError
from gcite.eval import parse_lines
from gcite.eval.runner import RemoteAsker, run_questions

CHUNKS = [
    {
        "id": "1",
        "source_type": "rag",
        "content": "夜间巡更必须走完全部 24 个点位。",
        "document_name": "01-patrol.md",
        "score": 0.9,
    }
]


def _questions(n: int) -> list[str]:
    return [
        json.dumps({"id": f"q{i}", "question": "夜里巡逻刷几个点", "answer_keywords": ["24"]})
        for i in range(n)
    ]


def _answer() -> Reply:
    return Reply(body=dify_answer(["全部 24 个[C:1]"], CHUNKS))


def _error(status: int) -> Reply:
    body = json.dumps({"code": "internal_server_error", "message": "崩了", "status": status})
    return Reply(status=status, body=body.encode(), content_type="application/json")


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (_error(500), "HTTP 500"),
        (Reply(body=b"<html>oops</html>", content_type="text/html"), "没有返回事件流"),
        (Reply(body=b"hello, not an event stream\n\n"), "message_end"),
        (Reply(body=dify_answer(["只说了"], CHUNKS, end=False)), "message_end"),
    ],
)
def test_a_failure_mid_run_is_that_questions_error(reply: Reply, error: str) -> None:
    with dify_standin() as server:
        server.replies += [_answer(), reply, _answer()]
        asker = RemoteAsker(server.url + "/v1/chat-messages", "app-k")
        verdicts = asyncio.run(run_questions(parse_lines(_questions(3)), asker))
    assert [v.outcome for v in verdicts] == ["right", "error", "right"]
    assert error in (verdicts[1].error or "")


def test_a_service_unusable_from_the_first_question_stops_the_run() -> None:
    with dify_standin() as server:
        server.replies += [_error(401), _answer()]
        asker = RemoteAsker(server.url + "/v1/chat-messages", "app-wrong")
        with pytest.raises(StreamError, match="HTTP 401"):
            asyncio.run(run_questions(parse_lines(_questions(2)), asker))
        assert len(server.requests) == 1


def test_a_stream_that_hangs_is_cut_at_the_deadline() -> None:
    """The hung stream is asked alone (the deadline is wall-clock time: answers that
    must finish within it would make the test depend on the machine's speed); it pings
    until the test ends, so it is cut however long the deadline takes to pass. That the
    run goes on after an error verdict is the HTTP 500 test's."""

    async def ask_alone(asker: RemoteAsker) -> Any:
        try:
            return await asker.ask(parse_lines(_questions(1))[0])
        finally:
            await asker.aclose()

    release = threading.Event()
    try:
        with dify_standin() as server:
            hung = dify_answer(["先说一半"], CHUNKS, end=False)
            server.replies += [Reply(body=hung, hang_until=release)]
            asker = RemoteAsker(server.url + "/v1/chat-messages", "app-k", deadline_s=0.5)
            seen = asyncio.run(ask_alone(asker))
    finally:
        release.set()
    assert "0 秒内没有答完" in (seen.error or "") and "timeout" in (seen.error or "")
    assert seen.answer == "先说一半"  # the text so far is kept


def test_cli_writes_its_report_when_the_service_fails_mid_run(tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text("\n".join(_questions(3)) + "\n", encoding="utf-8")
    out_json, out_html = tmp_path / "out.json", tmp_path / "r.html"
    with dify_standin() as server:
        server.replies += [_answer(), _error(500), _answer()]
        proc = run_gcite(
            "eval", str(questions), "--url", server.url,
            "--json", str(out_json), "--html", str(out_html),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "[2/3] q1 出错" in proc.stderr and "出错 1 题" in proc.stdout
    document = json.loads(out_json.read_text("utf-8"))
    assert [v["outcome"] for v in document["verdicts"]] == ["right", "error", "right"]
    assert "HTTP 500" in out_html.read_text("utf-8")


def test_scores_that_are_no_numbers_are_left_out_of_the_report() -> None:
    # Python's json reads NaN and integers too large for a float; neither is a score
    chunks = [
        {**CHUNKS[0], "id": "1", "score": float("nan")},
        {**CHUNKS[0], "id": "2", "score": 10**400},
        {**CHUNKS[0], "id": "3", "score": True},
    ]
    with dify_standin() as server:
        server.replies.append(Reply(body=dify_answer(["24 个[C:1][C:2][C:3]"], chunks)))
        asker = RemoteAsker(server.url + "/v1/chat-messages", "app-k")
        row = {"question": "夜里巡逻刷几个点", "gold_docs": ["01-patrol.md"]}
        (verdict,) = asyncio.run(run_questions(parse_lines([json.dumps(row)]), asker))
    assert verdict.outcome == "right" and verdict.gold_rank == 1 and verdict.gold_score is None
    assert [s["score"] for s in verdict.sources] == [None, None, None]
    json.dumps(verdict.as_dict(), allow_nan=False)  # the report is strict JSON


def test_an_answer_that_never_ends_is_cut_at_its_cap() -> None:
    import httpx

    from gcite.eval.runner import read_stream
    from gcite.stream.sse import consume_chat_stream

    release = threading.Event()

    async def read(url: str) -> tuple[str, str]:
        async with httpx.AsyncClient() as client:
            body = {"query": "q", "response_mode": "streaming", "user": "u", "inputs": {}}
            updates = consume_chat_stream(client, url, body, {})
            result, _ = await read_stream(updates, lambda: 0.0, 0.0, max_answer=100)
        assert result.error is not None
        return result.answer, f"{result.error.message}（{result.error.code}）"

    try:
        with dify_standin() as server:
            endless = dify_answer(["巡更" * 10] * 50, CHUNKS, end=False)
            server.replies.append(Reply(body=endless, hang_until=release))
            answer, error = asyncio.run(read(server.url + "/v1/chat-messages"))
    finally:
        release.set()
    assert answer == ("巡更" * 50)[:100] and error == "回答超过 100 个字符（answer_too_long）"
