"""The offline answerer's evidence rules on real handbook and regulation sentences, with
the bundled embedder: chunks below the retrieval's threshold answer only on strong
evidence and only when nothing above it does; deadline questions; follow-ups weighed by
their own words; a document the question names; colloquial words."""

from __future__ import annotations

from typing import Any

import pytest

from gcite.generate.backends import WEAK_KEY
from gcite.generate.extractive import (
    WEAK_MARGIN,
    ExtractiveBackend,
    names_document,
    pick_sentences,
)
from gcite.generate.prompt import NO_ANSWER
from gcite.knowledge.embed import UseEmbedder
from gcite.verify import SupportModel

DELIVERY = (
    "访客接待与登记管理办法 > 三、快递与外卖\n"
    "快递和外卖人员不进入办公楼层，统一在 1 层东门的快递柜和外卖架取放。"
)
FAULTS = (
    "故障报修与异常上报流程 > 二、故障分级与响应时限\n"
    "- 一级（紧急）：漏水淹水、电梯困人、停电、燃气异味、火警。"
    "物业须在 5 分钟内到场，同时通知值班经理。\n"
    "- 二级（重要）：空调不制冷、门禁失灵、卫生间堵塞。物业须在 30 分钟内到场。\n"
    "- 三级（一般）：灯具损坏、家具松动、墙面污损。物业须在 24 小时内处理完毕。"
)
CCTV = (
    "监控中心值守与应急联络 > 一、监控中心值守\n"
    "监控中心位于 B1 层安保办公区内，实行 24 小时双人值守，每 12 小时交接一次。"
    "值守人员须实时查看 1 层大堂、各出入口、地下车库和电梯轿厢画面，录像至少保存 90 天。"
)
CCTV_RULES = (
    "监控中心值守与应急联络 > 四、保密要求\n"
    "监控画面和录像不得用手机翻拍，租户调取录像须凭书面申请，经物业经理批准后在监控中心现场查看。"
)
LABOUR = (
    "生产经营单位与从业人员订立的劳动合同，应当载明有关保障从业人员劳动安全、防止职业危害的事项，"
    "以及依法为从业人员办理工伤保险的事项。"
)


@pytest.fixture(scope="module")
def backend() -> ExtractiveBackend:
    answerer = ExtractiveBackend(support=SupportModel(UseEmbedder()))
    answerer.warm_up()
    return answerer


def chunk(cid: str, content: str, title: str, score: float, weak: bool = False) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": cid,
        "content": content,
        "document_title": title,
        "source_type": "rag",
        "score": score,
    }
    if weak:
        item[WEAK_KEY] = True
    return item


def test_the_backend_asks_for_chunks_below_the_threshold() -> None:
    assert ExtractiveBackend().weak_margin == WEAK_MARGIN == 0.2


def test_a_chunk_below_the_threshold_answers_on_strong_evidence(
    backend: ExtractiveBackend,
) -> None:
    weak = [chunk("1", DELIVERY, "访客接待与登记管理办法", 0.36, weak=True)]
    answer = backend.answer("外卖小哥能送上楼吗", weak)
    assert "快递和外卖人员不进入办公楼层" in answer and "[C:1]" in answer
    # one shared word ("快递柜") is not strong evidence: the question is not answered
    assert backend.answer("快递柜的取件码忘了怎么办？", weak) == NO_ANSWER


def test_one_shared_word_is_not_enough_below_the_threshold(backend: ExtractiveBackend) -> None:
    weak = [chunk("1", LABOUR, "中华人民共和国安全生产法", 0.42, weak=True)]
    assert backend.answer("员工在上下班路上骑车摔伤了，能算工伤吗？", weak) == NO_ANSWER
    # the same sentence above the threshold is answered from (the rule is for weak chunks)
    strong = [chunk("1", LABOUR, "中华人民共和国安全生产法", 0.62)]
    assert "[C:1]" in backend.answer("劳动合同要写明工伤保险吗？", strong)


def test_one_shared_word_and_the_same_meaning_answer_below_the_threshold(
    backend: ExtractiveBackend,
) -> None:
    found = (
        "物权编 > 第九章 所有权取得的特别规定\n第三百一十七条 权利人领取遗失物时，"
        "应当向拾得人或者有关部门支付保管遗失物等支出的必要费用。"
    )
    weak = [chunk("1", found, "物权编", 0.43, weak=True)]
    answer = backend.answer("失主来领东西 要给捡到的人保管费吗", weak)
    assert "支付保管遗失物等支出的必要费用" in answer and "[C:1]" in answer


