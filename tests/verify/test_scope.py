"""Scope: the sentences that may answer a question at all (penalty provisions, other
places' regulations), and the verifier's check for a better-ranked answer keeping to it."""

from __future__ import annotations

from typing import Any

from gcite.verify.asks import answer_check, outranked_by
from gcite.verify.scope import in_scope
from gcite.verify.text import Sentence

RULE = "某市市容管理条例 > 第三章 摊点管理\n第十二条 禁止擅自摆摊。"
PENALTY = (
    "某市市容管理条例 > 第五章 法律责任\n"
    "第三十条 违反本条例第十二条规定，在道路两侧无照摆摊经营的，由城市管理部门责令改正，"
    "没收用于无照摆摊经营的工具和物品。"
)


def _sentence(context: str) -> Sentence:
    text = "第三十条 在绿地内焚烧树叶的，处二百元罚款。"
    return Sentence(text, 0, len(text), context=context)


def test_a_penalty_provision_answers_only_a_question_about_a_sanction() -> None:
    penalty = _sentence("某市绿化条例 > 第六章 法律责任")
    rule = _sentence("某市绿化条例 > 第三章 绿化养护")
    assert not in_scope("绿地里能不能焚烧树叶", [])("某市绿化条例", penalty, True)
    assert in_scope("绿地里能不能焚烧树叶", [])("某市绿化条例", rule, True)
    assert in_scope("绿地里焚烧树叶罚多少", [])("某市绿化条例", penalty, True)


def test_a_handbook_chapter_of_penalties_is_no_penalty_provision() -> None:
    # a company handbook's chapter 罚则 states its penalties as rules of their own
    text = "员工一个月内迟到三次的，按旷工半天处理。"
    chapter = Sentence(text, 0, len(text), context="员工手册 > 第五章 罚则")
    assert in_scope("一个月迟到几次算旷工", [])("员工手册", chapter, False)


def test_a_question_naming_a_place_is_not_answered_by_another_place() -> None:
    titles = ["北京市绿化条例", "上海市绿化条例", "城市绿化条例"]
    rule = _sentence("第三章 绿化养护")
    named = in_scope("上海绿地里能不能焚烧树叶", titles)
    assert not named("北京市绿化条例", rule, True)
    assert named("上海市绿化条例", rule, True) and named("城市绿化条例", rule, True)
    # a question naming no place: any place's regulation may answer
    assert in_scope("绿地里能不能焚烧树叶", titles)("北京市绿化条例", rule, True)


def _chunk(cid: str, content: str) -> dict[str, Any]:
    return {
        "id": cid,
        "content": content,
        "document_title": "某市市容管理条例",
        "source_type": "rag",
    }


def test_an_answer_quoting_the_rule_is_not_outranked_by_the_penalty_provision() -> None:
    chunks = [_chunk("1", PENALTY), _chunk("2", RULE)]
    question = "在道路两侧无照摆摊经营行不行"
    checks = answer_check(question, "第十二条 禁止擅自摆摊。")
    assert outranked_by(question, checks, {"2"}, chunks) is None
    # asked about the sanction, the penalty provision is the better answer
    question = "在道路两侧无照摆摊经营会被没收什么"
    checks = answer_check(question, "第十二条 禁止擅自摆摊。")
    assert outranked_by(question, checks, {"2"}, chunks) == "1"


HANDBOOK_RULE = "员工手册 > 第二章 考勤\n员工应按时打卡上班，每天 9:00 前到岗。"
HANDBOOK_PENALTY = "员工手册 > 第五章 罚则\n员工一个月内迟到满三次的，按旷工半天处理。"


def test_an_answer_from_a_handbook_chapter_of_penalties_is_not_outranked_away() -> None:
    # the chapter's sentence ranked above answers better than the cited attendance rule
    chunks = [
        {**_chunk("1", HANDBOOK_PENALTY), "document_title": "员工手册"},
        {**_chunk("2", HANDBOOK_RULE), "document_title": "员工手册"},
    ]
    question = "员工一个月内迟到几次按旷工处理"
    checks = answer_check(question, "员工应按时打卡上班，每天 9:00 前到岗。")
    assert outranked_by(question, checks, {"2"}, chunks) == "1"
