"""Hostile and careless question files: each is read, or refused with one Chinese line
naming the file and line - never a traceback, never a question silently cut in two."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gcite.errors import ConfigError
from gcite.eval.questions import MAX_QUESTION, MAX_TURNS, load_questions


def _file(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "q.jsonl"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_a_line_separator_inside_a_string_is_text(tmp_path: Path, separator: str) -> None:
    # json.dumps(..., ensure_ascii=False) writes these as they are: still one line
    rows = [{"id": "a", "question": f"第一句{separator}第二句"}, {"id": "b", "question": "下一行"}]
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
    questions = load_questions(_file(tmp_path, data))
    assert [q.question for q in questions] == [f"第一句{separator}第二句", "下一行"]


def test_bom_crlf_and_blank_lines_are_read(tmp_path: Path) -> None:
    data = b'\xef\xbb\xbf{"question": "\xe4\xb8\x80"}\r\n\r\n  \r\n{"question": "b"}\r\n'
    questions = load_questions(_file(tmp_path, data))
    assert [(q.id, q.question) for q in questions] == [("L1", "一"), ("L4", "b")]


def test_deeply_nested_json_is_one_line_error(tmp_path: Path) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    path = _file(tmp_path, b'{"question": "a"}\n{"question": "b", "x": ' + deep + b"}\n")
    with pytest.raises(ConfigError, match="第 2 行：JSON 嵌套过深"):
        load_questions(path)


def test_a_lone_surrogate_escape_is_refused_when_read(tmp_path: Path) -> None:
    # it could be neither sent (UTF-8 request body) nor written to the report
    path = _file(tmp_path, b'{"question": "a\\ud800b"}\n')
    with pytest.raises(ConfigError, match="第 1 行：含有无效的 Unicode 转义"):
        load_questions(path)
    ok = load_questions(_file(tmp_path, b'{"question": "\\ud83d\\ude00 \\u5de1"}\n'))
    assert ok[0].question == "\U0001f600 巡"  # a surrogate pair is one character


def test_earlier_turns_are_bounded(tmp_path: Path) -> None:
    many = json.dumps({"question": "a", "turns": ["b"] * (MAX_TURNS + 1)})
    with pytest.raises(ConfigError, match=f"turns 过多（最多 {MAX_TURNS} 轮）"):
        load_questions(_file(tmp_path, many.encode() + b"\n"))
    for turn in ("x" * (MAX_QUESTION + 1), {"query": "x" * (MAX_QUESTION + 1), "answer": "y"}):
        long = json.dumps({"question": "a", "turns": [turn]})
        with pytest.raises(ConfigError, match="turns 里的问题过长"):
            load_questions(_file(tmp_path, long.encode() + b"\n"))
    fine = json.dumps({"question": "a", "turns": ["b"] * MAX_TURNS})
    assert len(load_questions(_file(tmp_path, fine.encode() + b"\n"))[0].turns) == MAX_TURNS


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("question", 5, "缺少 question"),
        ("turns", 5, "turns 必须是列表"),
        ("turns", [5], "turns 的每一项"),
        ("turns", [{"query": "x", "answer": 5}], "turns 的每一项"),
        ("gold_docs", [5], "gold_docs 必须是字符串列表"),
        ("gold_passages", 5, "gold_passages 必须是字符串列表"),
        ("gold", [{"doc": 1, "article": "第一条"}], "gold 的每一项"),
        ("answer_keywords", [[["x"]]], "answer_keywords 的每一项"),
        ("answer_keywords", "x", "answer_keywords 必须是列表"),
        ("roles", 5, "roles 必须是字符串列表"),
        ("category", 5, "category 必须是字符串"),
        ("id", [1], "id 必须是字符串或整数"),
    ],
)
def test_a_wrong_type_in_each_field_is_one_line(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    row = {"question": "a", field: value}
    with pytest.raises(ConfigError, match=f"第 1 行：{message}"):
        load_questions(_file(tmp_path, json.dumps(row).encode() + b"\n"))
