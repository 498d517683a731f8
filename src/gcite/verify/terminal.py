"""The verifier's report as terminal lines: the supporting sentence under each source.

Pure. ``gcite ask`` prints, under each numbered source, ``   依据：“…”`` (the sentence of
that chunk that best supports the answer) or, when no answer sentence citing it is
supported, ``   ⚠ 该来源未能直接支持这句话``. Control characters are removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gcite.verify.verifier import best_support_by_chunk

WEAK_TEXT = "该来源未能直接支持这句话"
"""The line shown for a citation the verifier did not find supported."""
MAX_CHARS = 90
"""Supporting sentences longer than this are cut with an ellipsis."""


def _clean(text: str) -> str:
    flat = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return flat if len(flat) <= MAX_CHARS else flat[: MAX_CHARS - 1] + "…"


def support_lines(report: Mapping[str, Any] | None) -> dict[str, str]:
    """``raw chunk id -> line`` for every cited chunk of ``report`` (``{}`` for None or a
    report without sentences)."""
    if not isinstance(report, Mapping):
        return {}
    out: dict[str, str] = {}
    for raw, cite in best_support_by_chunk(report).items():
        support = cite.get("support") or {}
        text = _clean(str(support.get("text") or "")) if isinstance(support, Mapping) else ""
        if cite.get("supported") and text:
            out[raw] = f"   依据：“{text}”"
        else:
            out[raw] = f"   ⚠ {WEAK_TEXT}"
    return out


__all__ = ["MAX_CHARS", "WEAK_TEXT", "support_lines"]
