"""gcite.dify.wire: chatflow events -> Dify's JSON objects and SSE frames (pure, no HTTP).

The service-level tests check the bytes a real client receives; these pin the mapping
itself: ids, indexes, predecessors, node names, usage, the failure codes.
"""

from __future__ import annotations

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
from gcite.dify.wire import DifyStream, Envelope, blocking_body, data_frame

USAGE = UsageReport(12, 3, False, 1.23456, 0.5, 0.73456)
CHUNK = {"id": "1", "source_type": "rag", "document_title": "规程", "content": "内容", "score": 0.9}


def summary(status: Any = "succeeded", answer: str = "答[C:1]") -> RunSummary:
    return RunSummary(status, answer, ["1"], [], [CHUNK], "extractive", USAGE, 2.0, 4, 1000.0)


def env(stream_event: str = "message") -> Envelope:
    return Envelope("t", "m", "c", 999, "w", stream_event, user="u", inputs={"x": 1})


def run_events(web: bool = True) -> list[Any]:
    events: list[Any] = [NodeStarted("knowledge_retrieval", {"query": "q"}, 1000.2)]
    if web:
        events.append(NodeStarted("web_search", {"query": "q", "count": 3}, 1000.3))
    events.append(
        NodeFinished("knowledge_retrieval", "succeeded", {}, {"result": []}, None, 0.1, 1001)
    )
    if web:
        events.append(NodeFinished("web_search", "failed", {}, None, "timeout after 1s", 1.0, 1001))
    events += [
        NodeStarted("merge", {"rag_chunk_count": 0}, 1001.5),
        NodeFinished("merge", "succeeded", {}, {"chunk_metadata": [CHUNK]}, None, 0.001, 1001.6),
        NodeStarted("llm", {"query": "q"}, 1002),
        ReasoningDelta("想一想"),
        AnswerDelta("答[C:1]"),
        NodeFinished(
            "llm", "succeeded", {"query": "q"}, {"text": "答[C:1]"}, None, 1.0, 1003, USAGE
        ),
        RunEnded(summary()),
    ]
    return events


def wire(events: list[Any], envelope: Envelope | None = None) -> list[dict[str, Any]]:
    stream = DifyStream(envelope or env())
    out = [stream.start("q")]
    for event in events:
        out += stream.objects(event)
    return out


def test_nodes_get_indexes_predecessors_and_one_execution_id() -> None:
    objects = wire(run_events())
    assert [o["event"] for o in objects] == [
        "workflow_started",
        *["node_started"] * 2,
        *["node_finished"] * 2,
        "node_started",
        "node_finished",
        "node_started",
        *["message"] * 2,  # the reasoning, tagged as Dify does, then the answer
        "node_finished",
        "workflow_finished",  # Dify's advanced-chat order: message_end ends the stream
        "message_end",
    ]
    answer = "".join(o["answer"] for o in objects if o["event"] == "message")
    assert answer == "<think>\n想一想\n</think>答[C:1]"
    started = {o["data"]["node_id"]: o["data"] for o in objects if o["event"] == "node_started"}
    assert {
        k: (v["index"], v["predecessor_node_id"], v["node_type"]) for k, v in started.items()
    } == {
        "knowledge_retrieval": (1, "start", "knowledge-retrieval"),
        "web_search": (2, "start", "tool"),
        "chunk_numbering": (3, "web_search", "code"),
        "llm": (4, "chunk_numbering", "llm"),
    }
    for o in objects:
        if o["event"] == "node_finished":
            assert o["data"]["id"] == started[o["data"]["node_id"]]["id"]
            assert o["data"]["created_at"] == started[o["data"]["node_id"]]["created_at"]
    web = next(o["data"] for o in objects if o["event"] == "node_finished")
    assert web["node_id"] == "knowledge_retrieval"
    failed = [o["data"] for o in objects if o.get("data", {}).get("status") == "failed"]
    assert failed[0]["error"] == "timeout after 1s" and failed[0]["outputs"] is None
    llm = [o["data"] for o in objects if o["event"] == "node_finished"][-1]
    assert llm["process_data"]["usage"]["latency"] == 1.235
    assert llm["execution_metadata"]["total_tokens"] == 15
    assert all(o.get("task_id") == "t" and o["created_at"] == 999 for o in objects)
    assert objects[0]["data"]["inputs"] == {
        "x": 1,
        "sys.query": "q",
        "sys.user_id": "u",
        "sys.conversation_id": "c",
    }
    end = objects[-1]
    resource = end["metadata"]["retriever_resources"][0]
    assert resource["doc_metadata"]["chunk_id"] == "1"
    assert (resource["message_id"], resource["created_at"]) == ("m", 999)  # spec-typed items
    assert end["metadata"]["gcite"] == {
        "backend": "extractive",
        "cited_ids": ["1"],
        "invalid_ids": [],
    }
    assert objects[-2]["data"]["total_steps"] == 4 and objects[-2]["data"]["outputs"] == {
        "answer": "答[C:1]"
    }


