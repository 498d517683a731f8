"""CitationParser: streaming semantics of citation-markers.md §2–§6, examples and properties."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gcite.stream import (
    MARKER_RE,
    CitationParser,
    Segment,
    cited_ids,
    marker_ids,
    merge_segments,
    parse_all,
    strip_markers,
)

KNOWN = [str(i) for i in range(1, 11)]


def run(
    deltas: Sequence[str], known: Sequence[str] | None = KNOWN, max_hold: int = 64
) -> list[Segment]:
    parser = CitationParser(known, max_hold)
    out: list[Segment] = []
    for delta in deltas:
        out.extend(parser.feed(delta))
    out.extend(parser.close())
    return merge_segments(out)


def _regex_markers(text: str) -> list[tuple[int, int, list[str]]]:
    """Markers by the regex, left to right: at each position the regex match, kept only
    when its ranges are valid (else the first character is text and the search goes on)."""
    found = []
    pos = 0
    while (m := MARKER_RE.search(text, pos)) is not None:
        ids = [str(int(d.translate(WIDE))) for d in re.findall("[0-9０-９]{1,4}", m.group())]
        pairs = re.findall(r"([0-9０-９]+)\s*[-–~～]\s*([0-9０-９]+)", m.group())
        ranges = [(int(a.translate(WIDE)), int(b.translate(WIDE))) for a, b in pairs]
        if all(a <= b <= a + 9 for a, b in ranges):
            for a, b in ranges:  # expand "a-b": the ids between a and b
                at = ids.index(str(a))
                ids[at + 1 : at + 2] = [str(k) for k in range(a + 1, b + 1)]
            found.append((m.start(), m.end(), ids))
            pos = m.end()
        else:
            pos = m.start() + 1
    return found


WIDE = str.maketrans("０１２３４５６７８９", "0123456789")


def reference(text: str, known: Sequence[str] | None) -> list[Segment]:
    """A non-streaming model of the spec for text without code: leftmost regex matches."""
    known_set = None if known is None else set(known)
    out: list[Segment] = []
    id_map: dict[str, int] = {}
    last: str | None = None
    pos = 0
    for start, end, ids in _regex_markers(text):
        if start > pos:
            out.append({"text": text[pos:start]})
            last = None
        for raw in ids:
            if known_set is not None and raw not in known_set:
                continue
            if raw == last:
                continue
            idx = id_map.setdefault(raw, len(id_map) + 1)
            out.append({"cite": raw, "idx": idx})
            last = raw
        pos = end
    if pos < len(text):
        out.append({"text": text[pos:]})
    return merge_segments(out)


# -- examples -------------------------------------------------------------------------


def test_seed_timeline_holds_marker_until_closer() -> None:
    # mobile design document §4.1: "登录需要[C:1]，密码" fed one char at a time
    parser = CitationParser(KNOWN)
    seen = []
    for ch in "登录需要[C:1]，密码":
        seen.append((parser.feed(ch), parser.held))
    assert seen[4] == ([], "[")
    assert seen[7] == ([], "[C:1")
    assert seen[8] == ([{"cite": "1", "idx": 1}], "")
    assert "".join(s["text"] for segs, _ in seen for s in segs if "text" in s) == "登录需要，密码"


def test_text_is_released_as_soon_as_it_cannot_be_a_marker() -> None:
    parser = CitationParser(KNOWN)
    assert parser.feed("参见[") == [{"text": "参见"}]
    assert parser.held == "["
    assert parser.feed("注") == [{"text": "[注"}]
    assert parser.held == ""


def test_repeat_reuses_index_and_citations_are_in_display_order() -> None:
    parser = CitationParser(KNOWN)
    segs = parser.feed("A[C:7]B[C:2]C[C:6]D[C:2]") + parser.close()
    assert [s["idx"] for s in segs if "cite" in s] == [1, 2, 3, 2]
    assert parser.citations == [("7", 1), ("2", 2), ("6", 3)]


def test_invalid_ids_are_dropped_reported_and_do_not_break_collapse() -> None:
    result = parse_all("甲[C:2][C:9][C:2]乙[C:0][C:9]", ["1", "2"])
    assert result.segments == [{"text": "甲"}, {"cite": "2", "idx": 1}, {"text": "乙"}]
    assert result.invalid == ["9", "0", "9"]
    assert result.citations == [("2", 1)]


def test_without_metadata_every_well_formed_id_is_accepted() -> None:
    assert parse_all("x[C:0]y[C:9999]", None).citations == [("0", 1), ("9999", 2)]


def test_multi_id_marker_keeps_written_order_and_collapses_repeats() -> None:
    assert run(["[C:1,1,2,1]"]) == [
        {"cite": "1", "idx": 1},
        {"cite": "2", "idx": 2},
        {"cite": "1", "idx": 1},
    ]


@pytest.mark.parametrize(
    "text",
    ["[7]", "[C:]", "[C:x]", "[C 7]", "[CC:7]", "[注]", "[C:12345]", "(C:7)", "[C:1,]", "[C:1 2]"],
)
def test_non_markers_stay_literal(text: str) -> None:
    assert run([text]) == [{"text": text}]


def test_max_hold_bounds_the_whole_marker() -> None:
    marker = "[C:1,2,3]"  # 9 characters
    assert run([marker], max_hold=9) == [
        {"cite": "1", "idx": 1},
        {"cite": "2", "idx": 2},
        {"cite": "3", "idx": 3},
    ]
    assert run([marker], max_hold=8) == [{"text": marker}]
    parser = CitationParser(KNOWN, max_hold=8)
    for ch in marker:
        parser.feed(ch)
        assert len(parser.held) < 8


def test_long_whitespace_marker_is_released_at_the_default_limit() -> None:
    text = "[C:" + " " * 60 + "1]"
    parser = CitationParser(KNOWN)
    out = []
    for ch in text:
        out += parser.feed(ch)
        assert len(parser.held) < 64
    assert merge_segments(out + parser.close()) == [{"text": text}]
    fits = "[C:" + " " * 59 + "1]"
    assert len(fits) == 64
    assert run([fits]) == [{"cite": "1", "idx": 1}]
    # the escape counts: too long with it, the backslash is literal and the rest fits
    assert run(["\\" + fits]) == [{"text": "\\"}, {"cite": "1", "idx": 1}]


def test_close_releases_held_text_and_is_idempotent() -> None:
    parser = CitationParser(KNOWN)
    assert parser.feed("结论[C:1") == [{"text": "结论"}]
    assert parser.close() == [{"text": "[C:1"}]
    assert parser.close() == []
    with pytest.raises(RuntimeError):
        parser.feed("x")


def test_bad_arguments() -> None:
    with pytest.raises(TypeError):
        CitationParser(KNOWN).feed(b"[C:1]")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        CitationParser("123")
    for bad in (1, 0, -3, True, 2.5):
        with pytest.raises(ValueError):
            CitationParser(KNOWN, bad)  # type: ignore[arg-type]


def test_known_ids_are_compared_as_strings() -> None:
    assert parse_all("[C:3]", [3]).citations == [("3", 1)]  # type: ignore[list-item]


def test_known_ids_can_arrive_late_and_apply_from_then_on() -> None:
    parser = CitationParser(None)
    parser.feed("a[C:8]")
    parser.set_known_ids(["1"])
    parser.feed("b[C:8]c[C:1]")
    parser.close()
    assert parser.citations == [("8", 1), ("1", 2)]
    assert parser.invalid == ["8"]


# -- code is literal (§4) -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cited"),
    [
        ("```python\nx = a[C:1]\n```\n结果[C:2]", ["2"]),
        ("~~~\n[C:1]\n~~~\n[C:2]", ["2"]),
        ("````\n```\n[C:1]\n````\n[C:2]", ["2"]),  # a shorter fence does not close
        ("```\n[C:1]\n~~~\n[C:3]\n```\n[C:2]", ["2"]),  # another fence char does not close
        ("```\n[C:1]", []),  # unclosed fence runs to the end
        ("用 `arr[C:1]` 和 ``a ` [C:3]`` 后[C:2]", ["2"]),
        ("`open span [C:1]\n[C:2]", ["2"]),  # an inline span ends at the line end
        ("a ```x [C:1]``` [C:2]", ["2"]),  # not at line start: an inline span of 3
        ("~~ [C:2]", ["2"]),  # two tildes are text
        ("文 ~~~ [C:2]", ["2"]),  # tildes inside a line are text
    ],
)
def test_code_is_literal(text: str, cited: list[str]) -> None:
    result = parse_all(text, KNOWN)
    assert [raw for raw, _ in result.citations] == cited
    assert result.text == text.replace("[C:2]", "")  # "[C:2]" only ever appears outside code
    assert run(list(text)) == result.segments


def test_fence_and_marker_split_across_deltas() -> None:
    deltas = ["`", "``py", "\nx[C:", "1]\n`", "``\n【C", "：1】"]
    assert run(deltas) == [{"text": "```py\nx[C:1]\n```\n"}, {"cite": "1", "idx": 1}]


# -- helpers for the service ---------------------------------------------------------


def test_strip_markers_removes_every_marker_outside_code() -> None:
    long_marker = "[C:" + ", ".join(str(i) for i in range(1, 25)) + "]"  # > 64 chars
    text = f"答[C:1]案【C：2】，{long_marker}。`[C:3]`"
    assert strip_markers(text) == "答案，。`[C:3]`"
    assert strip_markers("") == ""


def test_cited_ids_are_valid_unique_and_in_display_order() -> None:
    assert cited_ids("a[C:7]b[C:2][C:99]c[C:7]d[C:6]", KNOWN) == ["7", "2", "6"]
    assert cited_ids("a[C:99]", None) == ["99"]


# -- properties (issue item 4) ------------------------------------------------------------

_pieces = st.sampled_from(
    [
        "[C:1]", "[C:2]", "【C：3】", "［c: ４］", "[C:1,2]", "[C:3, C:9]", "[C:0]", "[C:12345]",
        "[C:", "[", "】", "]", "【", "C", ":", "1", "，", " ", "\u3000", "[注]", "[7]",
        "文本", "巡更人员", "。", "a", "\n", "x[C:10]y",
        "[C:1-3]", "[C:2–4]", "【C：5～6】", "[C:1, C:4-5]", "[C:5-3]", "[C:1-20]", "-", "～",
        "\\[C:1\\]", "\\[C:2]", "[C:3\\]", "\\", "\\[", "a\\b", "[C:\t1]", "[C:\u00a02]",
        "[C:3\u202f]", "\t",
    ]
)  # fmt: skip
_texts = st.lists(_pieces, max_size=40).map("".join)
_code_pieces = st.one_of(
    _pieces,
    st.sampled_from(
        ["`", "``", "```", "\n```\n", "~~~", "\n~~~", "\n- ```\n", "\n> ```\n", "\n1. ~~~\n",
         "\n   ```\n", "\n- ", "\n> ", "\n12) ", "<think>", "</think>", "<thi", "\r\n", "\ud83d",
         "\ude00", "😀"]
    ),
)  # fmt: skip
_starts = st.sampled_from(["", "", "<think>", "<thinking>", " \n<think>", "<thi"])
_code_texts = st.lists(_code_pieces, max_size=40).map("".join)
_known = st.one_of(st.none(), st.just(KNOWN), st.just(["1", "2", "3"]))


@st.composite
def _cut(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=_code_texts, start=_starts, known=_known, data=st.data(),
    max_hold=st.sampled_from([5, 9, 32, 64]),
)  # fmt: skip
def test_property_split_invariance(
    text: str, start: str, known: list[str] | None, data: st.DataObject, max_hold: int
) -> None:
    text = start + text
    deltas = data.draw(_cut(text))
    whole = CitationParser(known, max_hold)
    expected = merge_segments(whole.feed(text) + whole.close())
    parser = CitationParser(known, max_hold)
    out: list[Segment] = []
    for delta in deltas:
        out.extend(parser.feed(delta))
        assert len(parser.held) < max(max_hold, 12)  # a "<thinking>" start may be held
    out.extend(parser.close())
    assert merge_segments(out) == expected
    assert parser.citations == whole.citations
    assert parser.invalid == whole.invalid


@settings(max_examples=300, deadline=None)
@given(text=_texts, known=_known, data=st.data())
def test_property_no_marker_text_is_ever_emitted(
    text: str, known: list[str] | None, data: st.DataObject
) -> None:
    # After every delta, the text shown so far is a prefix of the answer with all of
    # its markers removed: a marker's raw text never appears, not even for a moment,
    # and shown text is never retracted. (No code in these texts; no hold limit hit.)
    final_text = _strip_reference(text)
    parser = CitationParser(known, max_hold=len(text) + 2)
    shown: list[str] = []
    for delta in [*data.draw(_cut(text)), None]:
        segments = parser.close() if delta is None else parser.feed(delta)
        shown.extend(seg["text"] for seg in segments if "text" in seg)
        assert final_text.startswith("".join(shown))
        for seg in segments:
            if "text" in seg and known is None:  # nothing dropped: no marker can form
                assert _regex_markers(seg["text"]) == [], seg
    assert "".join(shown) == final_text


@settings(max_examples=300, deadline=None)
@given(text=_texts, known=_known)
def test_property_matches_the_reference_model(text: str, known: list[str] | None) -> None:
    # no code in these texts; a hold limit above the text length makes every marker count
    assert run([text], known, max_hold=len(text) + 2) == reference(text, known)
    assert strip_markers(text) == _strip_reference(text)


def _strip_reference(text: str) -> str:
    kept, pos = [], 0
    for start, end, _ in _regex_markers(text):
        kept.append(text[pos:start])
        pos = end
    return "".join(kept) + text[pos:]


def test_many_late_failing_openers_stay_literal() -> None:
    text = ("[C:1,2,3,4,5,6,7" + "x") * 5000
    result = parse_all(text, KNOWN)
    assert result.text == text


# -- version 2 ------------------------------------------------------------------------


def test_ranges_expand_and_invalid_ranges_stay_literal() -> None:
    assert parse_all("见[C:1-3]。", KNOWN).citations == [("1", 1), ("2", 2), ("3", 3)]
    assert parse_all("[C:8 ~ 10][C:1, C:4-5]", KNOWN).citations == [
        ("8", 1), ("9", 2), ("10", 3), ("1", 4), ("4", 5), ("5", 6),
    ]  # fmt: skip
    for bad in ("[C:1-11]", "[C:5-3]", "[C:1-2-3]", "[C:1-]", "[C:1-C:3]"):
        assert run(["见" + bad]) == [{"text": "见" + bad}], bad
    # members of a range outside known_ids are invalid one by one
    result = parse_all("[C:9-12]", KNOWN)
    assert result.citations == [("9", 1), ("10", 2)]
    assert result.invalid == ["11", "12"]


def test_escaped_markers_hide_their_backslashes() -> None:
    assert run(["如此\\[C:", "1\\]。"]) == [
        {"text": "如此"},
        {"cite": "1", "idx": 1},
        {"text": "。"},
    ]
    assert run(["[C:1\\]"]) == [{"cite": "1", "idx": 1}]
    assert run(["\\\\[C:1]"]) == [{"text": "\\"}, {"cite": "1", "idx": 1}]
    assert run(["[C:1\\ ]"]) == [{"text": "[C:1\\ ]"}]
    # a failing marker's trailing backslash may start the next (escaped) marker
    assert run(["[C:1\\[C:2]"]) == [{"text": "[C:1"}, {"cite": "2", "idx": 1}]
    parser = CitationParser(KNOWN)
    assert parser.feed("a\\") == [{"text": "a"}]
    assert parser.held == "\\"
    assert parser.feed("b") == [{"text": "\\b"}]


def test_fences_inside_list_items_and_block_quotes() -> None:
    for text in (
        "- ```\n  [C:1]\n  ```\n[C:2]", "1. ```py\n   [C:1]\n   ```\n[C:2]",
        "> ```\n> [C:1]\n> ```\n[C:2]", "> - ~~~\n> [C:1]\n> ~~~\n[C:2]",
        "12) ````\n[C:1]\n````\n[C:2]", "   ```\n[C:1]\n```\n[C:2]",
    ):  # fmt: skip
        assert parse_all(text, KNOWN).citations == [("2", 1)], text
    for text in ("-```\n[C:1]", "- - ```\n[C:1]", "1234567890. ```\n[C:1]", "1.```\n[C:1]"):
        assert parse_all(text, KNOWN).citations == [("1", 1)], text


def test_leading_think_block_is_reasoning() -> None:
    result = parse_all(" \n<think>看[C:1]和[C:99]\n</think>\r\n\n答案[C:2]", KNOWN)
    assert result.segments == [
        {"reasoning": "看[C:1]和[C:99]\n"}, {"text": "答案"}, {"cite": "2", "idx": 1},
    ]  # fmt: skip
    assert (result.invalid, result.reasoning, result.text) == ([], "看[C:1]和[C:99]\n", "答案")
    assert run(["<thinking>a</thinking> b"]) == [{"reasoning": "a"}, {"text": " b"}]
    assert run(["<thinking>a</think>b"]) == [{"reasoning": "a</think>b"}]
    assert run(["<think"]) == [{"text": "<think"}]
    assert run(["  <b>x"]) == [{"text": "  <b>x"}]
    assert run(["x<think>y</think>"]) == [{"text": "x<think>y</think>"}]
    parser = CitationParser(KNOWN)
    assert parser.feed(" <thi") == []
    assert parser.held == " <thi"
    assert parser.feed("nk>想</th") == [{"reasoning": "想"}]
    assert parser.held == "</th"
    assert parser.feed("x") == [{"reasoning": "</thx"}]
    assert strip_markers("<think>x[C:1]</think>答[C:2]") == "答"
    assert cited_ids("<think>[C:1]</think>[C:2]", None) == ["2"]


def test_lone_surrogates_become_replacement_and_split_pairs_join() -> None:
    parser = CitationParser(KNOWN)
    out = parser.feed("a\ud83d") + parser.feed("\udeaab\udc00") + parser.feed("\ud83d")
    out += parser.close()
    assert merge_segments(out) == [{"text": "a🚪b\ufffd\ufffd"}]
    assert "".join(s["text"] for s in out if "text" in s).encode("utf-8")
    assert marker_ids("\\[C:2-4\\]") == ["2", "3", "4"]
