"""The relevance gate: the refusal decision weighs the ranked list, not one absolute score."""

from __future__ import annotations

from typing import Any

from gcite.chatflow.gate import (
    BACKGROUND_RANK,
    CONFIDENT,
    FLOOR,
    STANDOUT_FLOOR,
    STANDOUT_RATIO,
    Evidence,
    admit,
    coverage,
    decide,
    evidence,
)


def _item(score: float, content: str, segment: str) -> dict[str, Any]:
    return {
        "content": content,
        "title": "t.md",
        "metadata": {"score": score, "segment_id": segment},
    }


PATROL = "夜间巡更每 1 小时一次，共 24 个点位，每个点位须刷卡打卡。"
OTHER = "会议室须提前预订，使用后恢复桌椅。"


def test_coverage_is_the_share_of_the_question_content_weight() -> None:
    assert coverage("夜间巡更要打几个点位", PATROL) == 1.0
    assert coverage("夜间巡更要打几个点位", OTHER) == 0.0
    assert 0.0 < coverage("夜间巡更和会议室", PATROL) < 1.0
    assert coverage("？？", PATROL) == 0.0  # no content words


def test_coverage_ignores_case_and_the_words_that_only_ask() -> None:
    ups = "UPS：消防控制室和监控中心各配 1 套，后备时间 2 小时。"
    assert coverage("ups后备时间", ups) == 1.0  # the tokeniser lowercases "UPS"
    # "咋办" / "多长时间" are in no document: they do not dilute the coverage
    assert coverage("电梯困人咋办", "电梯困人时请按紧急呼叫按钮。") == 1.0
    assert coverage("夜间巡更多长时间一次", PATROL) == 1.0


def test_coverage_reads_a_document_in_traditional_characters_as_simplified() -> None:
    # the question's words are cut from the simplified form; the chunk keeps its own
    assert coverage("夜间巡更要打几个点位", "夜間巡更須打卡全部 24 個點位。") == 1.0


def test_above_the_threshold_answers_unless_a_lookalike() -> None:
    assert decide(Evidence(0.8, 0.1, 0.5), 0.5).reason == "above_threshold"
    # the embedding found a passage on something else: little of the question in it
    lookalike = decide(Evidence(0.8, 0.2, 0.1), 0.5)
    assert not lookalike.answer and lookalike.reason == "lookalike"
    # a very high score is trusted even with other words
    assert decide(Evidence(0.95, 0.1, 0.1), 0.5).answer
    # so is a chunk standing far out of the list (8 times the background): the question
    # says in other words what that one document says
    assert decide(Evidence(0.6, 0.07, 0.1), 0.5).reason == "above_threshold"
    assert decide(Evidence(0.6, 0.1, 0.1), 0.5).reason == "lookalike"  # 6 times: not far
    # without a background (fewer chunks came back) nothing stands out
    assert decide(Evidence(0.6, 0.0, 0.1), 0.5).reason == "lookalike"


def test_a_confident_score_is_trusted_with_few_of_the_questions_words() -> None:
    # the whole list scores high (a background of 0.7) and the best chunk holds a tenth
    # of the question's words: from CONFIDENT on the score is trusted, under it not
    assert CONFIDENT == 0.85
    assert decide(Evidence(0.86, 0.7, 0.1), 0.5).reason == "above_threshold"
    assert decide(Evidence(0.84, 0.7, 0.1), 0.5).reason == "lookalike"


def test_below_the_threshold_a_chunk_that_stands_out_is_promoted() -> None:
    promoted = decide(Evidence(0.36, 0.02, 0.34), 0.5)
    assert promoted.answer and promoted.promoted and promoted.reason == "promoted"
    # the whole list scores alike: the off-topic baseline, nothing stands out
    assert decide(Evidence(0.39, 0.17, 0.55), 0.5).reason == "weak"
    # too little of the question in the chunk
    assert decide(Evidence(0.36, 0.02, 0.15), 0.5).reason == "weak"
    # under the floor nothing is promoted, whatever the rest
    assert decide(Evidence(FLOOR - 0.01, 0.0, 1.0), 0.5).reason == "below_floor"
    assert decide(Evidence(0.0, 0.0, 0.0), 0.5).reason == "none"


def test_a_zero_threshold_turns_the_gate_off() -> None:
    items = [_item(0.1, OTHER, "s1")]
    gated = admit("夜间巡更要打几个点位", items, 0.0)
    assert gated.decision.reason == "off" and gated.items == items


def test_evidence_takes_the_background_at_its_rank() -> None:
    items = [_item(0.9 - i / 10, PATROL, f"s{i}") for i in range(BACKGROUND_RANK + 2)]
    ev = evidence("夜间巡更", items)
    assert ev.score == 0.9 and abs(ev.background - (0.9 - (BACKGROUND_RANK - 1) / 10)) < 1e-9
    assert ev.coverage == 1.0
    assert evidence("夜间巡更", items[:2]).background == 0.0
    assert evidence("夜间巡更", []) == Evidence(0.0, 0.0, 0.0)


