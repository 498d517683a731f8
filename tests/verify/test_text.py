"""Sentences with context, terms and numbers (gcite.verify.text)."""

from __future__ import annotations

import pytest

from gcite.knowledge.sparse import terms, tokenize
from gcite.verify.text import bigram_coverage, chinese_number, coverage, numbers, sentences

FAULTS = """# 故障报修

## 二、故障分级与响应时限

- 一级（紧急）：漏水淹水、电梯困人。物业须在 5 分钟内到场，同时通知值班经理。
- 二级（重要）：空调不制冷、门禁失灵。物业须在 30 分钟内到场。

## 三、处理与闭环

工单派发后，维修人员须在终端"接单"。
"""


@pytest.mark.parametrize(
    ("text", "value"),
    [("二十四", 24), ("一百", 100), ("五万", 50_000), ("十五", 15), ("一千零五", 1005), ("两", 2)],
)
def test_chinese_numbers(text: str, value: int) -> None:
    assert chinese_number(text) == value


def test_chinese_number_rejects_other_text() -> None:
    assert chinese_number("") is None
    assert chinese_number("五个") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("自评估完成之日起五个工作日内", {"5"}),
        ("处1万元以上10万元以下的罚款", {"10000", "100000"}),
        ("按千分之二配置，不得低于一百平方米", {"0.002", "100"}),
        ("2/3以上的业主且三分之二以上", {"0.667"}),
        ("物业须在 5 分钟内到场", {"5"}),
        ("每年至少进行一次全面检测", {"1"}),
        ("统一管理，一般情况下", set()),
        ("第二十三条 保修期内", set()),
        ("10,000元", {"10000"}),
    ],
)
def test_numbers_are_normalised(text: str, expected: set[str]) -> None:
    assert numbers(text) == expected


def test_sentences_keep_offsets_headings_and_list_labels() -> None:
    found = sentences(FAULTS)
    for s in found:
        assert s.text in FAULTS[s.start : s.end + 1] or FAULTS[s.start : s.end] == s.text
    heads = [s.text for s in found if s.heading]
    assert heads == ["故障报修", "二、故障分级与响应时限", "三、处理与闭环"]
    five = next(s for s in found if s.text.startswith("物业须在 5"))
    assert five.label == "一级（紧急）："
    assert "一级（紧急）：" in five.context and "二、故障分级与响应时限" in five.context
    thirty = next(s for s in found if "30 分钟" in s.text)
    assert "二级（重要）：" in thirty.context and "一级" not in thirty.context
    order = next(s for s in found if s.text.startswith("工单"))
    # a sibling heading replaces the previous one in the context
    assert "三、处理与闭环" in order.context and "二、故障分级" not in order.context
    assert not order.label


def test_terms_drop_question_words_and_weigh_by_idf() -> None:
    weights = terms("干粉灭火器怎么用？")
    assert "怎么" not in weights and "用" not in weights
    assert weights["灭火器"] > 0
    assert terms("的了吗") == {}


def test_coverage_measures() -> None:
    weights = terms("空调不制冷")
    assert coverage(weights, "二级（重要）：空调不制冷、门禁失灵。") == 1.0
    assert coverage(weights, "会议室预订") == 0.0
    assert coverage({}, "x") == 0.0
    assert bigram_coverage("灭火器", "干粉灭火器") == 1.0
    assert bigram_coverage("干粉灭活器", "干粉灭火器") == pytest.approx(0.5)
    assert bigram_coverage("", "x") == 0.0


def test_terms_come_from_the_bm25_tokeniser() -> None:
    question = "设备编号 EQ-000123 的保养周期是多少？"
    weights = terms(question)
    assert "eq-000123" in weights  # a code stays whole, as in the BM25 vectors
    assert set(weights) <= set(tokenize(question))
    assert set(terms("GB50016-2014 对疏散宽度有什么规定")) >= {"gb50016-2014", "疏散", "宽度"}
