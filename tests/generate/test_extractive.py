"""The offline extractive backend on the support model: verbatim sentences with [C:N],
context kept, refusals, follow-ups, deterministic deltas."""

from __future__ import annotations

from gcite.config import Settings
from gcite.generate.backends import Usage
from gcite.generate.extractive import (
    ExtractiveBackend,
    answer_cues,
    is_follow_up,
    pick_sentences,
    previous_question,
    query_terms,
    strict_cues,
)
from gcite.generate.factory import make_backend
from gcite.generate.prompt import NO_ANSWER
from gcite.knowledge.embed import UseEmbedder
from gcite.verify import SupportModel

FAULTS = (
    "故障报修与异常上报流程 > 二、故障分级与响应时限\n"
    "- 一级（紧急）：漏水淹水、电梯困人、停电。物业须在 5 分钟内到场，同时通知值班经理。\n"
    "- 二级（重要）：空调不制冷、门禁失灵、卫生间堵塞。物业须在 30 分钟内到场。\n"
    "- 三级（一般）：灯具损坏、家具松动、墙面污损。物业须在 24 小时内处理完毕。"
)
HOTLINE = (
    "故障报修与异常上报流程 > 一、报修渠道\n1. 物业服务热线：400-800-1234（24 小时有人接听）。"
)
PATROL = (
    "巡更路线与打卡规范 > 二、巡更路线\n"
    "巡更路线分为 A、B 两条，按班次轮换：\n"
    "- A 线（地下）：B3 水泵房 → B2 配电室，共 2 个点位。\n"
    "- B 线（裙楼）：1 层大堂 → 2 层连廊，共 2 个点位。\n"
    "日间巡更每 2 小时一次；夜间巡更每 1 小时一次。"
)
EXTINGUISHER = (
    "干粉灭火器是办公场所最常见的灭火器材，适用于扑救初期火灾。使用时记住四步法："
    "第一步拔掉保险销；第二步对准火焰根部；第三步压下压把。灭火器压力表指针在绿色区域表示压力正常。"
)
CHUNKS = [
    {"id": "1", "content": FAULTS, "document_title": "故障报修与异常上报流程"},
    {"id": "2", "content": HOTLINE, "document_title": "故障报修与异常上报流程"},
    {"id": "3", "content": PATROL, "document_title": "巡更路线与打卡规范"},
    {"id": "", "content": "没有编号的片段：空调不制冷物业须在 1 分钟内到场。"},
    {"id": "4", "content": None},
]


def _answer(query: str, chunks: list[dict[str, object]] = CHUNKS, previous: str = "") -> str:
    return ExtractiveBackend().answer(query, chunks, previous)


def test_question_words_and_cues() -> None:
    terms = query_terms("夜间巡更要打卡多少个点位？")
    assert {"夜间", "巡更", "打卡", "点位"} <= set(terms)
    assert "多少" not in terms and "？" not in terms
    assert answer_cues("报修电话是多少？") and not answer_cues("巡更")
    assert strict_cues("报修电话是多少？") and not strict_cues("空调不制冷怎么办")
    assert (
        is_follow_up("那灯坏了呢？")
        and is_follow_up("晚上呢")
        and not is_follow_up("空调不制冷多久能来人")
    )


def test_a_fault_level_stays_with_its_time_limit() -> None:
    answer = _answer("空调不制冷多久能来人")
    # quoted from the label on: the level, the faults, the time limit - verbatim
    assert answer == "二级（重要）：空调不制冷、门禁失灵、卫生间堵塞。物业须在 30 分钟内到场[C:1]。"
    assert "5 分钟" not in answer and "24 小时" not in answer


def test_a_list_heading_brings_its_items() -> None:
    answer = _answer("巡更路线有哪几条？")
    assert "巡更路线分为 A、B 两条" in answer
    assert "A 线（地下）：B3 水泵房" in answer and "B 线（裙楼）" in answer
    assert answer.count("[C:3]") == 1


def test_how_to_questions_get_the_steps() -> None:
    chunks = [
        {"id": "1", "content": "每层设有 2 个消防栓箱，每个箱内配 2 具干粉灭火器。"},
        {
            "id": "2",
            "content": EXTINGUISHER,
            "source_type": "web",
            "document_title": "干粉灭火器的正确使用方法",
        },
    ]
    answer = _answer("干粉灭火器怎么用？", chunks)
    assert "第一步拔掉保险销；第二步对准火焰根部；第三步压下压把[C:2]。" in answer


def test_a_phone_question_needs_a_number() -> None:
    assert "400-800-1234" in _answer("报修电话多少？")
    no_number = [{"id": "1", "content": "物业服务企业应当公示服务投诉电话和联系方式。"}]
    assert _answer("物业的报修电话是多少？", no_number) == NO_ANSWER


def test_off_topic_and_empty_questions_are_refused() -> None:
    assert _answer("大厦食堂周五的特价菜是什么？") == NO_ANSWER
    assert _answer("？？？") == NO_ANSWER
    assert _answer("巡更", []) == NO_ANSWER
    assert pick_sentences("空调不制冷", [{"id": "9", "content": 42}]) == []