def test_admit_passes_the_promoted_chunk_and_the_weak_rest() -> None:
    items = [_item(0.4, PATROL, "p"), _item(0.05, OTHER, "o")]
    gated = admit("夜间巡更要打几个点位", items, 0.5)
    assert gated.decision.promoted and gated.promoted == {"p"}
    assert [i["metadata"]["segment_id"] for i in gated.items] == ["p"]
    # a refused question passes nothing to a model ...
    refused = admit("会议室怎么订", items, 0.5)
    assert not refused.decision.answer and refused.items == []
    # ... and the weak chunks, marked by the chatflow, to a backend that weighs them
    weak = admit("会议室怎么订", items, 0.5, weak_floor=0.3)
    assert [i["metadata"]["segment_id"] for i in weak.items] == ["p"] and not weak.promoted


def test_a_lookalike_passes_nothing_even_to_a_backend_weighing_weak_chunks() -> None:
    items = [_item(0.8, OTHER, "o"), _item(0.7, OTHER, "o2")]
    gated = admit("夜间巡更要打几个点位", items, 0.5, weak_floor=0.3)
    assert gated.decision.reason == "lookalike" and gated.items == []


def test_a_best_chunk_standing_out_below_the_weak_floor_is_passed_on_as_weak() -> None:
    five = [_item(0.04, OTHER, f"o{n}") for n in range(4)]
    standing = [_item(0.2, PATROL, "p"), *five]  # 5x the background, under the floor
    gated = admit("白班巡逻多久转一圈", standing, 0.5, weak_floor=0.3)
    assert not gated.decision.answer and not gated.promoted
    assert [i["metadata"]["segment_id"] for i in gated.items] == ["p"]  # only the best
    assert admit("白班巡逻多久转一圈", standing, 0.5).items == []  # not to a model
    # a best chunk scoring like the rest, or under the stand-out floor, is not passed on
    alike = [_item(0.2, PATROL, "p"), *[_item(0.14, OTHER, f"o{n}") for n in range(4)]]
    assert admit("白班巡逻多久转一圈", alike, 0.5, weak_floor=0.3).items == []
    # 1.6 times the background stands out (STANDOUT_RATIO; the answerer still weighs it)
    assert STANDOUT_RATIO == 1.6
    for top in (0.15, 0.17):
        apart = [_item(top, PATROL, "p"), *[_item(0.1, OTHER, f"o{n}") for n in range(4)]]
        apart_items = admit("白班巡逻多久转一圈", apart, 0.5, weak_floor=0.3).items
        assert [i["metadata"]["segment_id"] for i in apart_items] == (["p"] if top > 0.16 else [])
    # ... down to the stand-out floor (STANDOUT_FLOOR), not under it
    assert STANDOUT_FLOOR == 0.05
    for top in (0.04, 0.055):
        faint = [_item(top, PATROL, "p"), *[_item(0.01, OTHER, f"o{n}") for n in range(4)]]
        faint_items = admit("白班巡逻多久转一圈", faint, 0.5, weak_floor=0.3).items
        assert [i["metadata"]["segment_id"] for i in faint_items] == (["p"] if top > 0.05 else [])


def test_a_compound_not_found_counts_half_its_parts_found() -> None:
    # "值班室" is not in the text, its part "值班" is: half of its share
    text = "值班中心位于 2 层东侧。"
    share = coverage("值班室在几层", text)
    assert 0 < share < coverage("值班中心在几层", text)
    assert coverage("锅炉房在几层", text) == 0.0  # no part of it there


def test_a_standing_out_chunk_brings_its_documents_next_chunks_as_weak() -> None:
    from gcite.chatflow.gate import SAME_DOCUMENT_RANK

    def item(score: float, segment: str, document: str) -> dict[str, Any]:
        entry = _item(score, OTHER, segment)
        entry["metadata"]["document_id"] = document
        return entry

    ranked = [
        item(0.2, "p1", "patrol"),  # stands out: 5x the background
        item(0.06, "x", "other"),
        item(0.05, "p2", "patrol"),  # its document, ranked 3rd: the answer may be here
        item(0.04, "p3", "patrol"),  # its document, ranked 4th: not passed on
        item(0.04, "y", "other"),
    ]
    assert SAME_DOCUMENT_RANK == 3
    gated = admit("白班巡逻多久转一圈", ranked, 0.5, weak_floor=0.3)
    assert [i["metadata"]["segment_id"] for i in gated.items] == ["p1", "p2"]
    assert not gated.decision.answer and not gated.promoted  # weak, for the answerer
    assert admit("白班巡逻多久转一圈", ranked, 0.5).items == []  # not to a model
    # a best chunk not standing out brings nothing of its document
    alike = [item(0.2, "p1", "patrol"), item(0.15, "p2", "patrol")]
    alike += [item(0.14, f"o{n}", "other") for n in range(3)]
    assert admit("白班巡逻多久转一圈", alike, 0.5, weak_floor=0.3).items == []
