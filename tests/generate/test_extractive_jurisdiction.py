"""The offline answerer between a national law and a place's regulation saying the same:
one jurisdiction per answer, the one the retrieval ranked first (it weighs the places the
question names, gcite.knowledge.jurisdiction)."""

from __future__ import annotations

from typing import Any

import pytest

from gcite.generate.extractive import (
    FIRST_RANK_BONUS,
    NATIONAL_MARGIN,
    SEMANTIC_PREFERENCE,
    ExtractiveBackend,
    _national_first,
    _Unit,
    asked_of,
    choose_units,
)
from gcite.knowledge.embed import UseEmbedder
from gcite.verify import SupportModel
from gcite.verify.text import Sentence

RULE = "第十二条 供暖单位应当在每年供暖期开始前十五日完成供暖设施的检修。"
LOCAL_RULE = "第十五条 本市供暖单位应当在每年供暖期开始前十五日完成供暖设施的检修。"
OTHER_RULE = "第十三条 供暖单位应当在每年供暖期开始前十日向用户公告供暖起止日期。"


@pytest.fixture(scope="module")
def backend() -> ExtractiveBackend:
    answerer = ExtractiveBackend(support=SupportModel(UseEmbedder()))
    answerer.warm_up()
    return answerer


def chunk(cid: str, content: str, title: str, score: float) -> dict[str, Any]:
    return {
        "id": cid,
        "content": content,
        "document_title": title,
        "source_type": "rag",
        "score": score,
    }


QUESTION = "供暖设施的检修要在供暖期开始前多少天完成"


def test_a_place_regulation_saying_the_same_is_not_cited_beside_the_national_one(
    backend: ExtractiveBackend,
) -> None:
    chunks = [
        chunk("1", RULE, "供暖管理办法", 0.95),
        chunk("2", LOCAL_RULE, "北京市供暖条例", 0.93),
    ]
    answer = backend.answer(QUESTION, chunks)
    assert "十五日" in answer and "[C:1]" in answer and "[C:2]" not in answer


def test_the_jurisdiction_the_retrieval_ranked_first_answers(backend: ExtractiveBackend) -> None:
    # the city's regulation first (a question naming the city): it answers alone
    chunks = [
        chunk("1", LOCAL_RULE, "北京市供暖条例", 0.95),
        chunk("2", RULE, "供暖管理办法", 0.9),
    ]
    answer = backend.answer("北京" + QUESTION, chunks)
    assert "[C:1]" in answer and "[C:2]" not in answer


def test_two_documents_of_one_jurisdiction_answer_together_when_the_second_adds_words(
    backend: ExtractiveBackend,
) -> None:
    question = "供暖设施和管网的检修要在供暖期开始前多少天完成"
    mains = "第九条 供热管网的检修应当在每年供暖期开始前十五日完成。"  # "管网": asked, new
    chunks = [chunk("1", RULE, "供暖管理办法", 0.95), chunk("2", mains, "城镇供热条例", 0.93)]
    answer = backend.answer(question, chunks)
    assert "[C:1]" in answer and "[C:2]" in answer


@pytest.mark.parametrize("title", ["城镇供暖条例", "供暖管理办法"])
def test_a_second_chunk_saying_the_same_in_no_more_of_the_words_is_not_cited(
    backend: ExtractiveBackend, title: str
) -> None:
    # a regulation restating the law's rule, or another article of the same law: one
    # citation answers
    chunks = [chunk("1", RULE, "供暖管理办法", 0.95), chunk("2", LOCAL_RULE, title, 0.93)]
    answer = backend.answer(QUESTION, chunks)
    assert "[C:1]" in answer and "[C:2]" not in answer


def test_a_clearly_better_sentence_of_another_jurisdiction_keeps_its_place(
    backend: ExtractiveBackend,
) -> None:
    # the retrieval ranked the national rule first, but only the city's chunk says it:
    # the sentences decide (the swap is for near-ties only)
    chunks = [
        chunk("1", OTHER_RULE, "供暖管理办法", 0.95),
        chunk("2", RULE, "北京市供暖条例", 0.9),
    ]
    answer = backend.answer(QUESTION, chunks)
    assert "十五日" in answer and "[C:2]" in answer


def test_near_tied_jurisdictions_follow_the_retrieval(backend: ExtractiveBackend) -> None:
    # the city's title holds a word of the question, so its chunk scores a little
    # higher on the sentences; the retrieval ranked the national rule first: it answers
    chunks = [
        chunk("1", RULE, "城镇供热管理办法", 0.95),
        chunk("2", LOCAL_RULE, "北京市供暖条例", 0.93),
    ]
    answer = backend.answer(QUESTION, chunks)
    assert answer.startswith("第十二条") and "[C:1]" in answer and "[C:2]" not in answer


