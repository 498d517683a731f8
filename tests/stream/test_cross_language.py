"""Differential checks: the JavaScript client agrees with the Python client on random input.

1. The citation parser on random answers:
Random answers (markers in every version-2 variant: ranges, escapes, tabs and no-break
spaces, invalid ids; code fences and spans, also in list items and block quotes; leading
reasoning blocks; split and lone surrogates; markers around the ``max_hold`` boundary)
are cut into random deltas; the Python parser's
output becomes a vectors file (citation-markers.md §7) that ``clients/js/bin/vectors.mjs``
must pass the three ways.

2. The Dify stream consumer on random streams (docs/stream-contract.md): random event
sequences (chunk metadata good and bad, answer deltas from the answers above, reasoning,
replace, errors with odd codes, pings, comments, frames without an event, malformed and
truncated frames, CRLF/CR line ends, JSON with ASCII escapes that split surrogate pairs,
bytes that are not UTF-8) become a stream-contract vectors file with the Python
consumer's projection as the expectation; the JavaScript runner must pass every case
whole, byte by byte and in random cuts, and so must the Python consumer itself.

Skips when ``node`` or the JS client is absent.
"""

from __future__ import annotations

import base64
import itertools
import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from gcite.stream.contract import KIND, run_consumer, run_stream_vectors
from gcite.stream.vectors import run_parser

REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / "clients" / "js" / "bin" / "vectors.mjs"

PIECES = [
    "[C:1]", "[C:2]", "【C：3】", "［c: ４］", "[C:1,2]", "[C:3, C:9]", "[C:0]", "[C:12345]",
    "[C:1，3、5]", "[C:07]", "[[C:1]]", "[C:", "[", "】", "]", "【", "C", ":", "1", "，", " ",
    "\u3000", "[注]", "[7]", "巡更人员", "。", "ab", "\n", "`", "``", "\n```\n", "\n~~~\n",
    "```", "~~~", "\n````\n", "x[C:10]y", "(C:1)", "[C:1,]",
    "[C:1-3]", "[C:2–4]", "[C:1～2]", "[C:8~10]", "[C:1-20]", "[C:5-3]", "[C:1, C:4-5]", "-",
    "～", "\\[C:1\\]", "\\[C:2]", "[C:3\\]", "\\", "\\[", "\\]", "[C:\t1]", "[C:\u00a02]",
    "[C:3\u202f]", "\t", "<think>", "</think>", "</thinking>", "<thi", "<", "\n- ```\n",
    "\n> ```\n", "\n1. ```\n", "\n   ```\n", "\n> - ~~~\n", "\n- ", "\n> ", "\n12) ",
    "\r\n", "\ud83d", "\ude00", "😀", "[C:9999]", "[C:9995-9999]",
]  # fmt: skip
STARTS = ["", "", "", "<think>", "<thinking>", "  \n<think>", "<thi", " <"]


def random_answer(rng: random.Random) -> str:
    parts = [rng.choice(STARTS)]
    for _ in range(rng.randint(0, 30)):
        if rng.random() < 0.08:  # a marker close to the 64-character hold limit
            escape = rng.choice(["", "\\"])
            spaces = rng.choice([" ", "\t", "\u00a0"]) * rng.randint(54, 62)
            parts.append(escape + "[C:" + spaces + str(rng.randint(1, 10)) + escape + "]")
        else:
            parts.append(rng.choice(PIECES))
    return "".join(parts)


