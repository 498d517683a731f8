"""The verifier's report as the clients show it, and as terminal lines.

Pure. :func:`support_display` is the display rule of ``supportDisplay`` in
``clients/js/src/verification.js`` (shared through
``tests/vectors/verification-display.v1.json``): per cited chunk, whether its support is
weak and the supporting sentence to show. ``gcite ask`` prints, under each numbered
source, ``   依据：“…”`` (that sentence) or, when the verifier found no support,
``   ⚠ 该来源未能直接支持这句话``; a citation the verifier did not judge gets no line.
:func:`answer_notice` is the rule of ``answerNotice`` (``tests/vectors/answer-notice.v1.json``):
under an answer the verifier found not to answer the question, ``gcite ask`` prints
``⚠ 可能未回答所问的问题：“…”``. Control characters are removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from gcite.verify.verifier import best_support_by_chunk

WEAK_TEXT = "该来源未能直接支持这句话"
"""The line shown for a citation the verifier did not find supported."""
NOT_ANSWERED_TEXT = "可能未回答所问的问题"
"""The notice under an answer the verifier found not to answer the question."""
MAX_PART_CHARS = 40
"""Question parts named in the notice are cut to this many characters."""
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


class AnswerNotice(TypedDict):
    """What a client shows under an answer: the notice (or None) and the unanswered parts."""

    notice: str | None
    parts: list[str]


def answer_notice(report: Any) -> AnswerNotice:
    """The notice under an answer: ``{"notice": NOT_ANSWERED_TEXT, "parts": [...]}`` when
    the report says ``answers_question: false`` - ``parts`` the unanswered question parts
    (non-blank strings of ``answering.parts`` whose ``answered`` is not True and
    ``refused`` is not True, at most 3, each cut to ``MAX_PART_CHARS``) - else
    ``{"notice": None, "parts": []}``. The rule of ``answerNotice`` in
    ``clients/js/src/verification.js`` (``tests/vectors/answer-notice.v1.json``)."""
    if not isinstance(report, Mapping) or report.get("answers_question") is not False:
        return {"notice": None, "parts": []}
    answering = report.get("answering")
    parts = answering.get("parts") if isinstance(answering, Mapping) else None
    out: list[str] = []
    for part in parts if isinstance(parts, list) else []:
        if len(out) >= 3:
            break
        if not isinstance(part, Mapping) or part.get("answered") is True:
            continue
        text = part.get("text")
        if part.get("refused") is True or not isinstance(text, str) or not text.strip():
            continue
        text = text.strip()
        out.append(text if len(text) <= MAX_PART_CHARS else text[: MAX_PART_CHARS - 1] + "…")
    return {"notice": NOT_ANSWERED_TEXT, "parts": out}


def notice_text(report: Any) -> str:
    """The notice as one line: ``可能未回答所问的问题：“part”、“part”`` (the parts named when
    known); ``""`` when there is none (``answerNoticeText`` of the JavaScript client)."""
    shown = answer_notice(report)
    if shown["notice"] is None:
        return ""
    named = "、".join(f"“{p}”" for p in shown["parts"])
    return shown["notice"] + (f"：{named}" if named else "")


def notice_line(report: Any) -> str | None:
    """The terminal line under the answer: ``⚠`` and :func:`notice_text`, or None.
    Control characters are removed."""
    text = notice_text(report)
    return f"⚠ {_clean(text)}" if text else None


__all__ = [
    "MAX_CHARS",
    "MAX_PART_CHARS",
    "NOT_ANSWERED_TEXT",
    "WEAK_TEXT",
    "AnswerNotice",
    "SupportView",
    "answer_notice",
    "notice_line",
    "notice_text",
    "support_display",
    "support_line",
    "support_lines",
]