def _unit(chunk_id: str, rank: int, semantic: float, title: str = "设备安全条例") -> Any:
    text = "员工发现设备漏电隐患，应当立即向现场负责人报告。"
    unit = _Unit(
        chunk_id,
        rank,
        0,
        Sentence(text, 0, len(text)),
        text,
        0.8,
        0.8,
        0.8,
        False,
        title=title,
        source="rag",
    )
    unit.semantic = semantic
    unit.relevance = 0.8
    return unit


def test_where_the_words_tie_the_closer_meaning_answers() -> None:
    asked = asked_of("发现设备漏电隐患向谁报告", {"设备": 1.0, "漏电": 1.0}, semantic=True)
    # the same words; the second chunk closer in meaning by more than the first rank's
    # bonus is worth: it answers; by less: the retrieval's first chunk answers
    gap = (FIRST_RANK_BONUS + 0.01) / SEMANTIC_PREFERENCE
    closer = choose_units([_unit("1", 0, 0.3), _unit("2", 1, 0.3 + gap)], asked, 1)
    assert [u.chunk_id for u in closer] == ["2"]
    gap = (FIRST_RANK_BONUS - 0.01) / SEMANTIC_PREFERENCE
    first = choose_units([_unit("1", 0, 0.3), _unit("2", 1, 0.3 + gap)], asked, 1)
    assert [u.chunk_id for u in first] == ["1"]


def _led(question: str, local_score: float, national_score: float) -> str:
    asked = asked_of(question, {"设备": 1.0, "漏电": 1.0}, semantic=True)
    local = (local_score, "1", _unit("1", 0, 0.3, "上海市设备安全条例"))
    national = (national_score, "2", _unit("2", 1, 0.3, "设备安全条例"))
    ranked = _national_first([local, national], asked)
    return ranked[0][1]


def test_a_question_naming_no_place_is_led_by_the_national_rule() -> None:
    # the city's regulation leads by just under the margin: the national rule leads
    assert _led("发现设备漏电隐患向谁报告", 0.9 + NATIONAL_MARGIN - 0.01, 0.9) == "2"
    # by the margin or more: the city's regulation keeps its place
    assert _led("发现设备漏电隐患向谁报告", 0.9 + NATIONAL_MARGIN + 0.01, 0.9) == "1"


def test_a_question_naming_the_place_keeps_its_regulation_first() -> None:
    assert _led("上海发现设备漏电隐患向谁报告", 0.95, 0.9) == "1"


def test_a_web_page_is_no_national_rule() -> None:
    # a knowledge base of one city's regulations, a web page beside them: the page
    # names no place, but it does not hold everywhere; the retrieval's order stands
    asked = asked_of("发现设备漏电隐患向谁报告", {"设备": 1.0, "漏电": 1.0}, semantic=True)
    local = (0.95, "1", _unit("1", 0, 0.3, "北京市设备安全条例"))
    page = _unit("2", 1, 0.3, "设备漏电怎么办")
    page.source = "web"
    assert [r[1] for r in _national_first([local, (0.9, "2", page)], asked)] == ["1", "2"]
    # with a national regulation too, it leads; the page keeps its place after the city's
    national = (0.9, "3", _unit("3", 2, 0.3, "设备安全条例"))
    ranked = _national_first([local, (0.92, "2", page), national], asked)
    assert [r[1] for r in ranked] == ["3", "1", "2"]


def test_any_place_a_regulation_is_of_counts_as_named() -> None:
    # a city the answerer knows no pattern for: named by its regulation's title
    asked = asked_of("苏州发现设备漏电隐患向谁报告", {"设备": 1.0, "漏电": 1.0}, semantic=True)
    local = (0.95, "1", _unit("1", 0, 0.3, "苏州市设备安全条例"))
    national = (0.9, "2", _unit("2", 1, 0.3, "设备安全条例"))
    assert _national_first([local, national], asked)[0][1] == "1"


def test_a_city_regulation_a_little_ahead_does_not_answer_a_question_naming_no_place(
    backend: ExtractiveBackend,
) -> None:
    # the retrieval ranked the city's regulation first and its sentence scores a little
    # higher (one more word): the question names no place, the national rule answers
    local = "第九条 本市供暖单位应当在每年供暖期开始前十五日完成全部供暖设施的检修。"
    chunks = [
        chunk("1", local, "北京市供暖条例", 0.95),
        chunk("2", RULE, "供暖管理办法", 0.9),
    ]
    answer = backend.answer(QUESTION, chunks)
    assert answer.startswith("第十二条") and "[C:2]" in answer and "[C:1]" not in answer