def random_cut(rng: random.Random, text: str) -> list[str]:
    cuts = sorted(rng.sample(range(len(text) + 1), k=min(len(text) + 1, rng.randint(0, 10))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def test_js_client_agrees_with_python_on_random_answers(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not RUNNER.is_file():
        pytest.skip("node or clients/js/bin/vectors.mjs not available")
    rng = random.Random(20261130)
    cases = []
    for k in range(400):
        known = rng.choice([None, [str(i) for i in range(1, 11)], ["1", "2", "3"]])
        deltas = random_cut(rng, random_answer(rng))
        cases.append(
            {"name": f"random-{k}", "known_ids": known, "deltas": deltas,
             "expect": run_parser(known, deltas)}
        )  # fmt: skip
    path = tmp_path / "random-vectors.json"
    # ASCII JSON: lone surrogates travel as \\uXXXX escapes, as from a model API
    path.write_text(json.dumps({"version": 2, "cases": cases}), "utf-8")
    proc = subprocess.run([node, str(RUNNER), str(path)], capture_output=True, text=True)
    assert proc.stdout.splitlines()[-1:] == ["400 passed, 0 failed"], proc.stdout[:3000]
    assert proc.returncode == 0


# -- the stream consumer ----------------------------------------------------------------

CHUNK_POOL: list[object] = [
    {"id": "1", "source_type": "rag", "document_title": "巡更指南", "display_subtitle": " 知识库 ",
     "url": "https://kb.example.com/1"},
    {"id": 2, "source_type": "web", "document_title": "  ", "document_name": "网页",
     "url": "https://@evil.example", "source_file_url": "http://files.example.com/2.pdf"},
    {"id": "3", "title": "标题", "url": "javascript:alert(1)"},
    {"id": "10", "document_title": "十", "url": "https://a.example.com@b.example/"},
    None, {"title": "无编号"}, {"id": ""}, {"id": True}, "文本",
]  # fmt: skip
RESOURCES: list[object] = [
    {"position": 1, "document_name": "制度.pdf", "dataset_name": "库"},
    {"position": "2", "document_name": "字符串"},
    {"position": 3, "doc_metadata": {"chunk_id": "7", "source_type": "web", "url": "https://x.example/"}},
    "坏", {"position": 0, "title": "零"},
]  # fmt: skip


def _data(rng: random.Random, obj: object) -> str:
    text = json.dumps(obj, ensure_ascii=rng.random() < 0.5)
    if rng.random() < 0.15 and len(text) > 12:  # one event's data over two data: lines
        cut = rng.randrange(1, len(text))
        return f"data: {text[:cut]}\ndata: {text[cut:]}"
    return f"data: {text}"


def random_frame(rng: random.Random, answer_parts: list[str]) -> str:
    ids = {"conversation_id": "c", "message_id": "m", "task_id": "t"}
    kind = rng.random()
    if kind < 0.40 and answer_parts:
        part = answer_parts.pop(0)
        event = rng.choice(["message", "message", "agent_message", "text_chunk"])
        body: dict[str, object] = (
            {"event": event, "data": {"text": part}} if event == "text_chunk"
            else {"event": event, "answer": part, "id": "m"}
        )  # fmt: skip
        if rng.random() < 0.5:
            body |= ids
        return _data(rng, body)
    if kind < 0.48:
        chunks = rng.sample(CHUNK_POOL, k=rng.randint(0, 5))
        value = json.dumps(chunks) if rng.random() < 0.3 else chunks
        if rng.random() < 0.05:
            value = "not a list"
        data = {
            "node_type": rng.choice(["code", "code", "llm"]),
            "outputs": {"chunk_metadata": value},
        }
        return _data(rng, {"event": "node_finished", "data": data})
    if kind < 0.53:
        metadata: dict[str, object] = {"usage": {"total_tokens": 1}}
        if rng.random() < 0.5:
            metadata["retriever_resources"] = rng.sample(RESOURCES, k=rng.randint(0, 4))
        return _data(
            rng, {"event": "message_end", "id": rng.choice(["m", "n"]), "metadata": metadata}
        )
    if kind < 0.58:
        code = rng.choice(["invalid_param", 500, True, None, "", 1.5])
        status = rng.choice([400, "500", None, False])
        return _data(rng, {"event": "error", "code": code, "status": status, "message": "x"})
    if kind < 0.62:
        return _data(rng, {"event": "workflow_started", "data": {}})
    if kind < 0.66:
        return _data(rng, {"event": "workflow_finished", "data": {"status": "succeeded"}})
    if kind < 0.69:
        return _data(rng, {"event": "message_replace", "answer": random_answer(rng)[:30]})
    return rng.choice([
        "event: ping", ": comment", "data:", "id: 4\nretry: 10", "data: {not json",
        "data: [1, 2]", 'data: {"answer": "无事件[C:1]"}', 'event: message\ndata: {"answer": "乙"}',
        'data: {"event": "message"}', 'data: {"event": "text_chunk", "data": null}',
        'data: {"event": "node_started", "data": {"node_type": "code"}}',
    ])  # fmt: skip


def random_stream(rng: random.Random) -> bytes:
    answer = random_answer(rng)
    cuts = sorted(rng.sample(range(len(answer) + 1), k=min(len(answer) + 1, rng.randint(1, 8))))
    parts = [answer[a:b] for a, b in itertools.pairwise([0, *cuts, len(answer)])]
    frames = [random_frame(rng, parts) for _ in range(rng.randint(1, 14))]
    frames += [random_frame(rng, parts) for _ in range(len(parts))]
    end = rng.choice(["\n", "\r\n", "\r"])
    text = "".join(frame.replace("\n", end) + end + end for frame in frames)
    data = text.encode("utf-8", "surrogatepass")  # ensure_ascii=False keeps lone surrogates
    data = data.replace(b"\xed\xa0\xbd", b"\xed\xa0")  # ... make some of them invalid UTF-8
    if rng.random() < 0.1:
        data = b"\xef\xbb\xbf" + data
    if rng.random() < 0.15:
        data = data[: rng.randrange(len(data) + 1)]  # the connection drops mid-frame
    return data


def test_js_consumer_agrees_with_python_on_random_streams(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not RUNNER.is_file():
        pytest.skip("node or clients/js/bin/vectors.mjs not available")
    rng = random.Random(20261201)
    cases = []
    for k in range(250):
        data = random_stream(rng)
        expect = run_consumer([data])
        cases.append(
            {"name": f"stream-{k}", "sse_base64": base64.b64encode(data).decode(), "expect": expect}
        )
    doc = {"version": 1, "kind": KIND, "cases": cases}
    # the Python consumer is cut-invariant on every one of them ...
    assert [r.name for r in run_stream_vectors(doc) if not r.ok] == []
    # ... the streams exercise the contract ...
    results = [c["expect"]["result"] for c in cases]
    assert sum(bool(r["citations"]) for r in results) > 50
    assert sum(bool(r["reasoning"]) for r in results) > 10
    assert sum(bool(r["error"]) for r in results) > 20
    assert len({w for r in results for w in r["warnings"]}) >= 7
    assert sum("\ufffd" in r["answer"] for r in results) > 10
    # ... and the JavaScript consumer agrees, fed every way
    path = tmp_path / "random-streams.json"
    path.write_text(json.dumps(doc), "utf-8")
    proc = subprocess.run([node, str(RUNNER), str(path)], capture_output=True, text=True)
    assert proc.stdout.splitlines()[-1:] == ["250 passed, 0 failed"], proc.stdout[:3000]
    assert proc.returncode == 0
