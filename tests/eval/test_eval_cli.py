"""``gcite eval`` in process on the demo handbook: verdicts, figures, JSON and HTML files."""

from __future__ import annotations

import json
from pathlib import Path

from eval.conftest import run_gcite


def test_eval_in_process_on_the_demo_handbook(
    eval_demo_dir: Path, demo_questions: Path, tmp_path: Path
) -> None:
    out_json, out_html = tmp_path / "out.json", tmp_path / "report.html"
    proc = run_gcite(
        "eval", str(demo_questions), "--demo", "--data-dir", str(eval_demo_dir),
        "--json", str(out_json), "--html", str(out_html),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "[5/5] canteen 正确拒答" in proc.stderr
    assert "共 5 题" in proc.stdout and "无关问题：拒答：1/1（100%）" in proc.stdout
    document = json.loads(out_json.read_text("utf-8"))
    assert document["target"]["mode"] == "demo"
    verdicts = {v["id"]: v for v in document["verdicts"]}
    assert list(verdicts) == ["readme", "key-visitor", "key-security", "follow", "canteen"]

    readme = verdicts["readme"]
    assert readme["outcome"] == "right" and readme["gold_cited"] and readme["keywords_ok"]
    assert any(s["document"] == "01-patrol.md" and s["gold"] for s in readme["sources"])
    assert readme["gold_rank"] == 1 and 0 < readme["gold_score"] <= 1
    # gold documents only: the gold chunk is the document's first, both ranks agree
    assert readme["gold_rank_by"] == "document" and readme["gold_doc_rank"] == 1
    assert readme["gold_passage_cited"] is None
    assert readme["verifier_checked"]  # message_end carried gcite_verification
    assert readme["latency_ms"] > 0

    # the question's own roles decide what it may read: the visitor cannot see the key
    assert not verdicts["key-visitor"]["right"] and verdicts["key-visitor"]["gold_rank"] is None
    assert verdicts["key-security"]["outcome"] == "right"
    # the earlier turn is in the verdict; the follow-up is judged on its gold document
    assert verdicts["follow"]["turns"] == [
        {"query": "会议室最多能提前几天订", "answer": "最多可提前 14 天预订。"}
    ]
    assert verdicts["canteen"]["outcome"] == "refused" and verdicts["canteen"]["refused"]
    # where each refusal was decided, from what the stream showed
    assert verdicts["canteen"]["refusal_stage"] in {"gate", "retrieval", "answerer"}
    assert verdicts["canteen"]["refusal_label"] and readme["refusal_stage"] is None

    summary = document["summary"]
    assert summary["questions"] == 5 and summary["off_topic_refused"]["share"] == 1.0
    assert summary["errors"] == 0
    assert set(summary["false_refusal_stages"]) == {"gate", "retrieval", "answerer"}
    page = out_html.read_text("utf-8")
    assert page.startswith("<!DOCTYPE html>") and "gcite 评测报告" in page
    assert 'id="verdicts"' in page and page.count("<svg") == 4
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")  # no assets


def test_bad_question_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "好"}\n{oops\n', encoding="utf-8")
    proc = run_gcite("eval", str(bad), "--data-dir", str(tmp_path / "none"))
    assert proc.returncode == 1
    assert proc.stderr.startswith("错误: ") and "第 2 行：不是有效的 JSON" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run_gcite("eval", str(bad), "--url", "http://127.0.0.1:9", "--role", "x")
    assert proc.returncode == 2 and "只用于本地模式" in proc.stderr


def test_missing_knowledge_base_is_one_line(tmp_path: Path) -> None:
    good = tmp_path / "q.jsonl"
    good.write_text('{"question": "巡更多久一次"}\n', encoding="utf-8")
    proc = run_gcite("eval", str(good), "--data-dir", str(tmp_path / "empty"))
    assert proc.returncode == 1 and proc.stderr.startswith("错误: "), proc.stderr
    assert "Traceback" not in proc.stderr