def test_a_better_worded_regulation_of_another_place_does_not_replace_the_answer(
    backend: ExtractiveBackend,
) -> None:
    # the question names Shanghai; Beijing's regulation, ranked first, says it in more
    # of the question's words: the check for a better-ranked answer does not bring it back
    beijing = (
        "北京市绿化条例 > 第三章 养护\n"
        "第二十条 在本市绿地内焚烧树叶、垃圾的，须经绿化管理部门批准。"
    )
    shanghai = "上海市绿化条例 > 第三章 养护\n第二十一条 禁止焚烧树叶。"
    chunks = [
        chunk("1", beijing, "北京市绿化条例", 0.95),
        chunk("2", shanghai, "上海市绿化条例", 0.9),
    ]
    answer = backend.answer("在上海绿地内能不能焚烧树叶垃圾", chunks)
    assert "[C:1]" not in answer


# two cities' regulations on one subject: Beijing's (a place the answerer has a pattern
# for) says it in more of the question's words; Xiamen's is read from its title alone
BEIJING_GREEN = (
    "北京市绿化条例 > 第三章 养护\n第二十条 在本市绿地内焚烧树叶、垃圾的，须经绿化管理部门批准。"
)
XIAMEN_GREEN = "厦门市绿化条例 > 第三章 养护\n第二十一条 禁止焚烧树叶。"
GREEN_CHUNKS = [
    chunk("1", BEIJING_GREEN, "北京市绿化条例", 0.95),
    chunk("2", XIAMEN_GREEN, "厦门市绿化条例", 0.9),
]


def test_a_question_naming_a_city_known_by_its_title_is_answered_from_its_regulation(
    backend: ExtractiveBackend,
) -> None:
    answer = backend.answer("在厦门绿地内能不能焚烧树叶垃圾", GREEN_CHUNKS)
    assert answer.startswith("第二十一条") and "[C:2]" in answer and "[C:1]" not in answer


def test_a_question_naming_a_listed_city_or_none_is_answered_as_before(
    backend: ExtractiveBackend,
) -> None:
    for question in ("在北京绿地内能不能焚烧树叶垃圾", "在绿地内能不能焚烧树叶垃圾"):
        answer = backend.answer(question, GREEN_CHUNKS)
        assert answer.startswith("第二十条") and "[C:1]" in answer and "[C:2]" not in answer


def test_a_city_known_by_its_title_does_not_answer_for_a_listed_one(
    backend: ExtractiveBackend,
) -> None:
    # Xiamen's regulation ranked first and better worded: a question naming Beijing is
    # answered from Beijing's
    xiamen = XIAMEN_GREEN.replace("禁止焚烧树叶", "在本市绿地内焚烧树叶、垃圾的，须经园林部门批准")
    beijing = BEIJING_GREEN.replace(
        "在本市绿地内焚烧树叶、垃圾的，须经绿化管理部门批准", "禁止焚烧树叶"
    )
    chunks = [
        chunk("1", xiamen, "厦门市绿化条例", 0.95),
        chunk("2", beijing, "北京市绿化条例", 0.9),
    ]
    answer = backend.answer("在北京绿地内能不能焚烧树叶垃圾", chunks)
    assert "禁止焚烧树叶[C:2]" in answer and "[C:1]" not in answer


def test_a_place_a_regulation_is_of_prefers_it_and_drops_the_other_place() -> None:
    asked = asked_of("苏州发现设备漏电隐患向谁报告", {"设备": 1.0, "漏电": 1.0}, semantic=True)
    assert not asked.places  # no pattern for Suzhou: read from the titles
    other = _unit("1", 0, 0.3, "佛山市设备安全条例")
    own = _unit("2", 1, 0.3, "苏州市设备安全条例")
    assert [u.chunk_id for u in choose_units([other, own], asked, 1)] == ["2"]
    # a question naming no place: the retrieval's first chunk answers, as before
    plain = asked_of("发现设备漏电隐患向谁报告", {"设备": 1.0, "漏电": 1.0}, semantic=True)
    other = _unit("1", 0, 0.3, "佛山市设备安全条例")
    own = _unit("2", 1, 0.3, "苏州市设备安全条例")
    assert [u.chunk_id for u in choose_units([other, own], plain, 1)] == ["1"]
