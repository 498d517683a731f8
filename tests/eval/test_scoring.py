"""Scoring of ``gcite eval``: the question file, one verdict, the totals, the HTML (pure)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gcite.errors import ConfigError
from gcite.eval import EvalQuestion, Observation, aggregate, judge, parse_lines
from gcite.eval.questions import GoldArticle, PriorTurn, load_questions
from gcite.eval.report import render_html, report_document
from gcite.eval.scoring import (
    chunk_articles,
    gold_rank,
    is_refusal,
    refusal_stage,
    verifier_flags,
)


def chunk(cid: str, name: str, content: str, score: float = 0.5, **kw: Any) -> dict[str, Any]:
    return {
        "id": cid,
        "source_type": kw.get("source_type", "rag"),
        "document_name": name,
        "document_title": kw.get("title", name),
        "content": content,
        "score": score,
    }


PATROL = chunk("1", "01-patrol.md", "夜间巡更必须走完 A、B、C 三条线路的全部 24 个点位；", 0.9)
FAULTS = chunk("2", "02-faults.md", "物业须在 30 分钟内到场。", 0.4)


def q(**kw: Any) -> EvalQuestion:
    base: dict[str, Any] = {"id": "x", "question": "夜里巡逻刷几个点", "answerable": True}
    return EvalQuestion(**{**base, **kw})


# -- the question file -------------------------------------------------------------------


def test_parse_handbook_and_law_lines() -> None:
    lines = [
        json.dumps(
            {
                "id": "a",
                "question": " 白天呢 ",
                "turns": [{"query": "夜间巡更多久一次", "answer": "每 1 小时一次"}, "再问一句"],
                "answerable": True,
                "category": "follow-up",
                "gold_docs": ["01-patrol.md"],
                "gold_passages": ["日间巡更每 2 小时一次"],
                "answer_keywords": ["2 小时", ["两小时", "2小时"]],
            },
            ensure_ascii=False,
        ),
        "",
        json.dumps(
            {
                "id": 7,
                "question": "逃生通道被堵罚多少",
                "kind": "single",
                "gold": [{"doc": "消防法.md", "article": "第六十条"}],
                "alt_gold": [{"doc": "消防法.md", "article": "第二十八条"}],
                "keypoints": ["五千元以上"],
            },
            ensure_ascii=False,
        ),
        json.dumps({"question": "离婚房子怎么分", "kind": "unanswerable", "gold": []}),
        json.dumps({"question": "明天天气", "history": ["先问这个"]}),
    ]
    a, law, none, bare = parse_lines(lines)
    assert a.question == "白天呢" and a.category == "follow-up"
    assert a.turns == (PriorTurn("夜间巡更多久一次", "每 1 小时一次"), PriorTurn("再问一句"))
    assert a.keywords == (("2 小时",), ("两小时", "2小时"))
    assert law.id == "7" and law.answerable and law.category == "single"
    assert law.gold_articles == (
        GoldArticle("消防法.md", "第六十条"),
        GoldArticle("消防法.md", "第二十八条"),
    )
    assert not none.answerable and none.category == "unanswerable"
    assert bare.id == "L5" and not bare.answerable and bare.turns == (PriorTurn("先问这个"),)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "第 1 行：不是有效的 JSON"),
        ("[1, 2]", "第 1 行：每行必须是一个 JSON 对象"),
        ('{"question": ""}', "缺少 question"),
        ('{"question": "q", "answerable": "yes"}', "answerable 必须是 true 或 false"),
        ('{"question": "q", "answer_keywords": [[]]}', "answer_keywords 里有空的一项"),
        (
            '{"question": "q", "gold": [{"doc": "a.md"}]}',
            "gold 的每一项必须有字符串 doc 和 article",
        ),
        ('{"question": "q", "turns": [{"answer": "a"}]}', "turns 的每一项"),
        ('{"question": "q", "id": true}', "id 必须是字符串或整数"),
        ('{"question": "' + "问" * 4001 + '"}', "问题过长"),
    ],
)
def test_bad_lines_are_clear_chinese_errors(line: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_lines([line], "q.jsonl")


def test_repeated_ids_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="id 'a' 重复"):
        parse_lines(['{"id": "a", "question": "x"}', '{"id": "a", "question": "y"}'])
    with pytest.raises(ConfigError, match="没有问题"):
        parse_lines(["", "  "])
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"question": "\xff"}\n')
    with pytest.raises(ConfigError, match="不是 UTF-8"):
        load_questions(bad)
    with pytest.raises(ConfigError, match="无法读取问题文件"):
        load_questions(tmp_path / "missing.jsonl")


# -- one verdict -------------------------------------------------------------------------


def test_right_needs_keywords_and_a_gold_source() -> None:
    question = q(gold_docs=("01-patrol.md",), keywords=(("24",), ("点位",)))
    right = judge(question, Observation("全部 24 个点位。", cited=[PATROL], retrieved=[PATROL]))
    assert right.outcome == "right" and right.right and right.gold_cited
    assert right.precision == 1.0 and right.gold_rank == 1 and right.gold_score == 0.9
    # the right words from a document that is not gold
    other = judge(question, Observation("24 个点位", cited=[FAULTS]))
    assert other.outcome == "wrong" and other.gold_cited is False and other.precision == 0.0
    # a gold source but a keyword group missing
    half = judge(question, Observation("共 24 个", cited=[PATROL, FAULTS]))
    assert half.outcome == "wrong" and half.keywords_missing == [["点位"]]
    assert half.precision == 0.5 and half.cited_gold == 1


def test_keywords_ignore_spaces_and_alternatives() -> None:
    question = q(keywords=(("2 小时", "两小时"),))
    assert judge(question, Observation("每2小时一次", cited=[PATROL])).right
    assert judge(question, Observation("每两小时一次", cited=[PATROL])).right
    assert not judge(question, Observation("每 3 小时一次", cited=[PATROL])).right


def test_gold_passage_matches_a_chunk_from_any_document() -> None:
    question = q(gold_docs=("fire-extinguisher.md",), gold_passages=("拔掉 保险销",))
    web = chunk("3", "https://baike.example/wiki/x", "第一步 Pull，拔掉保险销；", source_type="web")
    assert judge(question, Observation("拔掉保险销", cited=[web])).gold_cited


def test_refusals_false_refusals_and_unanswerable() -> None:
    answerable = q(gold_docs=("01-patrol.md",))
    seen = Observation("根据现有资料无法确定", cited=[], probe=[FAULTS, PATROL])
    verdict = judge(answerable, seen)
    assert verdict.outcome == "false_refusal" and verdict.refused
    assert (verdict.gold_rank, verdict.gold_score) == (2, 0.9)
    unanswerable = q(answerable=False, category="close-unanswerable")
    assert judge(unanswerable, Observation("根据现有资料无法确定。")).outcome == "refused"
    answered = judge(unanswerable, Observation("物业须在 30 分钟内到场。", cited=[FAULTS]))
    assert answered.outcome == "answered_unanswerable" and not answered.right
    # a refusal text next to a citation is an answer, not a refusal
    assert not is_refusal("根据现有资料无法确定；另一部分见来源", 1)
    assert is_refusal("", 0)
    failed = judge(answerable, Observation("", error="服务中断（stream_interrupted）"))
    assert failed.outcome == "error" and not failed.refused and not failed.right


def test_where_a_refusal_was_decided() -> None:
    refused = "根据现有资料无法确定"
    question = q(gold_docs=("01-patrol.md",), keywords=(("24",), ("点位",)))
    web = chunk("3", "https://baike.example/x", "巡更点位一般有 24 个。", source_type="web")
    # no knowledge-base chunk passed on (a web page alone does not pass the gate)
    assert judge(question, Observation(refused, retrieved=[web])).refusal_stage == "gate"
    assert judge(question, Observation(refused)).refusal_stage == "gate"
    # chunks passed on, but without the answer: one keyword group missing from all of them
    short = chunk("1", "01-patrol.md", "夜间巡更必须走完全部点位。", 0.4)
    verdict = judge(question, Observation(refused, retrieved=[short, FAULTS]))
    assert verdict.refusal_stage == "retrieval"
    # the answer was passed on (here across a chunk and a web page): the answerer refused
    assert refusal_stage(question, Observation(refused, retrieved=[short, web])) == "answerer"
    verdict = judge(question, Observation(refused, retrieved=[PATROL]))
    assert verdict.refusal_stage == "answerer"
    assert verdict.as_dict()["refusal_label"] == "答案器：片段已交给它，仍拒答"
    # without keywords, chunks passed on: the answerer's rules
    assert refusal_stage(q(), Observation(refused, retrieved=[FAULTS])) == "answerer"
    # no refusal, or a failed run: no stage
    answered = judge(question, Observation("全部 24 个点位。", cited=[PATROL], retrieved=[PATROL]))
    assert answered.refusal_stage is None and answered.as_dict()["refusal_label"] is None
    failed = Observation("", retrieved=[PATROL], error="服务中断（stream_interrupted）")
    assert refusal_stage(question, failed) is None


def test_a_keyword_is_not_found_across_two_chunks() -> None:
    # one chunk ends in "点", the next begins with "位": no chunk holds "点位"
    question = q(keywords=(("点位",),))
    ends = chunk("1", "01-patrol.md", "夜间巡更共 24 个点", 0.4)
    begins = chunk("2", "01-patrol.md", "位置图贴在值班室。", 0.4)
    seen = Observation("根据现有资料无法确定", retrieved=[ends, begins])
    assert refusal_stage(question, seen) == "retrieval"


def test_law_articles_are_read_from_the_chunk_text() -> None:
    content = "消防法 > 第六章\n第六十条 单位违反本法规定……\n第六十一条 生产、储存……"
    assert chunk_articles(content) == ["第六十条", "第六十一条"]
    question = q(gold_articles=(GoldArticle("消防法(2021-04-29).md", "第六十条"),))
    law = chunk("4", "消防法(2021-04-29).md", content)
    wrong_law = chunk("5", "北京市消防条例.md", content)
    assert judge(question, Observation("五千元以上", cited=[law])).gold_cited
    assert not judge(question, Observation("五千元以上", cited=[wrong_law])).gold_cited
    assert gold_rank(question, [wrong_law, law]) == (2, 0.5)


def test_verifier_flags() -> None:
    assert verifier_flags(None) == (False, False, 0)
    assert verifier_flags({"weak": [], "checked": 2}) == (True, False, 0)
    assert verifier_flags({"weak": [{"sentence": 0, "id": "1"}]}) == (True, True, 1)
    assert verifier_flags({"weak": [], "answers_question": False}) == (True, True, 0)


# -- the totals and the report -----------------------------------------------------------


def test_aggregate_figures() -> None:
    flagged = {"weak": [{"sentence": 0, "id": "1"}]}
    clean = {"weak": []}
    gold = ("01-patrol.md",)
    verdicts = [
        judge(q(id="r", gold_docs=gold), Observation("24 个", cited=[PATROL], verification=clean)),
        judge(q(id="w", gold_docs=gold), Observation("30 分钟", [FAULTS], verification=flagged)),
        judge(q(id="f", gold_docs=gold), Observation("根据现有资料无法确定", probe=[PATROL])),
        judge(
            q(id="c", answerable=False, category="close-unanswerable"),
            Observation("根据现有资料无法确定"),
        ),
        judge(q(id="o", answerable=False, category="off-topic"), Observation("30 分钟", [FAULTS])),
    ]
    s = aggregate(verdicts)
    assert s["questions"] == 5 and s["right"]["n"] == 2
    assert s["answerable_right"] == {"n": 1, "of": 3, "share": 1 / 3}
    assert s["answerable_refused"]["n"] == 1
    assert s["close_unanswerable_refused"] == {"n": 1, "of": 1, "share": 1.0}
    assert s["off_topic_refused"] == {"n": 0, "of": 1, "share": 0.0}
    assert s["gold_cited"]["n"] == 1 and s["gold_cited"]["of"] == 3
    assert s["citation_precision"] == {"n": 1, "of": 2, "share": 0.5}
    assert s["verifier_flags_wrong"] == {"n": 1, "of": 1, "share": 1.0}
    assert s["verifier_flags_right"] == {"n": 0, "of": 1, "share": 0.0}
    assert s["false_refusals_gold_top3"] == {"n": 1, "of": 1, "share": 1.0}
    assert s["false_refusal_stages"] == {"gate": 1, "retrieval": 0, "answerer": 0}
    assert s["outcomes"]["answered_unanswerable"] == 1
    assert s["categories"]["off-topic"] == {"n": 1, "right": 0, "refused": 0, "share": 0.0}
    empty = aggregate([])
    assert empty["right"]["share"] is None and empty["latency_ms"]["median"] is None


def test_html_escapes_everything_from_the_run() -> None:
    hostile = "<img src=x onerror=alert(1)>"
    evil = chunk("1", hostile, "x", title=hostile)
    verdict = judge(
        q(id=hostile, question=hostile, gold_docs=("a.md",)), Observation(hostile, [evil])
    )
    document = report_document(
        [verdict], target={"mode": hostile}, questions_file=hostile, generated_at="now"
    )
    page = render_html(document)
    assert hostile not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert page.count('data-chart="') == 4 and "<script" not in page
    assert json.loads(json.dumps(document))["verdicts"][0]["outcome_label"] == "答错"


def test_the_report_says_where_a_refusal_was_decided() -> None:
    verdict = judge(q(gold_docs=("01-patrol.md",)), Observation("根据现有资料无法确定"))
    page = render_html(report_document([verdict], target={}, questions_file="", generated_at=""))
    assert '<div class="stage">相关性闸门：没有知识库片段通过</div>' in page
    answered = judge(q(), Observation("全部 24 个点位。", cited=[PATROL], retrieved=[PATROL]))
    page = render_html(report_document([answered], target={}, questions_file="", generated_at=""))
    assert 'class="stage"' not in page


def test_oversized_files_and_too_many_questions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gcite.eval.questions as questions

    path = tmp_path / "big.jsonl"
    path.write_text('{"question": "一"}\n{"question": "二"}\n', encoding="utf-8")
    monkeypatch.setattr(questions, "MAX_FILE_BYTES", 10)
    with pytest.raises(ConfigError, match="问题文件过大"):
        load_questions(path)
    monkeypatch.setattr(questions, "MAX_FILE_BYTES", 1000)
    monkeypatch.setattr(questions, "MAX_QUESTIONS", 1)
    with pytest.raises(ConfigError, match="问题过多"):
        load_questions(path)
