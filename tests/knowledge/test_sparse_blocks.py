"""The tokeniser hands jieba blocks of bounded length (its HMM step is quadratic in one)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gcite.knowledge import sparse

_BLOCK = re.compile(r"[\u3400-\u9fffa-z0-9+#&._%\-]+")


@pytest.fixture
def cut_inputs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts jieba is asked to cut, recorded while passed through to it."""
    jieba = sparse.jieba_module()
    seen: list[str] = []
    for name in ("lcut", "lcut_for_search"):
        real = getattr(jieba, name)

        def spy(text: str, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            seen.append(text)
            return _real(text, *args, **kwargs)

        monkeypatch.setattr(jieba, name, spy)
    return seen


@pytest.mark.parametrize("search", [True, False])
def test_a_long_run_of_one_character_reaches_jieba_in_bounded_blocks(
    cut_inputs: list[str], search: bool
) -> None:
    text = "水" * (sparse.MAX_BLOCK * 5 + 7) + ("a" if search else "b")
    words = sparse.words(text, search=search)
    assert cut_inputs, "jieba was not called"
    longest = max(len(m.group(0)) for t in cut_inputs for m in _BLOCK.finditer(t))
    assert longest <= sparse.MAX_BLOCK
    assert "".join(words).count("水") >= len(text) - 1
    assert any(set(word) == {"水"} for word in sparse.terms(text + "甲", search=search))


def test_a_block_at_the_limit_is_cut_as_jieba_cuts_it() -> None:
    jieba = sparse.jieba_module()
    unit = "夜间巡更每小时一次各点位打卡"
    at_limit = (unit * sparse.MAX_BLOCK)[: sparse.MAX_BLOCK]
    expected = [t.strip() for t in jieba.lcut_for_search(at_limit) if t.strip()]
    assert sparse.words(at_limit) == expected


def test_a_block_just_over_the_limit_is_cut_in_two() -> None:
    unit = "夜间巡更每小时一次各点位打卡"
    over = (unit * sparse.MAX_BLOCK)[: sparse.MAX_BLOCK + 1]
    jieba = sparse.jieba_module()
    head = [t for t in jieba.lcut_for_search(over[: sparse.MAX_BLOCK]) if t.strip()]
    tail = [t for t in jieba.lcut_for_search(over[sparse.MAX_BLOCK :]) if t.strip()]
    assert sparse.words(over) == head + tail


def test_sentences_of_real_text_are_cut_as_before() -> None:
    jieba = sparse.jieba_module()
    text = "A 线（地下）：B3 水泵房、B2 配电室，设备编号EQ-000123，夜间巡更每 1 小时一次。"
    lowered = text.lower()
    expected = [t.strip() for t in jieba.lcut_for_search(lowered) if t.strip()]
    expected = [t for t in expected if re.search(r"[\w\u3400-\u9fff]", t)]
    expected.append("eq-000123")
    assert sparse.words(text) == expected