def test_a_weak_sentence_giving_the_strict_value_asked_may_answer_close_in_meaning(
    backend: ExtractiveBackend,
) -> None:
    weak = [chunk("1", FAULTS, "故障报修与异常上报流程", 0.35, weak=True)]
    # one shared word ("处理"), a duration asked and given, the meaning close
    answer = backend.answer("墙皮脏了报修以后多久处理", weak)
    assert "24 小时内处理完毕" in answer and "[C:1]" in answer
    # no value of the type asked (a price): still refused
    assert backend.answer("墙皮脏了报修以后收多少钱", weak) == NO_ANSWER


def test_a_chunk_above_the_threshold_comes_first(backend: ExtractiveBackend) -> None:
    chunks = [
        chunk("1", FAULTS, "故障报修与异常上报流程", 0.79),
        chunk("2", DELIVERY, "访客接待与登记管理办法", 0.45, weak=True),
    ]
    picks = pick_sentences("电梯关人了物业几分钟能到", chunks, support=backend.support)
    assert picks and {p.chunk_id for p in picks} == {"1"}
    assert any("5 分钟" in p.sentence for p in picks)


def test_a_deadline_question_gets_the_deadline(backend: ExtractiveBackend) -> None:
    chunks = [
        chunk(
            "1",
            "消防安全重点单位应当每年进行至少两次消防演练。",
            "上海市消防条例",
            0.99,
        ),
        chunk(
            "2",
            "（五）自行或者委托符合国家规定条件的消防技术服务机构定期开展消防安全评估，"
            "并自评估完成之日起五个工作日内将评估报告报所在地消防救援机构备案。",
            "上海市消防条例",
            0.98,
        ),
    ]
    answer = backend.answer("上海的消防重点单位做完消防安全评估，报告多久之内要交？", chunks)
    assert "五个工作日内" in answer and "[C:2]" in answer and "[C:1]" not in answer


def test_a_follow_up_is_about_its_own_words(backend: ExtractiveBackend) -> None:
    chunks = [chunk("1", FAULTS, "故障报修与异常上报流程", 0.79)]
    previous = "空调不制冷多久能来人"
    # the chatflow's retrieval query carries the previous question in front
    answer = backend.answer(f"{previous} 那灯坏了呢？", chunks, previous)
    assert "三级（一般）：灯具损坏、家具松动、墙面污损。物业须在 24 小时内处理完毕[C:1]" in answer


def test_a_colloquial_word_finds_the_written_one(backend: ExtractiveBackend) -> None:
    chunks = [
        chunk("1", CCTV_RULES, "监控中心值守与应急联络", 0.99),
        chunk("2", CCTV, "监控中心值守与应急联络", 0.98),
    ]
    answer = backend.answer("监控录像要留多久", chunks)
    assert "90 天" in answer and "[C:2]" in answer


def test_a_named_document_answers_alone(backend: ExtractiveBackend) -> None:
    assert names_document("国务院《物业管理条例》的条文", "物业管理条例")
    assert names_document("《个人信息保护法》", "中华人民共和国个人信息保护法")
    assert not names_document("《物业管理条例》", "北京市物业管理条例（2024年修正）")
    chunks = [
        chunk(
            "1",
            "业主委员会委员应当符合国务院《物业管理条例》规定的条件，"
            "且本人、配偶及其直系亲属未在本物业管理区域服务的物业服务企业任职。",
            "上海市住宅物业管理规定",
            1.0,
        ),
        chunk(
            "2",
            "业主委员会委员应当由热心公益事业、责任心强、具有一定组织能力的业主担任。",
            "物业管理条例",
            0.99,
        ),
    ]
    picks = pick_sentences(
        "按照国务院《物业管理条例》，业主委员会委员要符合什么条件？",
        chunks,
        support=backend.support,
    )
    assert picks and {p.chunk_id for p in picks} == {"2"}


