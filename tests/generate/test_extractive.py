"""The offline extractive backend: lexical sentence picking with [C:N], deterministic."""

from __future__ import annotations

from gcite.config import Settings
from gcite.generate.backends import Usage, make_backend
from gcite.generate.extractive import (
    ExtractiveBackend,
    chunk_units,
    pick_sentences,
    query_terms,
    split_sentences,
)
from gcite.generate.prompt import NO_ANSWER

CHUNKS = [
    {"id": "1", "content": "日间巡更每 2 小时一次。夜间巡更每 1 小时一次，须打卡全部 24 个点位。"},
    {"id": "2", "content": "会议室可在前台预约。会议室内禁止吸烟。"},
    {"id": "3", "content": "夜间巡更每 1 小时一次，须打卡全部 24 个点位。"},  # same sentence
    {"id": "", "content": "没有编号的片段夜间巡更打卡点位"},
    {"id": "4", "content": None},
]


async def _collect(backend: ExtractiveBackend, query: str, usage: Usage | None = None) -> list[str]:
    return [d async for d in backend.stream([], chunks=CHUNKS, query=query, usage=usage)]


def test_terms_drop_question_words() -> None:
    terms = query_terms("夜间巡更要打卡多少个点位？")
    assert {"夜间", "巡更", "打卡", "点位"} <= set(terms)
    assert "多少" not in terms and "？" not in terms
    assert split_sentences("# 标题文字\n第一句话。第二句话！短") == [
        "标题文字",
        "第一句话。",
        "第二句话！",
    ]


def test_picks_the_best_sentences_with_their_markers() -> None:
    picks = pick_sentences("夜间巡更要打卡多少个点位？", CHUNKS)
    assert [(p.chunk_id, p.sentence) for p in picks] == [
        ("1", "夜间巡更每 1 小时一次，须打卡全部 24 个点位。")
    ]
    backend = ExtractiveBackend()
    answer = backend.answer("夜间巡更要打卡多少个点位？", CHUNKS)
    assert answer == "夜间巡更每 1 小时一次，须打卡全部 24 个点位[C:1]。"


async def test_streams_small_deltas_deterministically() -> None:
    backend = ExtractiveBackend(delta_chars=4)
    usage = Usage()
    deltas = await _collect(backend, "会议室能吸烟吗？", usage)
    assert "".join(deltas) == "会议室可在前台预约[C:2]。会议室内禁止吸烟[C:2]。"
    assert all(len(d) <= 4 for d in deltas) and len(deltas) > 1
    assert deltas == await _collect(backend, "会议室能吸烟吗？")
    assert usage.completion_tokens == len(deltas) and usage.estimated


async def test_nothing_relevant_gives_the_fixed_answer() -> None:
    backend = ExtractiveBackend()
    assert "".join(await _collect(backend, "今天天气怎么样？")) == NO_ANSWER
    assert "".join([d async for d in backend.stream([], chunks=[], query="巡更")]) == NO_ANSWER
    assert backend.answer("？？？", CHUNKS) == NO_ANSWER


def test_make_backend_defaults_to_extractive() -> None:
    assert make_backend(Settings()).name == "extractive"


def test_headings_are_context_not_answer_sentences() -> None:
    # The knowledge base writes the heading breadcrumb as a chunk's first line.
    content = (
        "巡更路线与打卡规范 v2.1 > 三、打卡要求\n"
        "1. 巡更人员到达点位后，用巡检终端靠近 NFC 标签即打卡成功。\n"
        "2. 相邻两个点位的打卡间隔不得少于 1 分钟。"
    )
    heading, sentences = chunk_units(content)
    assert heading == "巡更路线与打卡规范 v2.1 > 三、打卡要求"
    assert sentences == [
        "巡更人员到达点位后，用巡检终端靠近 NFC 标签即打卡成功。",
        "相邻两个点位的打卡间隔不得少于 1 分钟。",
    ]
    answer = ExtractiveBackend().answer("巡更打卡怎么操作？", [{"id": "1", "content": content}])
    assert "三、打卡要求" not in answer
    assert answer.startswith("巡更人员到达点位后，用巡检终端靠近 NFC 标签即打卡成功[C:1]。")


def test_a_heading_alone_does_not_make_a_sentence_relevant() -> None:
    content = "消防应急预案 > 疏散\n会议室可在前台预约。"
    assert ExtractiveBackend().answer("消防疏散怎么做？", [{"id": "1", "content": content}]) == (
        NO_ANSWER
    )


def test_answer_cues_pick_the_kind_of_answer_asked_for() -> None:
    chunks = [
        {
            "id": "1",
            "content": "故障报修 > 报修渠道\n物业服务热线：400-800-1234（24 小时有人接听）。",
        },
        {"id": "2", "content": "会议室 > 预订\n会议室可在前台预约。"},
    ]
    # No question word in the hotline sentence: the "电话" cue under a heading about
    # 报修 makes it the answer.
    answer = ExtractiveBackend().answer("报修电话是多少？", chunks)
    assert answer == "物业服务热线：400-800-1234（24 小时有人接听）[C:1]。"
    # Without a cue, a sentence with no question word is never picked.
    assert ExtractiveBackend().answer("报修渠道的负责人是谁？", chunks[:1]) == NO_ANSWER


def test_enumerated_steps_stay_one_sentence() -> None:
    steps = "使用时记住四步：第一步拔掉保险销；第二步对准火焰根部；第三步压下压把"
    content = f"灭火器 > 使用方法\n{steps}。"
    answer = ExtractiveBackend().answer("灭火器怎么用？", [{"id": "3", "content": content}])
    assert answer == f"{steps}[C:3]。"