# api/core/app/entities/task_entities.py, NodeStartStreamResponse.Data (Dify 1.12), which the
# Service API dumps in full (model_dump: defaults and nulls included).
DIFY_NODE_STARTED_DATA = {
    "id", "node_id", "node_type", "title", "index", "predecessor_node_id", "inputs",
    "inputs_truncated", "created_at", "extras", "iteration_id", "loop_id", "agent_strategy",
}  # fmt: skip


def test_node_started_has_every_field_of_dify_including_agent_strategy() -> None:
    started = [o["data"] for o in wire(run_events()) if o["event"] == "node_started"]
    assert len(started) == 4
    for data in started:
        assert set(data) == DIFY_NODE_STARTED_DATA
        assert data["agent_strategy"] is None  # no node of the chatflow is an Agent node
        assert data["extras"] == {} and data["inputs_truncated"] is False


def test_without_web_the_merge_node_follows_knowledge_retrieval() -> None:
    objects = wire(run_events(web=False))
    merge = next(
        o["data"] for o in objects if o.get("data", {}).get("node_id") == "chunk_numbering"
    )
    assert merge["predecessor_node_id"] == "knowledge_retrieval"


def test_text_chunk_mode_and_failures() -> None:
    stream = DifyStream(env("text_chunk"))
    (delta,) = stream.objects(AnswerDelta("半"))
    assert delta["event"] == "text_chunk" and delta["data"]["text"] == "半"
    failed = RunFailed("Run failed: 断了", "llm", summary("failed", "半"))
    finished, error = stream.objects(failed)
    assert finished["data"]["status"] == "failed" and finished["data"]["outputs"] is None
    assert error == {
        "event": "error",
        "message_id": "m",
        "conversation_id": "c",
        "created_at": 999,
        "code": "completion_request_error",
        "status": 400,
        "message": "Run failed: 断了",
    }
    internal = stream.objects(RunFailed("Run failed: bug", "internal", summary("failed")))
    assert (internal[1]["code"], internal[1]["status"]) == ("internal_server_error", 500)


def test_frames_and_blocking_body() -> None:
    frame = data_frame({"answer": "引用"})
    assert frame == b'data: {"answer":"\xe5\xbc\x95\xe7\x94\xa8"}\n\n'
    assert json.loads(frame[6:]) == {"answer": "引用"}
    body = blocking_body(env(), summary())
    assert (body["event"], body["mode"], body["answer"]) == ("message", "advanced-chat", "答[C:1]")
    assert body["metadata"]["usage"]["total_tokens"] == 15


# --------------------------------------------------------------------------- citation styles

CHUNKS = [
    {"id": str(n), "source_type": "rag", "document_title": f"文档{n}", "content": f"内容{n}"}
    | {"score": 0.9}
    for n in (1, 2, 3)
]
RAW = "共 24 个点位[C:2]。巡检[C:3][C:2]，另见[C:7]。末尾[C:"


def styled_events(deltas: list[str], end: Any) -> list[Any]:
    """A run whose model streams ``deltas``, ended by ``end`` (a summary -> terminal event)."""
    answer = "".join(deltas)
    ended = RunSummary(
        "succeeded", answer, ["2", "3"], ["7"], CHUNKS, "extractive", USAGE, 2.0, 4, 1000.0
    )
    return [
        NodeStarted("knowledge_retrieval", {"query": "q"}, 1000.2),
        NodeFinished("knowledge_retrieval", "succeeded", {}, {"result": []}, None, 0.1, 1001),
        NodeStarted("merge", {}, 1001.5),
        NodeFinished("merge", "succeeded", {}, {"chunk_metadata": CHUNKS}, None, 0.001, 1001.6),
        NodeStarted("llm", {"query": "q"}, 1002),
        *[AnswerDelta(d) for d in deltas],
        NodeFinished("llm", "succeeded", {}, {"text": answer}, None, 1.0, 1003, USAGE),
        end(ended),
    ]


