"""The marker grammar (citation-markers.md §1): the streaming matcher agrees with the regex."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gcite.stream import MARKER_RE, MarkerMatcher, Step, marker_ids, normalise_id

MARKERS = {
    "[C:7]": ["7"],
    "[c: 7]": ["7"],
    "【C：7】": ["7"],
    "［C:７］": ["7"],
    "[C:1,2]": ["1", "2"],
    "[C:1, C:2]": ["1", "2"],
    "[C:1，3、5]": ["1", "3", "5"],
    "[C:1;2；3]": ["1", "2", "3"],
    "[ Ｃ : 07 ]": ["7"],
    "【ｃ：０００９】": ["9"],
    "[C:1】": ["1"],  # any closer matches any opener
    "[C:1\u3000,\u3000c：2]": ["1", "2"],
    # version 2
    "[C:1-3]": ["1", "2", "3"],
    "[C:2–4]": ["2", "3", "4"],
    "【C：5～6】": ["5", "6"],
    "[C:8 ~ 10]": ["8", "9", "10"],
    "[C:1, C:4-5]": ["1", "4", "5"],
    "[C:3-3]": ["3"],
    "[C:1-10]": [str(i) for i in range(1, 11)],
    "\\[C:1\\]": ["1"],
    "\\[C:1]": ["1"],
    "[C:1\\]": ["1"],
    "[C:\t1]": ["1"],
    "[C:\u00a02\u202f]": ["2"],
}
NOT_MARKERS = [
    "[7]", "[C:]", "[C:x]", "[C 7]", "[CC:7]", "[注]", "[C:12345]", "(C:7)", "[C:1,]",
    "[C:1 2]", "[1, C:2]", "[C:1,,2]", "[C::1]", "C:1]", "[C:1", "[C:-1]", "[D:1]", "[C:1\n]",
    "[C:5-3]", "[C:1-20]", "[C:1-11]", "[C:1-2-3]", "[C:1-]", "[C:1-C:3]", "[C:1\\ ]", "\\\\[C:1]",
    "[C:1\\\\]", "\\(C:1)",
]  # fmt: skip
RANGE_TOO_WIDE = ["[C:5-3]", "[C:1-20]", "[C:1-11]"]  # the regex does not check range widths


def match(text: str) -> Step:
    """Run the matcher over a candidate (opener first); the step after the last character."""
    matcher = MarkerMatcher()
    if text.startswith("\\"):
        text = text[1:]
    if not text or text[0] not in "[【［":
        return Step.FAIL
    step = Step.MORE
    for ch in text[1:]:
        if step is not Step.MORE:
            return Step.FAIL  # characters after the end or after a failure
        step = matcher.step(ch)
    return step


@pytest.mark.parametrize(("text", "ids"), MARKERS.items())
def test_markers(text: str, ids: list[str]) -> None:
    assert MARKER_RE.fullmatch(text)
    assert match(text) is Step.DONE
    assert marker_ids(text) == ids


@pytest.mark.parametrize("text", NOT_MARKERS)
def test_not_markers(text: str) -> None:
    assert (MARKER_RE.fullmatch(text) is None) != (text in RANGE_TOO_WIDE)
    assert match(text) is not Step.DONE
    with pytest.raises(ValueError):
        marker_ids(text)


def test_prefix_of_a_marker_is_more() -> None:
    for prefix in ["[", "[C", "[C:", "[C:1", "[C:1,", "[C:1, C", "【C：", "[ "]:
        assert match(prefix) is Step.MORE


def test_normalise_id() -> None:
    assert normalise_id("７") == "7"
    assert normalise_id("07") == "7"
    assert normalise_id("0000") == "0"
    assert normalise_id("１０") == "10"
    for bad in ("", "12345", "1a", "-1"):
        with pytest.raises(ValueError):
            normalise_id(bad)


_alphabet = st.sampled_from(list("[]【】［］CcＣｃD:：,，、;；  \u300001９０x\n\t\u00a0-～\\"))


@settings(max_examples=600, deadline=None)
@given(body=st.lists(_alphabet, max_size=14).map("".join), opener=st.sampled_from("[【［"))
def test_matcher_accepts_exactly_the_regex_language(body: str, opener: str) -> None:
    text = opener + body
    ranges_ok = all(
        int(a) <= int(b) <= int(a) + 9
        for a, b in re.findall(r"(\d+)[ \t\u00a0\u3000]*[-～][ \t\u00a0\u3000]*(\d+)", text)
    )
    assert (match(text) is Step.DONE) == (MARKER_RE.fullmatch(text) is not None and ranges_ok)
    # MORE means some continuation could still complete a marker
    if match(text) is Step.MORE:
        assert any(MARKER_RE.fullmatch(text + tail) for tail in ("]", "1]", ":1]", "C:1]"))
