"""Sanctions: what a question about a penalty says, and a law's penalty chapter."""

from __future__ import annotations

import pytest

from gcite.verify.sanctions import asks_sanction, in_sanctions, law_articles, penalty_provision
from gcite.verify.text import sentences


@pytest.mark.parametrize(
    "question",
    [
        "在绿化带里烧树叶会被罚款吗",
        "私自改水表罚多少",
        "偷电被抓到会不会被拘留",
        "泳池没配救生员出了事谁担责任",
        "乱倒垃圾有什么后果",
        "把公共楼梯堵了会怎么样",
        "楼顶加盖被发现了会被怎么处理",
        "损坏了邻居的窗户要赔吗",
        "工程师出了事故会被吊销证书吗",
        # other consequences a wrongdoer meets, in everyday words
        "上班喝酒会被开除吗",
        "无照摆摊会被没收东西吗",
        "饭店不办消防手续会被责令停业吗",
        "偷电要坐几年牢",
        "酒后开车会判几年",
        "占用消防通道算犯罪吗",
        "乱停车扣几分",
        "闯红灯扣多少分",
        "私拉电线被查到会有啥下场",
        "拖欠工资会进黑名单吗",
    ],
)
def test_a_question_about_a_sanction(question: str) -> None:
    assert asks_sanction(question)


@pytest.mark.parametrize(
    "question",
    [
        "在绿化带里烧树叶违法吗",
        "楼顶能不能加盖",
        "泳池要不要配救生员",
        "物业发现有人乱倒垃圾该怎么处理",  # what to do, not what happens to the wrongdoer
        "改水表得谁同意",
        "发现可疑包裹怎么处置",  # what to do
        "怎么判断灭火器过期了",
        "停车场几点关门",
    ],
)
def test_a_question_about_the_rule(question: str) -> None:
    assert not asks_sanction(question)


def test_a_sentence_under_the_penalty_chapter() -> None:
    chunk = (
        "某某管理条例 > 第五章 法律责任\n"
        "第四十条 违反本条例规定，在绿化带内焚烧树叶的，处二百元以上五百元以下罚款。"
    )
    body = [s for s in sentences(chunk) if not s.heading]
    assert body and all(in_sanctions(s.context) for s in body)


@pytest.mark.parametrize(
    "context",
    [
        "某某管理办法 > 第六章 罚 则",
        "## 第七章 法律责任",
        "某某条例 > 第5章 罚则",
    ],
)
def test_the_headings_of_a_penalty_chapter(context: str) -> None:
    assert in_sanctions(context)


@pytest.mark.parametrize(
    "context",
    [
        "某某管理条例 > 第二章 绿化管理",
        "某某条例 > 第三章 责任分工",  # a chapter on duties, not on sanctions
        "法律责任保险须知",  # no chapter heading
        "",
    ],
)
def test_other_headings(context: str) -> None:
    assert not in_sanctions(context)


@pytest.mark.parametrize(
    "content",
    [
        "某某条例 > 第五章 法律责任\n第四十条 违反本条例规定的，处二百元罚款。",
        # the next chunk of a long article: no line opens with its number
        "某某条例 > 第五章 法律责任\n（八）违反本条例第七十八条规定的，处五百元罚款；",
    ],
)
def test_a_law_penalty_provision(content: str) -> None:
    body = [s for s in sentences(content) if not s.heading]
    assert law_articles(content)
    assert body and all(penalty_provision(s.context, content) for s in body)


@pytest.mark.parametrize(
    "content",
    [
        "员工手册 > 第五章 罚则\n员工一个月内迟到满三次的，按旷工半天处理。",
        # a handbook citing a law's article is not that law
        "员工手册 > 第五章 罚则\n严重违纪的，依照《劳动合同法》第三十九条解除劳动合同。",
    ],
)
def test_a_handbook_chapter_of_penalties(content: str) -> None:
    body = [s for s in sentences(content) if not s.heading]
    assert body and all(in_sanctions(s.context) for s in body)
    assert not law_articles(content)
    assert not any(penalty_provision(s.context, content) for s in body)
