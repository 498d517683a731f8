"""gcite.stream.styles: the ``numbers`` citation style, whole and delta by delta."""

from __future__ import annotations

import pytest

from gcite.stream.parser import parse_all
from gcite.stream.render import superscript
from gcite.stream.styles import NumberedText, numbered_answer, styled_answer

KNOWN = ["1", "2", "3", "4"]
ANSWERS = [
    "共 24 个点位[C:2]。巡检每两小时一次[C:3][C:2]，另见[C:9]与【C：4】。",
    "- 访客登记[C:1-3]\n- 代码 `[C:1]` 不算\n\n```\n[C:2]\n```\n结束[C:4]",
    "<think>想想[C:1]</think>\n答[C:1]，又[C:2]",
    "未闭合的 [C:1",
    "转义 \\[C:1] 与 [C:1, 3]",
    "",
]


def test_citations_become_superscript_display_numbers_by_first_appearance() -> None:
    text = numbered_answer(ANSWERS[0], KNOWN)
    assert text == "共 24 个点位¹。巡检每两小时一次²˒¹，另见与³。"
    # the numbers are the display indices of the parser: retriever_resources' positions
    assert parse_all(ANSWERS[0], KNOWN).citations == [("2", 1), ("3", 2), ("4", 3)]


def test_code_reasoning_escapes_and_open_markers_stay_as_the_parser_reads_them() -> None:
    assert numbered_answer(ANSWERS[1], KNOWN) == (
        "- 访客登记¹˒²˒³\n- 代码 `[C:1]` 不算\n\n```\n[C:2]\n```\n结束⁴"
    )
    assert numbered_answer(ANSWERS[2], KNOWN) == "<think>\n想想[C:1]\n</think>答¹，又²"
    # an answer cut off inside a marker: the unfinished marker is left out, not shown raw
    assert numbered_answer(ANSWERS[3], KNOWN) == "未闭合的 "
    assert numbered_answer("路径 C:\\", KNOWN) == "路径 C:\\"  # no marker start: kept
    assert numbered_answer(ANSWERS[4], KNOWN) == "转义 ¹ 与 ¹˒²"  # an escaped marker counts
    assert numbered_answer("<think>只想了[C:1", KNOWN) == "<think>\n只想了[C:1\n</think>"
    assert numbered_answer("[C:1 不是标记", KNOWN) == "[C:1 不是标记"  # resolved: literal


@pytest.mark.parametrize("answer", ANSWERS)
def test_every_split_gives_the_same_text_and_no_frame_shows_part_of_a_marker(answer: str) -> None:
    whole = numbered_answer(answer, KNOWN)
    for cut in range(len(answer) + 1):
        numbered = NumberedText(KNOWN)
        deltas = [numbered.feed(answer[:cut]), numbered.feed(answer[cut:]), numbered.close()]
        assert "".join(deltas) == whole
    numbered = NumberedText(KNOWN)
    deltas = [numbered.feed(ch) for ch in answer] + [numbered.close()]
    assert "".join(deltas) == whole
    # what a client has shown is never taken back: each frame is a start of the final text,
    # so a marker is never visible in part (it is held until it resolves)
    shown = ""
    for delta in deltas:
        shown += delta
        assert whole.startswith(shown)


def test_the_numbers_of_a_long_answer_and_unknown_ids() -> None:
    answer = "".join(f"句{n}[C:{n}]。" for n in range(1, 13))
    known = [str(n) for n in range(1, 13)]
    assert numbered_answer(answer, known).endswith("句12" + superscript(12) + "。")
    assert numbered_answer("只有[C:7]", known[:3]) == "只有"  # names no chunk: dropped
    assert numbered_answer("任意[C:7]", None) == "任意¹"  # no chunk list yet: any id counts


def test_close_is_idempotent_and_markers_style_is_the_raw_answer() -> None:
    numbered = NumberedText(KNOWN)
    assert numbered.feed("答[C:1") == "答"  # held: it may still become a marker
    assert numbered.close() == "" and numbered.closed  # never finished: left out
    assert numbered.close() == ""
    assert styled_answer(ANSWERS[0], KNOWN, "markers") == ANSWERS[0]
    assert styled_answer(ANSWERS[0], KNOWN, "numbers") == numbered_answer(ANSWERS[0], KNOWN)