def test_the_first_chunk_below_the_threshold_answers_with_the_value_asked_and_some_words(
    backend: ExtractiveBackend,
) -> None:
    # one shared word ("录像"), meaning not close for the embedder, a duration asked and
    # given: the retrieval's first chunk answers ...
    first = [chunk("1", CCTV, "监控中心值守与应急联络", 0.3, weak=True)]
    answer = backend.answer("录像能放多久", first)
    assert "录像至少保存 90 天" in answer and "[C:1]" in answer
    # ... not a chunk the retrieval ranked lower, nor a question for another type of value
    second = [chunk("2", DELIVERY, "访客接待与登记管理办法", 0.31, weak=True), first[0]]
    assert backend.answer("录像能放多久", second) == NO_ANSWER
    assert backend.answer("录像调取收多少钱", first) == NO_ANSWER


def test_the_first_chunk_above_the_threshold_is_not_dropped_for_its_meaning(
    backend: ExtractiveBackend,
) -> None:
    # colloquial wording the embedder places far from the sentence, words in common
    first = [chunk("1", FAULTS, "故障报修与异常上报流程", 0.4)]
    answer = backend.answer("门禁刷不开了人多久到", first)
    assert "30 分钟内到场" in answer and "[C:1]" in answer
    # a lower-ranked chunk with the same evidence still is
    second = [chunk("2", DELIVERY, "访客接待与登记管理办法", 0.45), {**first[0], "score": 0.4}]
    assert backend.answer("门禁刷不开了人多久到", second) == NO_ANSWER


def test_when_the_best_candidate_does_not_answer_the_next_one_is_checked(
    backend: ExtractiveBackend,
) -> None:
    fire = "灭火器使用要点 > 二、注意事项\n如果火势在一分钟内无法控制，应立即撤离并等待专业消防队。"
    chunks = [
        chunk("1", FAULTS, "故障报修与异常上报流程", 0.3, weak=True),
        chunk("2", fire, "灭火器使用要点", 0.5),
    ]
    # the chunk above the threshold is picked first, fails the answer check (none of the
    # question's words), and the first-ranked chunk below it answers
    answer = backend.answer("停电了物业几分钟能到", chunks)
    assert "物业须在 5 分钟内到场" in answer and "[C:1]" in answer and "[C:2]" not in answer
    assert backend.answer("停电了物业上门收多少钱", chunks) == NO_ANSWER


def test_the_first_chunk_close_in_meaning_needs_only_the_first_chunks_cover(
    backend: ExtractiveBackend,
) -> None:
    from gcite.generate.extractive import FIRST_TYPED_COVER, _min_cover, asked_of, scored_units

    fans = "楼宇设备清单 > 五、通风排烟\n排烟风机：屋顶 4 台轴流风机（三用一备）。"

    def needed(chunks: list[dict[str, Any]]) -> tuple[float, float]:
        weights, _, text, units = scored_units("楼顶风机几用几备", chunks, support=backend.support)
        asked = asked_of(text, weights, semantic=True)
        return _min_cover([u for u in units if u.chunk_id == "1"], asked), asked.min_cover

    # no type asked, few words in common, but close in meaning: the retrieval's first
    # chunk above the threshold needs less of the short question's words ...
    first, usual = needed([chunk("1", fans, "楼宇设备清单", 0.6)])
    assert first == FIRST_TYPED_COVER < usual
    # ... a lower-ranked one, or a first one below the threshold, does not
    other = chunk("2", DELIVERY, "访客接待与登记管理办法", 0.7)
    assert needed([other, chunk("1", fans, "楼宇设备清单", 0.6)])[0] == usual
    assert needed([chunk("1", fans, "楼宇设备清单", 0.35, weak=True)])[0] == usual


CLEANING = (
    "保洁作业规范 > 二、作业频次\n"
    "- 大堂地面每 2 小时清扫一次，雨天加密为每 30 分钟一次。\n"
    "- 垃圾房每日清运两次，清运后冲洗地面。"
)


