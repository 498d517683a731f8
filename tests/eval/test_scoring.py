"""Scoring of ``gcite eval``: the question file, one verdict, the totals, the HTML (pure)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gcite.cli.eval import _summary_lines
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


PATROL_INTRO = chunk("6", "01-patrol.md", "本规范适用于大厦全体巡更人员。", 0.95)
PATROL_NIGHT = chunk("7", "01-patrol.md", "夜间巡更每 1 小时一次，共设 24 个巡更点位。", 0.41)
REFUSED = "根据现有资料无法确定"


def test_gold_rank_is_the_chunk_holding_the_passage() -> None:
    question = q(gold_docs=("01-patrol.md",), gold_passages=("共设 24 个 巡更点位",))
    # the gold document's first chunk ranks 1, the chunk holding the passage 3
    seen = Observation(REFUSED, probe=[PATROL_INTRO, FAULTS, PATROL_NIGHT])
    verdict = judge(question, seen)
    assert verdict.outcome == "false_refusal" and verdict.gold_rank_by == "passage"
    assert (verdict.gold_rank, verdict.gold_score) == (3, 0.41)
    assert (verdict.gold_doc_rank, verdict.gold_doc_score) == (1, 0.95)
    # the passage chunk not ranked at all: no gold rank, the document's rank still given
    missed = judge(question, Observation(REFUSED, probe=[FAULTS, PATROL_INTRO]))
    assert (missed.gold_rank, missed.gold_score) == (None, None)
    assert (missed.gold_doc_rank, missed.gold_doc_score) == (2, 0.95)
    as_json = missed.as_dict()
    assert as_json["gold_rank"] is None and as_json["gold_doc_rank"] == 2
    # without a probe the run's own chunks are ranked (web pages are not counted)
    web = chunk("8", "https://baike.example/x", "共设 24 个巡更点位", source_type="web")
    remote = judge(question, Observation(REFUSED, retrieved=[web, PATROL_INTRO, PATROL_NIGHT]))
    assert (remote.gold_rank, remote.gold_doc_rank) == (2, 1)


def test_passages_without_gold_documents_rank_the_passage_document() -> None:
    question = q(gold_passages=("每 1 小时一次",))
    verdict = judge(question, Observation(REFUSED, probe=[FAULTS, PATROL_INTRO, PATROL_NIGHT]))
    assert (verdict.gold_rank, verdict.gold_doc_rank) == (3, 2)
    nowhere = judge(question, Observation(REFUSED, probe=[FAULTS, PATROL_INTRO]))
    assert (nowhere.gold_rank, nowhere.gold_doc_rank) == (None, None)


def test_gold_documents_alone_rank_the_first_chunk_of_the_document() -> None:
    verdict = judge(q(gold_docs=("01-patrol.md",)), Observation(REFUSED, probe=[FAULTS, PATROL]))
    assert verdict.gold_rank_by == "document" and verdict.gold_passage_cited is None
    assert (verdict.gold_rank, verdict.gold_doc_rank) == (2, 2)
    unanswerable = judge(q(answerable=False), Observation(REFUSED, probe=[PATROL]))
    assert unanswerable.gold_rank_by is None and unanswerable.gold_doc_rank is None


def test_law_gold_rank_is_the_chunk_holding_the_article() -> None:
    law = "消防法(2021-04-29).md"
    question = q(gold_articles=(GoldArticle(law, "第六十条"),))
    other_article = chunk("4", law, "消防法 > 第五章\n第二十八条 任何单位、个人不得……", 0.8)
    article = chunk("5", law, "消防法 > 第六章\n第六十条 单位违反本法规定……", 0.5)
    verdict = judge(question, Observation(REFUSED, probe=[other_article, article, FAULTS]))
    assert verdict.gold_rank_by == "article"
    assert (verdict.gold_rank, verdict.gold_score) == (2, 0.5)
    assert (verdict.gold_doc_rank, verdict.gold_doc_score) == (1, 0.8)
    # citing another article of the gold law is not gold, at either level (as before)
    cited = judge(question, Observation("五千元以上", cited=[other_article]))
    assert cited.gold_cited is False and cited.gold_passage_cited is False


def test_gold_cited_counts_any_chunk_of_the_gold_document_passage_cited_does_not() -> None:
    question = q(gold_docs=("01-patrol.md",), gold_passages=("共设 24 个巡更点位",))
    intro = judge(question, Observation("适用于全体巡更人员。", cited=[PATROL_INTRO]))
    assert intro.gold_cited is True and intro.precision == 1.0  # unchanged definitions
    assert intro.gold_passage_cited is False
    assert intro.sources[0]["gold"] is True and intro.sources[0]["gold_passage"] is False
    night = judge(question, Observation("共设 24 个巡更点位。", cited=[PATROL_NIGHT]))
    assert night.gold_cited is True and night.gold_passage_cited is True
    s = aggregate([intro, night, judge(q(gold_docs=("01-patrol.md",)), Observation("x", [PATROL]))])
    assert s["gold_cited"] == {"n": 3, "of": 3, "share": 1.0}
    assert s["gold_passage_cited"] == {"n": 1, "of": 2, "share": 0.5}


def test_false_refusal_figures_give_both_ranks() -> None:
    question = q(gold_docs=("01-patrol.md",), gold_passages=("共设 24 个巡更点位",))
    verdicts = [
        judge(
            q(id="third", **_gold(question)),
            Observation(REFUSED, probe=[PATROL_INTRO, FAULTS, PATROL_NIGHT]),
        ),
        judge(
            q(id="missed", **_gold(question)), Observation(REFUSED, probe=[PATROL_INTRO, FAULTS])
        ),
        judge(
            q(id="fifth", **_gold(question)),
            Observation(REFUSED, probe=[PATROL_INTRO] + [FAULTS] * 3 + [PATROL_NIGHT]),
        ),
        judge(q(id="kw", keywords=(("24",),)), Observation(REFUSED)),
    ]
    s = aggregate(verdicts)
    assert s["false_refusals_gold_top3"] == {"n": 1, "of": 4, "share": 0.25}
    assert s["false_refusals_gold_doc_top3"] == {"n": 3, "of": 4, "share": 0.75}
    assert s["false_refusal_gold_ranks"] == {
        "chunk": {"1": 0, "2-3": 1, "4-10": 1, "11+": 0, "none": 1},
        "document": {"1": 3, "2-3": 0, "4-10": 0, "11+": 0, "none": 0},
    }
    lines = _summary_lines(s)
    assert "误拒中金标片段排在前 3：1/4（25%），金标文档排在前 3：3/4（75%）" in lines
    assert (
        "误拒的金标片段排在：第 1 名 0，第 2–3 名 1，第 4–10 名 1，第 11 名及以后 0，未排上 1；"
        "其金标文档排在：第 1 名 3，第 2–3 名 0，第 4–10 名 0，第 11 名及以后 0，未排上 0"
    ) in lines
    assert "引用了金标片段：0/3（0%）" in lines  # over the questions listing passages
    page = render_html(report_document(verdicts, target={}, questions_file="", generated_at=""))
    assert '<p class="meta" id="false-refusal-ranks">误拒的金标片段排在：第 1 名 0，' in page
    assert (
        '<td class="rank" data-rank="3" data-doc-rank="1">'
        "金标片段 第 3 名（0.410）<br>金标文档 第 1 名（0.950）</td>"
    ) in page
    assert '<td class="rank" data-rank="" data-doc-rank="1">金标片段 未排上<br>' in page
    # no false refusal with gold sources: no rank line
    assert not any(line.startswith("误拒的金标片段") for line in _summary_lines(aggregate([])))


def _gold(question: EvalQuestion) -> dict[str, Any]:
    return {"gold_docs": question.gold_docs, "gold_passages": question.gold_passages}


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
