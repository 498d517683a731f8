"""The verifier's report as the clients show it, and as terminal lines.

Pure. :func:`support_display` is the display rule of ``supportDisplay`` in
``clients/js/src/verification.js`` (shared through
``tests/vectors/verification-display.v1.json``): per cited chunk, whether its support is
weak and the supporting sentence to show. ``gcite ask`` prints, under each numbered
source, ``   依据：“…”`` (that sentence) or, when the verifier found no support,
``   ⚠ 该来源未能直接支持这句话``; a citation the verifier did not judge gets no line.
Control characters are removed.
"""

from __future__ import annotations

from typing import Any, TypedDict

from gcite.verify.verifier import best_support_by_chunk

WEAK_TEXT = "该来源未能直接支持这句话"
"""The line shown for a citation the verifier did not find supported."""
MAX_CHARS = 90
"""Supporting sentences longer than this are cut with an ellipsis."""


class SupportView(TypedDict):
    """What a client shows for one cited chunk."""

    id: str
    weak: bool
    score: float
    support: str | None


def _clean(text: str) -> str:
    flat = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return flat if len(flat) <= MAX_CHARS else flat[: MAX_CHARS - 1] + "…"


def support_display(report: Any) -> list[SupportView]:
    """Per cited raw id, in report order: ``{id, weak, score, support}`` — ``weak`` when
    the verifier found no support, ``support`` the supporting sentence (a non-blank
    string) of a supported citation, else ``None``. ``[]`` for anything that is not a
    report."""
    out: list[SupportView] = []
    for raw, cite in best_support_by_chunk(report).items():
        support = cite["support"]
        text = support.get("text") if support is not None else None
        shown = text if isinstance(text, str) and text.strip() else None
        out.append(
            {
                "id": raw,
                "weak": cite["supported"] is False,
                "score": cite["score"],
                "support": shown if cite["supported"] is True else None,
            }
        )
    return out


def support_line(view: SupportView) -> str | None:
    """The terminal line under a source: the weak warning, the supporting sentence, or
    ``None``."""
    if view["weak"]:
        return f"   ⚠ {WEAK_TEXT}"
    if view["support"] is not None:
        return f"   依据：“{_clean(view['support'])}”"
    return None


def support_lines(report: Any) -> dict[str, str]:
    """``raw chunk id -> line`` for every cited chunk of ``report`` that has a line (``{}``
    for anything that is not a report)."""
    out: dict[str, str] = {}
    for view in support_display(report):
        line = support_line(view)
        if line is not None:
            out[view["id"]] = line
    return out


__all__ = [
    "MAX_CHARS",
    "WEAK_TEXT",
    "SupportView",
    "support_display",
    "support_line",
    "support_lines",
]
