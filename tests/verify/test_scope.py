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
    assert not in_scope("绿地里能不能焚烧树叶", [])("某市绿化条例", penalty)
    assert in_scope("绿地里能不能焚烧树叶", [])("某市绿化条例", rule)
    assert in_scope("绿地里焚烧树叶罚多少", [])("某市绿化条例", penalty)


def test_a_question_naming_a_place_is_not_answered_by_another_place() -> None:
    titles = ["北京市绿化条例", "上海市绿化条例", "城市绿化条例"]
    rule = _sentence("第三章 绿化养护")
    named = in_scope("上海绿地里能不能焚烧树叶", titles)
    assert not named("北京市绿化条例", rule)
    assert named("上海市绿化条例", rule) and named("城市绿化条例", rule)
    # a question naming no place: any place's regulation may answer
    assert in_scope("绿地里能不能焚烧树叶", titles)("北京市绿化条例", rule)


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