def test_the_first_chunk_below_the_threshold_answers_on_a_fifth_of_the_words(
    backend: ExtractiveBackend,
) -> None:
    from gcite.generate.extractive import FIRST_TYPED_LEXICAL, FIRST_TYPED_LEXICAL_ALONE

    # a fifth of the question's weight in the sentence (colloquial words for the
    # handbook's), a duration asked and given, not unrelated in meaning
    first = [chunk("1", CLEANING, "保洁作业规范", 0.3, weak=True)]
    picks = pick_sentences("大厅的地多久扫一遍", first, support=backend.support)
    assert picks and picks[0].chunk_id == "1" and "每 2 小时清扫一次" in picks[0].sentence
    assert picks[0].relevance >= FIRST_TYPED_LEXICAL
    assert FIRST_TYPED_LEXICAL < FIRST_TYPED_LEXICAL_ALONE
    # not when the chunk is ranked second, nor for another type of value (a price)
    second = [chunk("2", DELIVERY, "访客接待与登记管理办法", 0.31, weak=True), first[0]]
    assert backend.answer("大厅的地多久扫一遍", second) == NO_ANSWER
    assert backend.answer("大厅的地扫一遍多少钱", first) == NO_ANSWER


def test_under_the_lexical_alone_the_first_typed_sentence_needs_some_meaning() -> None:
    from gcite.generate.extractive import (
        FIRST_TYPED_LEXICAL,
        FIRST_TYPED_LEXICAL_ALONE,
        MIN_SEMANTIC,
        _first_typed_evidence,
        _Unit,
    )
    from gcite.verify.text import sentences

    sentence = sentences("垃圾房每日清运两次。")[0]

    def unit(lexical: float, semantic: float) -> _Unit:
        return _Unit(
            "1",
            0,
            0,
            sentence,
            sentence.text,
            lexical,
            lexical,
            lexical,
            True,
            semantic=semantic,
            weak=True,
        )

    low = (FIRST_TYPED_LEXICAL + FIRST_TYPED_LEXICAL_ALONE) / 2
    assert _first_typed_evidence(unit(low, MIN_SEMANTIC), semantic=True)
    assert not _first_typed_evidence(unit(low, MIN_SEMANTIC / 2), semantic=True)
    assert _first_typed_evidence(unit(FIRST_TYPED_LEXICAL_ALONE, 0.0), semantic=True)
    assert _first_typed_evidence(unit(low, 0.0), semantic=False)  # no embedder
    assert not _first_typed_evidence(unit(FIRST_TYPED_LEXICAL * 0.9, 1.0), semantic=True)


def test_a_saved_web_page_ranked_first_needs_more_cover(backend: ExtractiveBackend) -> None:
    from gcite.generate.extractive import (
        FIRST_TYPED_COVER,
        FIRST_WEB_TYPED_COVER,
        _min_cover,
        asked_of,
        scored_units,
    )

    def needed(source: str) -> float:
        page = {**chunk("1", CLEANING, "保洁作业规范", 0.6), "source_type": source}
        weights, _, text, units = scored_units(
            "大厅的地多久扫一遍", [page], support=backend.support
        )
        asked = asked_of(text, weights, semantic=True)
        leads = [u for u in units if "2 小时" in u.quote]
        return _min_cover(leads, asked)

    assert needed("rag") == FIRST_TYPED_COVER < FIRST_WEB_TYPED_COVER == needed("web")


def test_below_the_threshold_half_the_words_need_no_meaning_from_the_embedder() -> None:
    from gcite.generate.extractive import (
        LEXICAL_ALONE,
        WEAK_SEMANTIC,
        _Unit,
        strong_evidence,
    )
    from gcite.verify.text import sentences

    sentence = sentences("同一台电梯一周内重复故障三次以上，升级为重大隐患。")[0]
    weights = {"电梯": 1.0, "重复": 1.0, "故障": 1.0, "隐患": 1.0, "老是": 1.0}

    def unit(lexical: float, semantic: float) -> _Unit:
        return _Unit(
            "1", 0, 0, sentence, sentence.text, lexical, lexical, lexical, True,
            semantic=semantic, weak=True,
        )  # fmt: skip

    # the small embedder may not place a colloquial question at all (semantic 0): half
    # the question's weight in the sentence, with two of its words, is evidence enough
    assert strong_evidence(unit(LEXICAL_ALONE, 0.0), weights, semantic=True)
    assert not strong_evidence(unit(LEXICAL_ALONE * 0.95, 0.0), weights, semantic=True)
    assert strong_evidence(unit(LEXICAL_ALONE * 0.95, WEAK_SEMANTIC), weights, semantic=True)
    # one word of the question is never enough on words alone
    one = {"电梯": 1.0, "咋整": 1.0, "办法": 1.0}
    assert not strong_evidence(unit(0.9, 0.0), one, semantic=True)