def numbers_env(stream_event: str = "message") -> Envelope:
    return Envelope("t", "m", "c", 999, "w", stream_event, citation_style="numbers")


def answer_deltas(objects: list[dict[str, Any]]) -> list[str]:
    return [
        o["answer"] if o["event"] == "message" else o["data"]["text"]
        for o in objects
        if o["event"] in ("message", "text_chunk")
    ]


def test_numbers_style_renders_every_answer_text_and_numbers_as_the_resources() -> None:
    objects = wire(styled_events(list(RAW), RunEnded), numbers_env())
    deltas = answer_deltas(objects)
    shown = "共 24 个点位¹。巡检²˒¹，另见。末尾"
    assert "".join(deltas) == shown  # the answer's unfinished marker is left out
    assert all(deltas)  # held characters send no empty frame
    assert not any("[" in d for d in deltas)
    events = [o["event"] for o in objects]
    last_text = max(i for i, e in enumerate(events) if e == "message")
    assert events[last_text + 1] == "node_finished"  # the held rest goes before the LLM ends
    tail = wire(styled_events(["答[C:1", "]又[C:"], RunEnded), numbers_env())
    assert answer_deltas(tail) == ["答", "¹又"]
    llm = next(o["data"] for o in objects[last_text:] if o["event"] == "node_finished")
    assert llm["outputs"]["text"] == shown
    finished, end = objects[-2], objects[-1]
    assert finished["data"]["outputs"] == {"answer": shown}
    resources = end["metadata"]["retriever_resources"]
    assert [(r["position"], r["doc_metadata"]["chunk_id"]) for r in resources] == [
        (1, "2"),
        (2, "3"),
    ]
    assert end["metadata"]["gcite"]["cited_ids"] == ["2", "3"]  # raw ids kept for G-Cite


def test_numbers_style_is_the_same_for_every_split_and_both_delta_events() -> None:
    whole = answer_deltas(wire(styled_events([RAW], RunEnded), numbers_env()))
    for cut in range(len(RAW) + 1):
        parts = [RAW[:cut], RAW[cut:]]
        objects = wire(styled_events(parts, RunEnded), numbers_env("text_chunk"))
        assert "".join(answer_deltas(objects)) == "".join(whole)


def test_numbers_style_blocking_body_and_failures() -> None:
    summary_ = RunSummary(
        "succeeded", RAW, ["2", "3"], ["7"], CHUNKS, "extractive", USAGE, 2.0, 4, 1000.0
    )
    body = blocking_body(numbers_env(), summary_)
    assert body["answer"] == "共 24 个点位¹。巡检²˒¹，另见。末尾"
    assert [r["position"] for r in body["metadata"]["retriever_resources"]] == [1, 2]
    failed = wire(styled_events(["半句[C:3", "]又"], lambda s: RunFailed("断了", "llm", s)),
                  numbers_env())  # fmt: skip
    assert "".join(answer_deltas(failed)) == "半句¹又"


def test_markers_style_sends_the_answer_as_written() -> None:
    objects = wire(styled_events(list(RAW), RunEnded))
    assert answer_deltas(objects) == list(RAW)
    assert objects[-2]["data"]["outputs"] == {"answer": RAW}
    assert blocking_body(env(), summary())["answer"] == "答[C:1]"


def test_numbers_style_keeps_dify_tagged_reasoning_in_front() -> None:
    events = styled_events(["答[C:", "3]。"], RunEnded)
    at = next(i for i, e in enumerate(events) if isinstance(e, AnswerDelta))
    events[at:at] = [ReasoningDelta("想[C:1]")]  # reasoning is never rendered
    deltas = answer_deltas(wire(events, numbers_env()))
    assert "".join(deltas) == "<think>\n想[C:1]\n</think>答¹。"
    only_reasoning = styled_events([], RunEnded)
    at = next(
        i for i, e in enumerate(only_reasoning) if isinstance(e, NodeStarted) and e.node == "llm"
    )
    only_reasoning.insert(at + 1, ReasoningDelta("想"))
    assert "".join(answer_deltas(wire(only_reasoning, numbers_env()))) == "<think>\n想\n</think>"
