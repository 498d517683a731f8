"""The offline answerer and a law's penalty chapter: a question about the rule is not
answered by the penalty provision repeating its words (gcite.verify.sanctions)."""

from __future__ import annotations

from typing import Any

import pytest

from gcite.generate.backends import WEAK_KEY
from gcite.generate.extractive import ExtractiveBackend
from gcite.knowledge.embed import UseEmbedder
from gcite.verify import SupportModel

TITLE = "某市绿化管理条例"
RULE = "某市绿化管理条例 > 第三章 绿化养护\n第二十条 任何单位和个人不得在绿地内焚烧树叶、垃圾。"
PENALTY = (
    "某市绿化管理条例 > 第六章 法律责任\n"
    "第四十一条 违反本条例第二十条规定，在绿地内焚烧树叶、垃圾的，由绿化管理部门责令改正，"
    "处二百元以上五百元以下罚款。"
)


@pytest.fixture(scope="module")
def backend() -> ExtractiveBackend:
    answerer = ExtractiveBackend(support=SupportModel(UseEmbedder()))
    answerer.warm_up()
    return answerer


def chunk(cid: str, content: str, score: float) -> dict[str, Any]:
    return {
        "id": cid,
        "content": content,
        "document_title": TITLE,
        "source_type": "rag",
        "score": score,
    }


CHUNKS = [chunk("1", PENALTY, 0.95), chunk("2", RULE, 0.9)]


def test_a_question_about_the_rule_is_answered_by_the_rule(backend: ExtractiveBackend) -> None:
    answer = backend.answer("绿地里能不能焚烧树叶垃圾", CHUNKS)
    assert "[C:2]" in answer and "[C:1]" not in answer


def test_a_question_about_the_penalty_is_answered_by_the_penalty(
    backend: ExtractiveBackend,
) -> None:
    answer = backend.answer("在绿地里焚烧树叶垃圾会被罚多少钱", CHUNKS)
    assert "[C:1]" in answer and "罚款" in answer


def test_only_the_penalty_provision_retrieved_is_no_answer_to_the_rule(
    backend: ExtractiveBackend,
) -> None:
    answer = backend.answer("绿地里能不能焚烧树叶垃圾", [chunk("1", PENALTY, 0.95)])
    assert answer == "根据现有资料无法确定"


def test_a_question_about_what_befalls_a_wrongdoer_is_answered_by_the_penalty(
    backend: ExtractiveBackend,
) -> None:
    rule = "某市市容管理条例 > 第三章 摊点管理\n第十二条 任何单位和个人不得在道路两侧无照摆摊经营。"
    penalty = (
        "某市市容管理条例 > 第五章 法律责任\n"
        "第三十条 违反本条例第十二条规定，在道路两侧无照摆摊经营的，由城市管理部门责令改正，"
        "没收用于无照摆摊经营的工具和物品。"
    )
    chunks = [chunk("1", penalty, 0.95), chunk("2", rule, 0.9)]
    answer = backend.answer("在道路两侧无照摆摊经营被查到会有啥下场", chunks)
    assert "[C:1]" in answer and "没收" in answer


def test_a_better_worded_penalty_provision_does_not_replace_the_rule(
    backend: ExtractiveBackend,
) -> None:
    # the penalty provision ranked first repeats the question's words, the rule says it
    # in fewer: the check for a better-ranked answer does not bring the penalty back
    rule = "某市市容管理条例 > 第三章 摊点管理\n第十二条 禁止擅自摆摊。"
    penalty = (
        "某市市容管理条例 > 第五章 法律责任\n"
        "第三十条 违反本条例第十二条规定，在道路两侧无照摆摊经营的，由城市管理部门责令改正，"
        "没收用于无照摆摊经营的工具和物品。"
    )
    chunks = [chunk("1", penalty, 0.95), chunk("2", rule, 0.9)]
    answer = backend.answer("在道路两侧无照摆摊经营行不行", chunks)
    assert "[C:1]" not in answer


