"""The offline answerer and a law's enumerated items: an item whose list heading states
the value asked ("有下列行为之一的，处……罚款：" / "（一）……的；") is quoted with it."""

from __future__ import annotations

from typing import Any

import pytest

from gcite.generate.extractive import ExtractiveBackend, Pick, _list_heads, compose_answer
from gcite.knowledge.embed import UseEmbedder
from gcite.verify import SupportModel
from gcite.verify.text import sentences

TITLE = "某市绿化管理条例"
HEADING = "第三十条 违反本条例规定，有下列行为之一的，处一千元以上五千元以下罚款："
LIST = (
    "某市绿化管理条例 > 第六章 法律责任\n"
    f"{HEADING}\n"
    "（一）在绿地内焚烧树叶、垃圾的；\n"
    "（二）擅自砍伐、迁移城市树木的。\n"
)


@pytest.fixture(scope="module")
def backend() -> ExtractiveBackend:
    answerer = ExtractiveBackend(support=SupportModel(UseEmbedder()))
    answerer.warm_up()
    return answerer


def chunk(content: str) -> dict[str, Any]:
    return {
        "id": "1",
        "content": content,
        "document_title": TITLE,
        "source_type": "rag",
        "score": 0.9,
    }


def test_an_item_is_quoted_with_the_heading_stating_the_sum(backend: ExtractiveBackend) -> None:
    answer = backend.answer("在绿地里焚烧树叶垃圾要罚多少钱", [chunk(LIST)])
    assert answer.startswith(
        "第三十条 违反本条例规定，有下列行为之一的，处一千元以上五千元以下罚款[C:1]："
    )
    assert "（一）在绿地内焚烧树叶、垃圾的[C:1]" in answer


def test_an_item_stating_the_sum_itself_needs_no_heading(backend: ExtractiveBackend) -> None:
    content = (
        "某市绿化管理条例 > 第六章 法律责任\n"
        "第三十条 违反本条例规定的，按照下列规定处罚：\n"
        "（一）在绿地内焚烧树叶、垃圾的，处二百元罚款；\n"
        "（二）擅自砍伐、迁移城市树木的，处五千元罚款。\n"
    )
    answer = backend.answer("在绿地里焚烧树叶垃圾要罚多少钱", [chunk(content)])
    assert answer.startswith("（一）在绿地内焚烧树叶、垃圾的，处二百元罚款[C:1]")
    assert "按照下列规定处罚" not in answer


def test_a_question_asking_no_value_does_not_take_the_heading(
    backend: ExtractiveBackend,
) -> None:
    content = (
        "某市绿化管理条例 > 第三章 绿化养护\n"
        "第二十条 在绿地内禁止下列行为：\n"
        "（一）焚烧树叶、垃圾；\n"
        "（二）擅自砍伐、迁移城市树木。\n"
    )
    answer = backend.answer("绿地里焚烧树叶垃圾行不行", [chunk(content)])
    assert "焚烧树叶" in answer and "禁止下列行为" not in answer


def test_list_heads_are_the_colon_sentences_items_follow() -> None:
    body = [s for s in sentences(LIST, semicolons=False) if not s.heading]
    assert _list_heads(body) == {1: 0, 2: 0}
    # a sentence between the heading and the item ends the list
    other = LIST.replace("（一）", "本条所称绿地包括公园。\n（一）")
    body = [s for s in sentences(other, semicolons=False) if not s.heading]
    assert _list_heads(body) == {}


def test_a_heading_quoted_before_its_item_keeps_its_colon() -> None:
    picks = [
        Pick("1", 0, 0, 0.5, HEADING),
        Pick("1", 0, 1, 0.5, "（一）在绿地内焚烧树叶、垃圾的；"),
    ]
    assert compose_answer(picks) == (
        "第三十条 违反本条例规定，有下列行为之一的，处一千元以上五千元以下罚款[C:1]："
        "（一）在绿地内焚烧树叶、垃圾的[C:1]。"
    )


OTHER_TITLE = "某市绿化管理办法"
OTHER_LIST = (
    "某市绿化管理办法 > 第五章 法律责任\n"
    "第二十八条 违反本办法规定，有下列行为之一的，处二百元以上一千元以下罚款：\n"
    "（一）在绿地内焚烧树叶的；\n"
    "（二）损坏绿化设施的。\n"
)
ONE_ITEM_LIST = LIST.replace("（一）在绿地内焚烧树叶、垃圾的；", "（一）在绿地内焚烧树叶的；")


@pytest.mark.parametrize("max_sentences", [2, 3])
def test_two_lists_never_leave_a_heading_without_its_item(max_sentences: int) -> None:
    # two regulations of one city list the same act under headings stating other sums:
    # each quoted heading is followed by its item, and a heading never ends the answer
    answerer = ExtractiveBackend(support=SupportModel(UseEmbedder()), max_sentences=max_sentences)
    answerer.warm_up()
    other = {**chunk(OTHER_LIST), "id": "2", "document_title": OTHER_TITLE}
    answer = answerer.answer("在绿地内焚烧树叶罚多少钱", [chunk(ONE_ITEM_LIST), other])
    assert answer.startswith(
        "第三十条 违反本条例规定，有下列行为之一的，处一千元以上五千元以下罚款[C:1]："
        "（一）在绿地内焚烧树叶的[C:1]"
    )
    assert not answer.endswith("：")


def test_a_sentence_ending_in_a_colon_does_not_end_the_answer_with_it() -> None:
    # nothing quoted after it: the answer ends as a sentence does
    picks = [
        Pick("1", 0, 0, 0.5, "第十条 供暖单位应当在供暖期开始前完成检修。"),
        Pick("2", 1, 0, 0.5, "第七条 业主在物业管理活动中，履行下列义务："),
    ]
    assert compose_answer(picks) == (
        "第十条 供暖单位应当在供暖期开始前完成检修[C:1]。"
        "第七条 业主在物业管理活动中，履行下列义务[C:2]。"
    )
