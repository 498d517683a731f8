"""``gcite eval --json/--html`` paths that would fail after the run, or destroy a file of
the run, are refused before any question is asked (a real loopback Dify stand-in)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.dify_standin import Reply, dify_answer, dify_standin
from eval.conftest import run_gcite


@pytest.fixture()
def questions(tmp_path: Path) -> Path:
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "a", "question": "巡更多久一次"}\n', encoding="utf-8")
    return path


def _eval(questions: Path, *options: str) -> tuple[int, str, int]:
    with dify_standin() as server:
        server.replies.append(Reply(body=dify_answer(["每 2 小时一次。"], [])))
        proc = run_gcite("eval", str(questions), "--url", server.url, "-q", *options)
        return proc.returncode, proc.stderr, len(server.requests)


def test_a_report_in_a_missing_folder_is_refused_before_the_run(
    questions: Path, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    for target in (tmp_path / "missing" / "out.json", tmp_path / "a-file" / "out.json"):
        status, err, asked = _eval(questions, "--json", str(target))
        assert status == 1 and err.startswith(f"错误: 无法写入 {target}: "), err
        assert "Traceback" not in err and asked == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "q.jsonl"]  # no probe left


def test_a_report_over_the_question_file_or_the_other_report_is_refused(
    questions: Path, tmp_path: Path
) -> None:
    status, err, asked = _eval(questions, "--json", str(questions))
    assert status == 2 and "--json 与问题文件是同一个文件" in err and asked == 0
    assert questions.read_text("utf-8") == '{"id": "a", "question": "巡更多久一次"}\n'
    same = str(tmp_path / "report")
    status, err, asked = _eval(questions, "--json", same, "--html", same)
    assert status == 2 and "--html 与 --json 是同一个文件" in err and asked == 0


def test_reports_are_written_beside_the_questions(questions: Path, tmp_path: Path) -> None:
    status, err, asked = _eval(
        questions, "--json", str(tmp_path / "o.json"), "--html", str(tmp_path / "o.html")
    )
    assert status == 0 and asked == 1, err
    assert json.loads((tmp_path / "o.json").read_text("utf-8"))["summary"]["questions"] == 1
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_progress_shows_an_id_on_one_line_without_escape_sequences() -> None:
    import io

    from gcite.cli.eval import _progress
    from gcite.eval import EvalQuestion, Observation, judge

    err = io.StringIO()
    question = EvalQuestion("\x1b[2J\x1b]0;pwned\x07a\nb\r", "明天天气", False, "off-topic")
    _progress(err, 1)(0, judge(question, Observation("")))
    assert err.getvalue() == "[1/1] [2J]0;pwneda b 正确拒答\n"  # ESC and BEL removed
