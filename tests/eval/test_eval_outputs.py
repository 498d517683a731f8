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


def test_ctrl_c_mid_run_writes_the_questions_asked_so_far(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import threading
    import time

    questions = tmp_path / "q.jsonl"
    rows = [{"id": f"q{i}", "question": "巡更多久一次"} for i in range(3)]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out_json, out_html = tmp_path / "o.json", tmp_path / "o.html"
    release = threading.Event()
    # Ctrl-C as at a terminal: a runner started in the background (a non-interactive
    # shell's `cmd &`) hands its children SIGINT ignored, and they would never see it
    code = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from gcite.cli import main; sys.argv[0] = 'gcite'; main()"
    )
    try:
        with dify_standin() as server:
            answer = dify_answer(["每 2 小时一次。"], [])
            server.replies += [Reply(body=answer), Reply(body=answer, hang_until=release)]
            proc = subprocess.Popen(
                [sys.executable, "-c", code, "eval", str(questions), "--url", server.url,
                 "--json", str(out_json), "--html", str(out_html)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            for _ in range(600):  # hang guard: until the second question is being asked
                if len(server.requests) == 2 or proc.poll() is not None:
                    break
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
    finally:
        release.set()
    assert proc.returncode == 1, err
    assert "已中止：报告只含前 1 题（共 3 题）" in err and "共 1 题" in out
    document = json.loads(out_json.read_text("utf-8"))
    assert document["complete"] is False and [v["id"] for v in document["verdicts"]] == ["q0"]
    assert "运行被中止：只含前 1 题" in out_html.read_text("utf-8")
