"""The support model (lexical, numbers, bundled embedder) and answer verification."""

from __future__ import annotations

from pathlib import Path

import pytest

from gcite.knowledge.embed import UseEmbedder
from gcite.verify import SupportModel, answer_claims, best_support_by_chunk, spans, verify_answer

HANDBOOK = Path(__file__).resolve().parents[2] / "src" / "gcite" / "sample_data" / "handbook"


def _body(name: str) -> str:
    return (HANDBOOK / name).read_text("utf-8").split("---", 2)[2]


@pytest.fixture(scope="module")
def semantic() -> SupportModel:
    return SupportModel(UseEmbedder())


def test_spans_are_sentences_and_adjacent_pairs_with_offsets() -> None:
    text = _body("02-faults.md")
    found = spans(text)
    assert found
    for span in found:
        assert text[span.start : span.end] == span.text
    assert any("一级（紧急）" in s.text and "5 分钟" in s.text for s in found)
    assert spans("") == []
    assert [s.text for s in spans("只有标题")] == ["只有标题"]


@pytest.mark.parametrize("model_kind", ["lexical", "semantic"])
def test_support_finds_the_sentence_and_separates_right_from_wrong(
    model_kind: str, semantic: SupportModel
) -> None:
    model = SupportModel() if model_kind == "lexical" else semantic
    faults = _body("02-faults.md")
    fire = _body("03-fire.md")
    right = model.support("一级故障物业须在5分钟内到场。", faults)
    assert "5 分钟" in right.sentence and faults[right.start : right.end] == right.sentence
    assert right.score >= 0.6 and right.missing_numbers == ()
    wrong_number = model.support("二级故障物业须在5分钟内到场。", faults)
    assert "5" in wrong_number.missing_numbers or "2" in wrong_number.missing_numbers
    assert wrong_number.score < right.score
    off_topic = model.support("一级故障物业须在5分钟内到场。", fire)
    assert off_topic.score < 0.45 <= right.score
    if model_kind == "semantic":
        assert right.semantic is not None and right.semantic > 0.3
        assert model.name == "lexical+use"
    else:
        assert right.semantic is None and model.name == "lexical"


def test_support_of_empty_passage() -> None:
    found = SupportModel().support("五分钟内到场", "")
    assert found.score == 0.0 and found.sentence == "" and found.missing_numbers == ("5",)


def test_answer_claims_attach_markers_to_their_sentence() -> None:
    claims = answer_claims("先拔掉保险销[C:1]；再对准火焰根部。[C:1,2]\n没有标记的话")
    assert [(c.text, c.ids) for c in claims] == [
        ("先拔掉保险销；", ["1"]),
        ("再对准火焰根部。", ["1", "2"]),
        ("没有标记的话", []),
    ]
    plain = "先拔掉保险销；再对准火焰根部。\n没有标记的话"
    for claim in claims:
        assert plain[claim.start : claim.end] == claim.text
    assert answer_claims("") == []


def test_verify_answer_reports_scores_spans_and_weak_citations() -> None:
    faults = _body("02-faults.md")
    chunks = [{"id": "2", "content": faults}, {"id": "5", "content": _body("05-meeting-rooms.md")}]
    answer = "一级故障物业须在5分钟内到场[C:2]。会议室可以提前预订[C:2]。电梯困人要等[C:9]。"
    report = verify_answer(answer, chunks, SupportModel())
    assert report["version"] == 1 and report["model"] == "lexical"
    assert report["checked"] == 3 and report["supported"] == 1
    first, second, third = report["sentences"]
    cite = first["citations"][0]
    assert cite["supported"] and faults[cite["support"]["start"] : cite["support"]["end"]]
    assert "5 分钟" in cite["support"]["text"]
    assert not second["citations"][0]["supported"]
    assert third["citations"][0] == {
        "id": "9",
        "score": 0.0,
        "supported": False,
        "support": None,
        "missing_numbers": [],
    }
    assert report["weak"] == [{"sentence": 1, "id": "2"}, {"sentence": 2, "id": "9"}]
    best = best_support_by_chunk(report)
    assert best["2"]["sentence"] == 0 and best["2"]["supported"]
    assert verify_answer("根据现有资料无法确定", chunks, SupportModel())["checked"] == 0


def test_terminal_lines_show_the_supporting_sentence_or_the_weak_mark() -> None:
    from gcite.verify.terminal import WEAK_TEXT, support_lines

    chunks = [{"id": "2", "content": _body("02-faults.md")}, {"id": "7", "content": "无关\x1b[31m"}]
    report = verify_answer(
        "一级故障物业须在5分钟内到场[C:2]。会议室能订[C:7]。", chunks, SupportModel()
    )
    lines = support_lines(report)
    assert lines["2"].startswith("   依据：“") and "5 分钟" in lines["2"]
    assert lines["7"] == f"   ⚠ {WEAK_TEXT}" and "\x1b" not in "".join(lines.values())
    assert support_lines(None) == {} and support_lines({"sentences": []}) == {}


TRADITIONAL = "報修電話：6688-1234，二十四小時有人接聽。\n電梯困人時，物業須在兩分鐘內到場。"


def test_a_document_in_traditional_characters_supports_its_quote_and_a_paraphrase() -> None:
    # the claim's content words are cut from its simplified form: the span is read so too
    model = SupportModel()
    quoted = model.support("物業須在兩分鐘內到場。", TRADITIONAL)
    simple = model.support("物业须在两分钟内到场。", TRADITIONAL)
    assert quoted.score >= 0.9 and simple.score >= 0.9
    assert simple.sentence == "電梯困人時，物業須在兩分鐘內到場。"  # the document's characters
    assert simple.missing_numbers == ()  # "兩分鐘" states the 2 of "两分钟"


def test_the_second_dimension_reads_a_traditional_document_as_simplified() -> None:
    chunks = [
        {"id": "1", "source_type": "rag", "content": TRADITIONAL, "document_title": "物業手冊"}
    ]
    report = verify_answer(
        "電梯困人時，物業須在兩分鐘內到場[C:1]。",
        chunks,
        SupportModel(),
        question="电梯困人物业几分钟到",
    )
    assert report["supported"] == report["checked"] == 1
    assert report["answers_question"] is True