def test_another_places_regulation_does_not_answer() -> None:
    chunks = [
        {
            "id": "1",
            "content": "筹备组应当自成立之日起九十日内召开首次业主大会会议。",
            "document_title": "上海市住宅物业管理规定",
        },
        {
            "id": "2",
            "content": "筹备组应当自成立之日起六十日内召开首次业主大会会议。",
            "document_title": "北京市物业管理条例",
        },
    ]
    answer = _answer("北京的业主大会筹备组成立后多少天内要开首次业主大会？", chunks)
    assert "六十日" in answer and "[C:2]" in answer and "[C:1]" not in answer


def test_a_follow_up_borrows_the_previous_question() -> None:
    assert (
        previous_question(
            [
                {"role": "system", "content": "x"},
                {"role": "user", "content": "空调不制冷多久能来人"},
                {"role": "assistant", "content": "30 分钟"},
                {"role": "user", "content": "那灯具损坏呢？"},
            ]
        )
        == "空调不制冷多久能来人"
    )
    answer = _answer("那灯具损坏呢？", previous="空调不制冷多久能来人")
    assert "24 小时" in answer and "三级（一般）" in answer


def test_with_the_bundled_embedder() -> None:
    backend = ExtractiveBackend(support=SupportModel(UseEmbedder()))
    backend.warm_up()
    answer = backend.answer("电梯关人了物业几分钟能到", CHUNKS)
    assert "5 分钟" in answer and "一级（紧急）" in answer
    assert backend.answer("明天天气怎么样？", CHUNKS) == NO_ANSWER


async def test_streams_small_deltas_deterministically() -> None:
    backend = ExtractiveBackend(delta_chars=4)
    usage = Usage()
    messages = [{"role": "user", "content": "空调不制冷多久能来人"}]

    async def collect(u: Usage | None = None) -> list[str]:
        return [
            d
            async for d in backend.stream(
                messages, chunks=CHUNKS, query="空调不制冷多久能来人", usage=u
            )
        ]

    deltas = await collect(usage)
    assert "".join(deltas) == _answer("空调不制冷多久能来人")
    assert all(len(d) <= 4 for d in deltas) and len(deltas) > 1
    assert deltas == await collect()
    assert usage.completion_tokens == len(deltas) and usage.estimated


def test_make_backend_defaults_to_extractive_with_the_bundled_embedder() -> None:
    backend = getattr(make_backend(Settings()), "inner", None)  # within its limits
    assert isinstance(backend, ExtractiveBackend) and backend.name == "extractive"
    assert backend.support is not None and backend.support.name == "lexical+use"
    lexical = getattr(make_backend(Settings.from_keys(embed_backend="openai")), "inner", None)
    assert isinstance(lexical, ExtractiveBackend) and lexical.support is not None
    assert lexical.support.name == "lexical"


def test_a_compound_asked_is_credited_for_its_parts_found() -> None:
    from gcite.generate.extractive import _weighted_cover

    # "安全培训" is not in the text, its part "安全" is: half of the part's share
    weights = {"安全培训": 10.0, "安全": 5.0, "培训": 5.0}
    text = "大厦每年组织一次全员安全讲座。"
    assert _weighted_cover(weights, text) == (0.5 * 0.5 * 10.0 + 5.0) / 20.0
    # a word with no parts in the question gets nothing from its characters alone
    assert _weighted_cover({"安全培训": 10.0, "讲座": 5.0}, "全员安全演练。") == 0.0


def test_a_document_in_traditional_characters_is_answered_as_written() -> None:
    # the question (normalised to simplified characters) is compared with the chunk's
    # simplified form; the sentence is quoted in the document's own characters
    content = (
        "# 物業服務指南\n報修電話：6688-1234，二十四小時有人接聽。\n"
        "電梯困人時，物業須在兩分鐘內到場。"
    )
    chunks = [
        {"id": "1", "source_type": "rag", "content": content, "document_title": "物業服務指南"}
    ]
    answer = ExtractiveBackend().answer("报修电话是多少", chunks)
    assert answer.startswith("報修電話：6688-1234") and "[C:1]" in answer
    answer = ExtractiveBackend().answer("电梯困人物业几分钟到", chunks)
    assert answer == "電梯困人時，物業須在兩分鐘內到場[C:1]。"


def test_a_document_holding_half_a_surrogate_pair_is_quoted_as_written() -> None:
    # a lone surrogate (half of a pair a web page's JSON cut) is compared as U+FFFD, one
    # character for one: the quote is the document's own text, the surrogate kept
    content = "報修電話：6688-1234\ud83d，二十四小時有人接聽。"
    chunks = [{"id": "1", "source_type": "web", "content": content, "document_title": "服務"}]
    answer = ExtractiveBackend().answer("报修电话是多少", chunks)
    assert answer.startswith("報修電話：6688-1234\ud83d，") and "[C:1]" in answer
