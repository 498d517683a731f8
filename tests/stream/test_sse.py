"""Dify SSE consumer: decoders under every split, event semantics (issue 3 item 2), and
the httpx edge against a real HTTP server on 127.0.0.1 speaking Dify's wire format."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import httpx
import pytest

from gcite.errors import StreamError
from gcite.stream.sse import (
    AnswerFinished,
    AnswerResult,
    DifyStreamConsumer,
    LineDecoder,
    MetadataReceived,
    SegmentsReceived,
    SSEDecoder,
    StreamFailed,
    StreamUpdate,
    Utf8Decoder,
    consume_chat_stream,
)
from gcite.testing import free_port

# -- Dify frames (dify-protocol.md §1.2-§1.8; mobile design document §2, §3.2) ----------------

ENVELOPE = {"conversation_id": "conv-1", "message_id": "msg-1", "created_at": 1705407629}
CHUNKS: list[dict[str, Any]] = [
    {"id": "1", "source_type": "rag", "document_title": "巡更操作指南 v2.1",
     "display_subtitle": "测试知识库20260610", "score": 0.73},
    {"id": "2", "source_type": "rag", "document_title": "物业管理制度 · 异常上报处理",
     "display_subtitle": "测试知识库20260610", "score": 0.68},
    {"id": "6", "source_type": "web", "document_title": "物业巡检分类 - 百度百科",
     "display_subtitle": "百度百科 · 2025-09-01", "url": "https://baike.baidu.com/x"},
    {"id": "7", "source_type": "web", "document_title": "物业巡检流程标准 - 知乎",
     "display_subtitle": "知乎 · 2025-08-12", "url": "https://www.zhihu.com/q/1"},
]  # fmt: skip
SEED_DELTAS = [
    "巡更人员", "需要先在终端登录", "[C:7]。", "登录后系统会根据预设路线", "生成待检点[C:2]。",
    "巡检时如发现异常，", "可在终端直接上报[C:6]。", "上报后系统会自动通知物业，",
    "这是SOP规定的紧急响应流程[C:2]。",
]  # fmt: skip
SEED_TEXT = "".join(SEED_DELTAS)
SEED_ANSWER = SEED_TEXT.replace("[C:7]", "").replace("[C:2]", "").replace("[C:6]", "")


def frame(event: str, *, ascii: bool = False, task: bool = True, **fields: Any) -> bytes:
    payload = {"event": event, **ENVELOPE, **({"task_id": "task-1"} if task else {}), **fields}
    return b"data: " + json.dumps(payload, ensure_ascii=ascii).encode() + b"\n\n"


PING = b"event: ping\n\n"


def workflow_started() -> bytes:
    return frame("workflow_started", workflow_run_id="run-1", data={"id": "run-1"})


def node_finished(node_type: str, outputs: Any) -> bytes:
    data = {"id": "exec", "node_id": node_type, "node_type": node_type, "title": node_type,
            "outputs": outputs, "status": "succeeded", "error": None}  # fmt: skip
    return frame("node_finished", workflow_run_id="run-1", data=data)


def code_node(chunks: Any = CHUNKS) -> bytes:
    return node_finished("code", {"formatted_chunks": "...", "chunk_count": 4,
                                  "chunk_metadata": chunks})  # fmt: skip


def message(answer: Any, **kw: Any) -> bytes:
    return frame("message", id="msg-1", answer=answer, from_variable_selector=None, **kw)


def text_chunk(text: str) -> bytes:
    return frame("text_chunk", workflow_run_id="run-1", data={"text": text})


RESOURCES = [
    {"position": 1, "dataset_id": "ds", "dataset_name": "测试知识库", "document_id": "d1",
     "document_name": "巡更操作指南.pdf", "segment_id": "s1", "score": 0.9, "content": "巡更…"},
    {"position": 2, "dataset_id": "ds", "dataset_name": "测试知识库", "document_id": "d2",
     "document_name": "消防应急预案.docx", "segment_id": "s2", "score": 0.5, "content": "消防…"},
]  # fmt: skip


def message_end(resources: Any = None) -> bytes:
    metadata = {"annotation_reply": None, "usage": {"total_tokens": 10},
                "retriever_resources": resources or []}  # fmt: skip
    return frame("message_end", id="msg-1", metadata=metadata, files=[])


def workflow_finished(status: str = "succeeded") -> bytes:
    return frame("workflow_finished", workflow_run_id="run-1",
                 data={"id": "run-1", "status": status, "outputs": {}, "error": None})  # fmt: skip


def error_event(code: str = "internal_server_error", status: int = 500) -> bytes:
    return frame("error", task=False, code=code, status=status, message="Run failed: boom")


SEED_STREAM = b"".join(
    [
        workflow_started(),
        node_finished("knowledge-retrieval", {"result": [{"content": "x"}]}),
        code_node(),
        PING,
        *[message(d) for d in SEED_DELTAS[:5]],
        PING,
        *[message(d, ascii=True) for d in SEED_DELTAS[5:]],  # old Dify: \\uXXXX escapes
        workflow_finished(),
        message_end(),
    ]
)


def consume(chunks: list[bytes]) -> tuple[list[StreamUpdate], AnswerResult]:
    consumer = DifyStreamConsumer()
    updates: list[StreamUpdate] = []
    for chunk in chunks:
        updates.extend(consumer.feed(chunk))
    updates.extend(consumer.close())
    final = updates[-1]
    assert isinstance(final, AnswerFinished)
    assert final.result is consumer.result
    return updates, final.result


def summary(result: AnswerResult) -> tuple[Any, ...]:
    return (
        result.answer, result.raw_answer, result.segments, result.citations, result.panel,
        result.invalid, result.events, result.error, result.finished, result.warnings,
        result.message_id, result.conversation_id, result.task_id, result.workflow_status,
    )  # fmt: skip


# -- decoders ---------------------------------------------------------------------------


def test_utf8_decoder_keeps_split_characters() -> None:
    data = "巡更【C：1】".encode()
    for i in range(len(data) + 1):
        dec = Utf8Decoder()
        assert dec.decode(data[:i]) + dec.decode(data[i:]) + dec.flush() == "巡更【C：1】"
    dec = Utf8Decoder()
    assert dec.decode(b"a\xe5\xb7") == "a"
    assert dec.flush() == "\ufffd"


def test_line_decoder_handles_every_line_end_and_split() -> None:
    text = "a\r\nb\nc\rd\r\n\r\ne"
    expected = ["a", "b", "c", "d", "", "e"]
    for i in range(len(text) + 1):
        dec = LineDecoder()
        assert dec.decode(text[:i]) + dec.decode(text[i:]) + dec.flush() == expected
    dec = LineDecoder()
    assert dec.decode("x\r") == []
    assert dec.flush() == ["x"]
    assert dec.decode("\u2028\x1c") == []  # not SSE line ends (str.splitlines would split)


def test_line_decoder_refuses_endless_lines() -> None:
    dec = LineDecoder(max_line=10)
    assert dec.decode("ok\n12345") == ["ok"] and not dec.overflow
    assert dec.decode("x\n678901234567") == ["12345x"]
    assert dec.overflow


def test_sse_decoder_follows_whatwg_rules() -> None:
    dec = SSEDecoder()
    lines = [": comment", "event: ping", "", "data: {\"a\":", "data:1}", "id: 7", "retry: 50",
             "unknown: x", "", "", "data"]  # fmt: skip
    events = [e for e in (dec.decode(line) for line in lines) if e is not None]
    assert [(e.event, e.data) for e in events] == [("ping", ""), ("message", '{"a":\n1}')]
    assert events[1].id == "7" and events[1].retry == 50
    last = dec.flush()
    assert last is not None and last.data == ""


# -- consumer: the seed stream under every split -------------------------------------------


def test_seed_stream_result() -> None:
    updates, result = consume([SEED_STREAM])
    assert result.answer == SEED_ANSWER
    assert result.raw_answer == SEED_TEXT
    assert result.citations == [("7", 1), ("2", 2), ("6", 3)]
    assert [(e["idx"], e["raw_id"], e["chunk"]) for e in result.panel] == [
        (1, "7", CHUNKS[3]), (2, "2", CHUNKS[1]), (3, "6", CHUNKS[2]),
    ]  # fmt: skip
    assert result.panel_source == "chunk_metadata"
    assert result.events == [
        "workflow_started", "node_finished", "node_finished", "ping", *["message"] * 5,
        "ping", *["message"] * 4, "workflow_finished", "message_end",
    ]  # fmt: skip
    assert (result.message_id, result.conversation_id, result.task_id) == (
        "msg-1",
        "conv-1",
        "task-1",
    )
    assert result.finished and result.workflow_status == "succeeded"
    assert result.error is None and result.warnings == [] and result.invalid == []
    assert result.metadata["usage"] == {"total_tokens": 10}
    kinds = [type(u).__name__ for u in updates]
    assert kinds[0] == "MetadataReceived" and kinds[-1] == "AnswerFinished"
    assert set(kinds[1:-1]) == {"SegmentsReceived"}


SPLIT_STREAM = b"".join(
    [
        code_node(CHUNKS[1:3]),
        PING,
        message("巡检时【C"),
        message("：6】上报", ascii=True),
        message("[C:2][C:9]。"),
        message_end(),
        workflow_finished(),
    ]
)


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n"])
def test_every_split_gives_the_same_result(line_end: bytes) -> None:
    data = SPLIT_STREAM.replace(b"\n", line_end)
    _, whole = consume([data])
    assert whole.answer == "巡检时上报。"
    assert whole.citations == [("6", 1), ("2", 2)] and whole.invalid == ["9"]
    for i in range(len(data) + 1):
        _, result = consume([data[:i], data[i:]])
        assert summary(result) == summary(whole), i
    _, result = consume([data[i : i + 1] for i in range(len(data))])
    assert summary(result) == summary(whole)


def test_segments_streamed_equal_final_segments() -> None:
    updates, result = consume([SEED_STREAM[i : i + 7] for i in range(0, len(SEED_STREAM), 7)])
    streamed = [s for u in updates if isinstance(u, SegmentsReceived) for s in u.segments]
    assert "".join(s.get("text", "") for s in streamed) == result.answer  # type: ignore[misc]
    assert [s for s in streamed if "cite" in s] == [s for s in result.segments if "cite" in s]


# -- consumer: event semantics ---------------------------------------------------------------


def test_terminal_events_in_either_order_or_missing() -> None:
    body = code_node() + message("结论[C:1]。") + message("未完[C:2")
    _, a = consume([body + message_end() + workflow_finished()])
    _, b = consume([body + workflow_finished() + message_end()])
    _, c = consume([body])  # dify#31253: the stream just ends
    for result in (a, b, c):
        assert result.answer == "结论。未完[C:2"  # held text released at the end
        assert result.citations == [("1", 1)]
    assert a.finished and b.finished and not c.finished
    assert a.workflow_status == b.workflow_status == "succeeded" and c.workflow_status == ""
    assert a.events[-2:] == ["message_end", "workflow_finished"]
    assert b.events[-2:] == ["workflow_finished", "message_end"]


def test_text_chunk_events_carry_text_too() -> None:
    _, result = consume([code_node() + text_chunk("甲[C:") + text_chunk("6]乙") + message_end()])
    assert result.answer == "甲乙" and result.citations == [("6", 1)]


def test_error_event_releases_held_text_and_surfaces_the_error() -> None:
    body = code_node() + message("部分答案[C:1") + workflow_finished("failed") + error_event()
    updates, result = consume([body + error_event("second") + message("迟到[C:2]")])
    assert result.error == StreamFailed("internal_server_error", "Run failed: boom", 500)
    assert StreamFailed("internal_server_error", "Run failed: boom", 500) in updates
    assert result.workflow_status == "failed" and not result.finished
    # held text released at the error; text after it is kept, literally, with a warning
    assert result.answer == "部分答案[C:1迟到[C:2]"
    assert result.citations == []
    assert [w.split(":")[0] for w in result.warnings] == ["later_error", "text_after_end"]
    assert result.events[-2:] == ["error", "message"]


def test_text_after_message_end_is_kept_literally() -> None:
    _, result = consume([message("答[C:1]") + message_end() + text_chunk("补[C:1]")])
    assert result.answer == "答补[C:1]" and result.finished
    assert result.warnings == ["text_after_end: text_chunk after the end of the answer: '补[C:1]'"]


def test_retriever_resources_fallback_by_position() -> None:
    # Dify's own resources: the cited ids are looked up by position (mobile §3.4)
    _, result = consume([message("答[C:2]案[C:5]") + message_end(RESOURCES)])
    assert result.citations == [("2", 1), ("5", 2)]  # no metadata: every id is accepted
    assert result.panel_source == "retriever_resources"
    assert [(e["idx"], e["raw_id"]) for e in result.panel] == [(1, "2"), (2, "5")]
    chunk = result.panel[0]["chunk"]
    assert chunk is not None and result.panel[1]["chunk"] is None
    assert chunk["document_title"] == "消防应急预案.docx" and chunk["source_type"] == "rag"
    assert chunk["display_subtitle"] == "测试知识库"


def test_retriever_resources_fallback_by_gcite_chunk_id() -> None:
    # gcite's service lists only the cited chunks (positions 1..n in display order) and
    # puts the raw chunk id and the G-Cite fields into doc_metadata
    resources = [
        {"position": 1, "document_name": "物业巡检流程标准 - 知乎", "dataset_name": "知乎",
         "content": "…", "doc_metadata": {"chunk_id": "7", "source_type": "web",
         "document_title": "物业巡检流程标准 - 知乎", "display_subtitle": "知乎 · 2025-08-12",
         "url": "https://www.zhihu.com/q/1"}},
        {"position": 2, "document_name": "制度.pdf", "dataset_name": "测试知识库",
         "doc_metadata": {"chunk_id": "2", "source_type": "rag", "document_title": "制度",
                          "display_subtitle": "", "url": ""}},
    ]  # fmt: skip
    _, result = consume([message("甲[C:7]乙[C:2]") + message_end(resources)])
    assert [(e["idx"], e["raw_id"]) for e in result.panel] == [(1, "7"), (2, "2")]
    first, second = (e["chunk"] for e in result.panel)
    assert first is not None and second is not None
    assert (first["source_type"], first["display_subtitle"]) == ("web", "知乎 · 2025-08-12")
    assert first["url"] == "https://www.zhihu.com/q/1"
    assert (second["document_title"], second["display_subtitle"]) == ("制度", "")


def test_no_metadata_at_all_gives_panel_without_chunks() -> None:
    _, result = consume([message("答[C:3]") + message_end()])
    assert result.panel_source == "none"
    assert result.panel == [{"idx": 1, "raw_id": "3", "chunk": None}]


def test_chunk_metadata_only_from_code_nodes_and_invalid_ids_dropped() -> None:
    body = (
        node_finished("knowledge-retrieval", {"chunk_metadata": [{"id": "9"}]})
        + node_finished("code", {"other": 1})
        + code_node(json.dumps(CHUNKS, ensure_ascii=False))  # a string output is parsed
        + message("a[C:9]b[C:1]")
        + message_end(RESOURCES)
    )
    updates, result = consume([body])
    assert [u for u in updates if isinstance(u, MetadataReceived)] == [MetadataReceived(CHUNKS)]
    assert result.invalid == ["9"] and result.citations == [("1", 1)]
    assert result.panel_source == "chunk_metadata"
    assert result.chunk_metadata == CHUNKS


def test_workflow_started_clears_cached_metadata() -> None:
    _, result = consume([code_node() + workflow_started() + message("x[C:42]") + message_end()])
    assert result.citations == [("42", 1)] and result.panel_source == "none"


def test_message_replace_replaces_the_answer() -> None:
    body = code_node() + message("坏[C:1]") + frame("message_replace", answer="已替换[C:2]。")
    updates, result = consume([body + message_end()])
    assert result.answer == "已替换。" and result.raw_answer == "已替换[C:2]。"
    assert result.citations == [("2", 1)]
    assert any(isinstance(u, SegmentsReceived) and u.replace for u in updates)


def test_malformed_frames_are_skipped_and_reported() -> None:
    body = (
        b"data: {not json}\n\n"
        + b"data: [1, 2]\n\n"
        + message(None)
        + node_finished("code", {"chunk_metadata": 5})
        + b": keep-alive comment\n\nid: 3\nretry: 10\n\n"
        + message("好")
        + b'data: {"event": "message", "answer": "\xff"}\n\n'
        + b'data: {"event": "message", "ans'
    )
    _, result = consume([body])
    assert result.answer == "好\ufffd"
    assert [w.split(":")[0] for w in result.warnings] == [
        "malformed_frame", "malformed_frame", "bad_answer", "bad_chunk_metadata",
        "malformed_frame",
    ]  # fmt: skip
    assert result.warnings[-1].startswith("malformed_frame: incomplete frame at end of stream")
    assert result.events.count("message") == 3  # the retry-only block is no event
    assert result.error is None


def test_last_frame_without_blank_line_is_still_used() -> None:
    _, result = consume([message("甲") + message("乙").rstrip(b"\n")])
    assert result.answer == "甲乙" and result.warnings == []


def test_multi_line_data_frame() -> None:
    payload = json.dumps({"event": "message", "answer": "多行[C:1]"}, indent=1)
    body = "".join(f"data: {line}\n" for line in payload.splitlines()) + "\n"
    _, result = consume([body.encode()])
    assert result.answer == "多行" and result.citations == [("1", 1)]


def test_over_long_line_stops_the_stream_and_keeps_text() -> None:
    consumer = DifyStreamConsumer(max_line=1000)
    updates = consumer.feed(message("开头[C:1") + b"data: " + b"x" * 2000)
    updates += consumer.feed(message("不会读取"))
    updates += consumer.close()
    result = consumer.result
    assert result.error is not None and result.error.code == "frame_too_large"
    assert result.answer == "开头[C:1"
    assert consumer.stopped
    with pytest.raises(RuntimeError):
        consumer.feed(b"x")


# -- the httpx edge against a real local server --------------------------------------------

SCENARIOS: dict[str, dict[str, Any]] = {
    "seed": {"chunks": [SEED_STREAM[i : i + 50] for i in range(0, len(SEED_STREAM), 50)]},
    "wf_first": {"chunks": [code_node(), message("甲[C:1]"), workflow_finished(), message_end()]},
    "error": {"chunks": [code_node(), message("乙[C:"), error_event("invalid_param", 400)]},
    "broken": {"chunks": [code_node(), message("丙[C:2]丁[C:1"), message("戊")[:30]],
               "end": "break"},
    "stall": {"chunks": [code_node(), message("己[C:1")], "end": "stall"},
    "unauthorized": {"status": 401, "type": "application/json",
                     "chunks": [b'{"code": "unauthorized", "message": "Invalid API key", '
                                b'"status": 401}']},
    "not_sse": {"type": "application/json", "chunks": [b'{"answer": "x"}']},
}  # fmt: skip


class DifyStandIn(BaseHTTPRequestHandler):
    """Serves scripted Dify chat-messages responses with chunked transfer encoding."""

    protocol_version = "HTTP/1.1"
    requests: ClassVar[list[tuple[str, dict[str, Any], str]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append((self.path, body, self.headers.get("Authorization", "")))
        scenario = SCENARIOS[self.path.rsplit("/", 1)[-1]]
        self.send_response(scenario.get("status", 200))
        self.send_header("Content-Type", scenario.get("type", "text/event-stream"))
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in scenario["chunks"]:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        end = scenario.get("end", "eof")
        if end == "eof":
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        elif end == "stall":
            time.sleep(1.5)
        self.close_connection = True
        if end == "break":
            self.connection.shutdown(socket.SHUT_RDWR)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), DifyStandIn)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


async def collect(url: str, timeout: float = 120.0) -> tuple[list[StreamUpdate], AnswerResult]:
    request = {"query": "巡更怎么登录", "inputs": {}, "response_mode": "streaming", "user": "u1"}
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout)) as client:
        updates = [
            u
            async for u in consume_chat_stream(
                client, url, request, {"Authorization": "Bearer app-test"}
            )
        ]
    final = updates[-1]
    assert isinstance(final, AnswerFinished)
    return updates, final.result


async def test_http_seed_stream(server: str) -> None:
    _, result = await collect(f"{server}/v1/chat-messages/seed")
    _, expected = consume([SEED_STREAM])
    assert summary(result) == summary(expected)
    path, body, auth = DifyStandIn.requests[-1]
    assert path.endswith("/seed") and body["response_mode"] == "streaming"
    assert auth == "Bearer app-test"


async def test_http_workflow_finished_before_message_end(server: str) -> None:
    _, result = await collect(f"{server}/v1/chat-messages/wf_first")
    assert result.answer == "甲" and result.finished and result.workflow_status == "succeeded"


async def test_http_error_event(server: str) -> None:
    updates, result = await collect(f"{server}/v1/chat-messages/error")
    assert result.answer == "乙[C:" and not result.finished
    assert result.error == StreamFailed("invalid_param", "Run failed: boom", 400)
    assert result.error in updates


async def test_http_stream_breaking_mid_frame_keeps_received_text(server: str) -> None:
    updates, result = await collect(f"{server}/v1/chat-messages/broken")
    assert result.error is not None and result.error.code == "stream_interrupted"
    assert result.answer == "丙丁[C:1" and result.citations == [("2", 1)]
    assert not result.finished
    assert isinstance(updates[-2], StreamFailed)


async def test_http_read_timeout_ends_with_error_and_text(server: str) -> None:
    _, result = await collect(f"{server}/v1/chat-messages/stall", timeout=0.3)
    assert result.error is not None and result.error.code == "timeout"
    assert result.answer == "己[C:1"


async def test_http_error_status_raises_with_dify_message(server: str) -> None:
    with pytest.raises(StreamError, match=r"HTTP 401（unauthorized）：Invalid API key"):
        await collect(f"{server}/v1/chat-messages/unauthorized")


async def test_http_non_sse_response_raises(server: str) -> None:
    with pytest.raises(StreamError, match="application/json"):
        await collect(f"{server}/v1/chat-messages/not_sse")


async def test_http_connection_refused_raises() -> None:
    with pytest.raises(StreamError, match="无法连接服务"):
        await collect(f"http://127.0.0.1:{free_port()}/v1/chat-messages")