def test_a_weak_first_chunk_counting_the_thing_asked_is_not_unrelated_in_meaning() -> None:
    from gcite.generate.extractive import _Narrowing, _rank_chunks, _Unit, asked_of
    from gcite.verify.text import sentences

    sentence = sentences("C 区：B3-01 → B2-07 → B1-03，共 3 个点位。")[0]

    def unit(rank: int) -> _Unit:
        # words in common, and the small embedder places nothing of a list of codes
        return _Unit(
            "1", rank, 0, sentence, sentence.text, 0.3, 0.3, 0.3, True,
            semantic=0.0, relevance=0.3, weak=True,
        )  # fmt: skip

    def ranked(question: str, rank: int = 0) -> list[str]:
        asked = asked_of(question, {"C区": 1.0, "一共": 1.0}, semantic=True)
        narrow = _Narrowing(counts=True, deadlines=False, named=False)
        strong, weak = _rank_chunks({"1": [unit(rank)]}, asked, narrow)
        return [chunk_id for _, chunk_id, _ in strong + weak]

    # the retrieval's first chunk, counting the very thing asked ("几个点" / "3 个点位")
    assert ranked("C区一共打几个点") == ["1"]
    # just outside: another thing counted, or not the first chunk - unrelated in meaning
    assert ranked("C区一共几个探头") == []
    assert ranked("C区一共打几个点", rank=1) == []


def test_a_party_named_by_a_law_article_is_no_evidence_for_a_weak_who_answer() -> None:
    from dataclasses import replace

    from gcite.generate.extractive import (
        WEAK_TYPED_SEMANTIC,
        _may_lead,
        _Narrowing,
        asked_of,
        scored_units,
    )

    narrow = _Narrowing(counts=False, deadlines=False, named=False)
    weights = {"物业费": 1.0, "小区": 1.0, "收": 0.5}

    def leads(content: str, question: str, *, rank: int, semantic: float) -> bool:
        # the sentence of ``content`` below the threshold, with a share of the question's
        # words (one of them) and the embedding evidence given
        _, _, _, units = scored_units(question, [{"id": "1", "content": content}])
        unit = replace(
            units[0], rank=rank, lexical=0.3, relevance=0.3, semantic=semantic, weak=True
        )
        return _may_lead(unit, asked_of(question, weights, semantic=True), narrow)

    # every provision names the party it binds: for "who" asked, a party named in a law's
    # article below the threshold is no evidence, in the first chunk or close in meaning
    law = "某条例 > 第三章 物业服务\n第十条 业主应当按照约定交纳服务费用。"
    who = "小区的物业费该谁来收"
    assert not leads(law, who, rank=0, semantic=0.2)
    assert not leads(law, who, rank=2, semantic=WEAK_TYPED_SEMANTIC)
    # a handbook's sentence naming whom to go to is
    guide = "物业服务指南 > 三、缴费\n服务费用由物业服务中心财务室统一收取。"
    assert leads(guide, who, rank=0, semantic=0.2)
    assert leads(guide, who, rank=2, semantic=WEAK_TYPED_SEMANTIC)
    # a value a law's article states (a deadline) still is
    deadline = "某条例 > 第三章 物业服务\n第十条 业主应当在收到通知之日起三十日内交纳服务费用。"
    assert leads(deadline, "小区的物业费多少天内要交", rank=0, semantic=0.2)


def test_a_web_page_first_in_the_list_is_not_vouched_for_by_the_retrieval() -> None:
    # the relevance gate passed no knowledge-base chunk on: a saved web page is first,
    # sharing a few of the question's words, on another subject
    backend = ExtractiveBackend(support=SupportModel(UseEmbedder()))
    page = (
        "# 写字楼午休礼仪\n"
        "午休时请调暗灯光，把手机调成静音，离开工位时关好抽屉，不要在工位上吃味道重的外卖。"
    )
    web = {"id": "1", "source_type": "web", "content": page, "document_title": "写字楼午休礼仪"}
    assert backend.answer("周末吃啥好", [web]) == NO_ANSWER
    # a question the page answers, close in meaning: still answered from it
    assert "[C:1]" in backend.answer("午休时手机要调静音吗", [web])
