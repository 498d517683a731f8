"""The public surface of ``gcite`` is explicit and sorted (httpx style)."""

from __future__ import annotations

import gcite


def test_all_is_sorted_and_importable() -> None:
    assert gcite.__all__ == sorted(gcite.__all__)
    for name in gcite.__all__:
        assert hasattr(gcite, name), name