def _weak(content: str) -> dict[str, Any]:
    return {**chunk("2", content, 0.45), WEAK_KEY: True}


def test_a_penalty_provision_above_the_threshold_vouches_for_its_rule(
    backend: ExtractiveBackend,
) -> None:
    question = "小区绿地上烧点落叶行不行"  # few of the rule's words
    # the rule alone, below the retrieval's threshold: too little evidence
    assert backend.answer(question, [_weak(RULE)]) == "根据现有资料无法确定"
    # its penalty provision scored above the threshold: the rule answers
    answer = backend.answer(question, [chunk("1", PENALTY, 0.95), _weak(RULE)])
    assert "[C:2]" in answer and "[C:1]" not in answer
    # a penalty provision below the threshold vouches for nothing
    weak_penalty = {**chunk("1", PENALTY, 0.45), WEAK_KEY: True}
    assert backend.answer(question, [weak_penalty, _weak(RULE)]) == "根据现有资料无法确定"


def test_a_penalty_provision_vouches_only_for_the_sentences_restating_its_words() -> None:
    from gcite.generate.extractive import _Unit, _vouch_for_rules, asked_of
    from gcite.verify.sanctions import in_sanctions
    from gcite.verify.text import sentences

    definition = "某市绿化管理条例 > 第七章 附则\n第五十条 本条例所称绿地，是指公园和街头绿地。"
    other_law = "某市市容管理条例 > 第三章 摊点管理\n第十二条 不得在绿地内焚烧树叶。"
    weights = {"绿地": 1.0, "焚烧": 1.0, "树叶": 1.0, "行不行": 0.5}
    asked = asked_of("绿地里焚烧树叶行不行", weights, semantic=True)

    def units(content: str, title: str, weak: bool) -> list[_Unit]:
        body = [s for s in sentences(content) if not s.heading]
        return [
            _Unit(
                "1",
                0,
                k,
                s,
                s.text,
                0.5,
                0.5,
                0.5,
                False,
                title=title,
                weak=weak,
                provision=True,
                penalty=in_sanctions(s.context),
            )
            for k, s in enumerate(body)
        ]

    penalty = units(PENALTY, TITLE, weak=False)
    rule = units(RULE, TITLE, weak=True)
    defined = units(definition, TITLE, weak=True)
    elsewhere = units(other_law, "某市市容管理条例", weak=True)
    _vouch_for_rules([*penalty, *rule, *defined, *elsewhere], asked)
    # the rule holds every word of the question the provision holds: vouched for
    assert not any(u.weak for u in rule)
    # a sentence of the same law holding only some of them, or another law's: not
    assert all(u.weak for u in defined) and all(u.weak for u in elsewhere)
    # a question about the sanction: nothing is vouched for
    rule = units(RULE, TITLE, weak=True)
    _vouch_for_rules([*penalty, *rule], asked_of("焚烧树叶罚多少", weights, semantic=True))
    assert all(u.weak for u in rule)


def test_a_handbook_chapter_of_penalties_answers_like_any_other(
    backend: ExtractiveBackend,
) -> None:
    # a company handbook's chapter 罚则 is no law's penalty chapter: its sentences are the
    # rules themselves, restating none of an earlier chapter
    handbook = {
        "id": "1",
        "content": "员工手册 > 第五章 罚则\n员工一个月内迟到满三次的，按旷工半天处理。",
        "document_title": "员工手册",
        "source_type": "rag",
        "score": 0.9,
    }
    answer = backend.answer("一个月迟到几次算旷工", [handbook])
    assert "[C:1]" in answer and "三次" in answer
    # the same chapter of a law's articles stays a penalty provision
    law = {**handbook, "content": "某某条例 > 第五章 罚则\n第三十条 迟到满三次的，处警告。"}
    assert backend.answer("一个月迟到几次算旷工", [law]) == "根据现有资料无法确定"
