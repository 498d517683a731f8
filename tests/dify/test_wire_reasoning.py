"""Reasoning and broken Unicode on Dify's wire (gcite.dify.wire, pure, no HTTP).

Reasoning travels as Dify's ``reasoning_format: tagged`` sends it: ``<think>\\n…\\n</think>``
at the start of the answer text, in ``message`` or ``text_chunk`` events; the frame
encoder never raises on lone surrogates.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from gcite.chatflow.events import (
    AnswerDelta,
    NodeFinished,
    NodeStarted,
    ReasoningDelta,
    RunEnded,
    RunFailed,
    RunSummary,
    UsageReport,
)
from gcite.dify.wire import DifyStream, Envelope, blocking_body, data_frame, tagged_answer
from gcite.stream.sse import DifyStreamConsumer

USAGE = UsageReport(12, 3, False, 1.0, 0.5, 0.5)
CHUNK = {"id": "1", "source_type": "rag", "document_title": "规程", "content": "内容"}


def summary(answer: str = "答[C:1]", reasoning: str = "") -> RunSummary:
    return RunSummary(
        "succeeded", answer, ["1"], [], [CHUNK], "openai:m", USAGE, 1.0, 4, 1000.0,
        reasoning=reasoning,
    )  # fmt: skip


def env(stream_event: str = "message") -> Envelope:
    return Envelope("t", "m", "c", 999, "w", stream_event, user="u", inputs={})


def llm_events(*deltas: Any, end: Any = None) -> list[Any]:
    return [
        NodeStarted("llm", {"query": "q"}, 1002),
        *deltas,
        NodeFinished("llm", "succeeded", {}, {"text": ""}, None, 1.0, 1003, USAGE),
        end if end is not None else RunEnded(summary()),
    ]


def wire(events: list[Any], stream_event: str = "message") -> list[dict[str, Any]]:
    stream = DifyStream(env(stream_event))
    out: list[dict[str, Any]] = []
    for event in events:
        out += stream.objects(event)
    return out


def text_of(objects: list[dict[str, Any]]) -> str:
    return "".join(
        o["answer"] if o["event"] == "message" else o["data"]["text"]
        for o in objects
        if o["event"] in ("message", "text_chunk")
    )


def test_reasoning_is_tagged_at_the_start_and_the_client_keeps_it_apart() -> None:
    objects = wire(
        llm_events(
            AnswerDelta("\n"),  # leading white space may precede the block
            ReasoningDelta("想[C:9]"),
            ReasoningDelta("一想"),
            AnswerDelta("答[C:1]"),
            ReasoningDelta("晚到的想法"),  # after answer text: off the wire
            AnswerDelta("。"),
        )
    )
    assert text_of(objects) == "\n<think>\n想[C:9]一想\n</think>答[C:1]。"
    consumer = DifyStreamConsumer()
    for o in objects:
        consumer.feed(data_frame(o))
    consumer.close()
    result = consumer.result
    assert result.reasoning == "\n想[C:9]一想\n" and result.answer == "答。"
    assert result.citations == [("1", 1)] and result.invalid == []


def test_a_model_that_only_reasoned_gets_its_block_closed_before_the_llm_node_ends() -> None:
    for stream_event in ("message", "text_chunk"):
        objects = wire(llm_events(ReasoningDelta("想")), stream_event)
        names = [o["event"] for o in objects]
        assert names == ["node_started", stream_event, stream_event, "node_finished",
                         "workflow_finished", "message_end"]  # fmt: skip
        assert text_of(objects) == "<think>\n想\n</think>"


def test_a_failed_run_closes_an_open_block_too() -> None:
    failed = RunFailed("模型服务连接中断", "llm", summary(answer=""))
    stream = DifyStream(env())
    objects = stream.objects(ReasoningDelta("想")) + stream.objects(failed)
    assert [o["event"] for o in objects] == ["message", "message", "workflow_finished", "error"]
    assert text_of(objects) == "<think>\n想\n</think>"


def test_without_reasoning_nothing_changes() -> None:
    objects = wire(llm_events(AnswerDelta("答[C:1]")))
    assert text_of(objects) == "答[C:1]"
    assert tagged_answer(summary()) == "答[C:1]"


def test_blocking_answer_carries_the_reasoning_tagged_and_metadata_from_the_answer() -> None:
    body = blocking_body(env(), summary(reasoning="想[C:2]"))
    assert body["answer"] == "<think>\n想[C:2]\n</think>答[C:1]"
    assert body["metadata"]["gcite"]["cited_ids"] == ["1"]
    assert [r["doc_metadata"]["chunk_id"] for r in body["metadata"]["retriever_resources"]] == ["1"]


def test_data_frame_never_raises_on_lone_surrogates() -> None:
    frame = data_frame({"answer": "门\ud83d\udeaa开孤\udc00", "nested": ["\ud800"]})
    assert frame.startswith(b"data: ") and frame.endswith(b"\n\n")
    payload = json.loads(frame[6:].decode("utf-8"))  # valid UTF-8, valid JSON
    assert payload == {"answer": "门🚪开孤\ufffd", "nested": ["\ufffd"]}
    plain = {"answer": "答[C:1]"}
    assert data_frame(plain) == b'data: {"answer":"\xe7\xad\x94[C:1]"}\n\n'
    done = wire([AnswerDelta("孤\udc00"), RunEnded(dataclasses.replace(summary(), answer="x"))])
    assert all(data_frame(o) for o in done)


def test_frames_from_the_run_template_are_the_bytes_of_the_objects() -> None:
    """The delta fast path of ``frames`` writes exactly ``data_frame`` of ``objects``,
    for both wire events, with reasoning, quotes, control characters and a lone surrogate."""
    for stream_event in ("message", "text_chunk"):
        events = llm_events(
            ReasoningDelta('想"一"下\n'),
            AnswerDelta(" "),
            AnswerDelta("答案\\\x01\ud83d"),
            ReasoningDelta("off the wire"),
            AnswerDelta("[C:1]。"),
        )
        fast, slow = DifyStream(env(stream_event)), DifyStream(env(stream_event))
        deltas = 0
        for event in events:
            got = fast.frames(event)
            expected = b"".join(data_frame(o) for o in slow.objects(event))
            if isinstance(event, AnswerDelta | ReasoningDelta):  # node ids are random
                assert got == expected
                assert b"gcite-text" not in got
                deltas += bool(got)
        assert deltas == 4
