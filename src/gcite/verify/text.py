"""Text analysis shared by the verifier and the offline answerer: sentences, numbers.

Pure functions, no I/O.

* :func:`sentences` cuts a chunk (or any text) into sentences with their character
  offsets, and keeps the *context* a sentence needs to stay true: the chunk's heading
  lines and the label of a list item or paragraph ("一级（紧急）：", "第二十三条").
* The content words of a text with IDF weights come from the one tokeniser,
  :func:`gcite.knowledge.sparse.terms`; :func:`coverage` is the share of their weight a
  text holds; :func:`bigrams` the CJK character bigrams (robust to typos and to words
  jieba cuts differently).
* :func:`numbers` the numeric values a text states ("五个工作日" -> ``5``, "1万元" ->
  ``10000``, "千分之二" -> ``0.002``), which an answer sentence and its evidence must share.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_CJK = r"\u4e00-\u9fff"
_WORD_RE = re.compile(rf"[\w{_CJK}]")
_SENT_END = "。！？!?；;"
_SENTENCE_RE = re.compile(r"[^。！？!?；;\n]+[。！？!?；;]*[”’」』）)]*")
_CLAUSE_RE = re.compile(r"[^。！？!?\n]+[。！？!?]*[”’」』）)]*")
#: A label that opens a line and gives the line's context: "一级（紧急）：", "1. 报修：",
#: "第二十三条", "注意：". At most 16 characters, ended by a colon or (for articles) a space.
_LABEL_RE = re.compile(
    r"^\s*(?:[-*•·]\s*|\d{1,3}[.、)）]\s*)?"
    r"((?:第[零〇一二三四五六七八九十百千0-9]+条(?:之[一二三四五六七八九十]+)?)(?=[\s　])"
    r"|[^。！？!?；;：:\n]{1,16}[：:])"
)
_LIST_MARK_RE = re.compile(r"^\s*(?:[-*•·]|\d{1,3}[.、)）])\s*")


@dataclass(frozen=True)
class Sentence:
    """One sentence of a text.

    ``text``: the sentence as written (list marker and heading ``#`` removed, label kept);
    ``start``/``end``: its character offsets in the source text (``source[start:end]``
    contains ``text``); ``context``: what the sentence needs to stay true when quoted
    alone - the chunk's heading lines and, for a sentence inside a labelled line, the
    label (``"一级（紧急）："``); ``label``: that label alone (``""`` when none);
    ``heading``: True for a heading line (context, never an answer sentence).
    """

    text: str
    start: int
    end: int
    context: str = ""
    label: str = ""
    heading: bool = False


def _is_heading(line: str, first: bool) -> bool:
    text = line.strip()
    if not text or text[-1] in _SENT_END + "，,：:":
        return False
    return text.startswith("#") or " > " in text or (first and len(text) <= 40)


def sentences(text: str, *, semicolons: bool = True) -> list[Sentence]:
    """The sentences of ``text`` with offsets and context (see :class:`Sentence`).

    Lines are cut at 。！？!? and, with ``semicolons`` (default), at ；; too (False
    keeps an enumerated procedure "第一步……；第二步……。" in one sentence). A line's
    label ("一级（紧急）：") is the context of every sentence of that line; heading
    lines (Markdown ``#``, a breadcrumb ``A > B``, a short unpunctuated first line)
    are returned with ``heading=True`` and are the context of all later sentences.
    Pieces shorter than 2 characters are dropped.
    """
    out: list[Sentence] = []
    headings: list[tuple[int, str]] = []  # (Markdown level, 0 for a breadcrumb; text)
    offset = 0
    first = True
    for raw_line in text.splitlines(keepends=True):
        line_start = offset
        offset += len(raw_line)
        line = raw_line.rstrip("\r\n")
        if not line.strip():
            continue
        if _is_heading(line, first):
            first = False
            clean = line.strip().lstrip("#").strip()
            lead = len(line) - len(line.lstrip())
            out.append(Sentence(clean, line_start + lead, line_start + len(line), heading=True))
            level = len(line.strip()) - len(line.strip().lstrip("#"))
            if level:
                headings = [h for h in headings if h[0] < level or h[0] == 0]
            headings.append((level, clean))
            continue
        first = False
        marker = _LIST_MARK_RE.match(line)
        body_from = marker.end() if marker else 0
        label_match = _LABEL_RE.match(line)
        label = label_match.group(1).strip() if label_match else ""
        context = " ".join(h[1] for h in headings)
        pattern = _SENTENCE_RE if semicolons else _CLAUSE_RE
        for match in pattern.finditer(line, body_from):
            piece = match.group(0)
            stripped = piece.strip()
            if len(stripped) < 2 or not _WORD_RE.search(stripped):
                continue
            lead = len(piece) - len(piece.lstrip())
            start = line_start + match.start() + lead
            own_label = label if label and not stripped.startswith(label) else ""
            ctx = (context + " " + own_label).strip() if own_label else context
            out.append(
                Sentence(stripped, start, start + len(stripped), ctx, label=label, heading=False)
            )
    return out


def bigrams(text: str) -> set[str]:
    """CJK character bigrams and lower-cased ASCII words/numbers of ``text``."""
    out: set[str] = set()
    for run in re.findall(rf"[{_CJK}]+", text):
        if len(run) == 1:
            out.add(run)
        out.update(run[i : i + 2] for i in range(len(run) - 1))
    out.update(w.lower() for w in re.findall(r"[A-Za-z0-9]+", text))
    return out


def coverage(weights: dict[str, float], text: str) -> float:
    """Share (0..1) of the total weight of ``weights`` whose word occurs in ``text``."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    low = text.lower()
    return sum(w for word, w in weights.items() if word in low) / total


def bigram_coverage(needle: str, haystack: str) -> float:
    """Share (0..1) of ``needle``'s :func:`bigrams` found among ``haystack``'s."""
    mine = bigrams(needle)
    if not mine:
        return 0.0
    return len(mine & bigrams(haystack)) / len(mine)


# --- numbers -------------------------------------------------------------------------

_CN_DIGITS = dict(
    zip("零〇一二两三四五六七八九", (0, 0, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9), strict=True)
)
_CN_UNITS = {"十": 10, "百": 100, "千": 1000}
_CN_BIG = {"万": 10_000, "亿": 100_000_000}
_CN_NUM_CHARS = "零〇一二两三四五六七八九十百千万亿"
#: Measure words after which a lone Chinese numeral is a number ("一次", "三人").
_MEASURE = "个次日天年月周人名级元条倍层项具处台辆件份米分秒时小"
_ARABIC_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([万亿])?")
_PER_RE = re.compile(rf"([{_CN_NUM_CHARS}]+)分之([{_CN_NUM_CHARS}]+)")
_FRACTION_RE = re.compile(r"(\d+)\s*/\s*(\d+)")
_CN_RUN_RE = re.compile(rf"第?[{_CN_NUM_CHARS}]+")


def chinese_number(text: str) -> float | None:
    """The value of a Chinese numeral ("二十四" -> 24, "一百" -> 100, "五万" -> 50000).

    None when ``text`` is empty or holds another character.
    """
    if not text:
        return None
    total = 0.0
    section = 0.0
    number = 0.0
    last_digit = False
    for ch in text:
        if ch in _CN_DIGITS:
            number = number * 10 + _CN_DIGITS[ch] if last_digit else _CN_DIGITS[ch]
            last_digit = True
        elif ch in _CN_UNITS:
            section += (number or 1) * _CN_UNITS[ch]
            number, last_digit = 0.0, False
        elif ch in _CN_BIG:
            total += (section + number) * _CN_BIG[ch]
            section, number, last_digit = 0.0, 0.0, False
        else:
            return None
    return total + section + number


def _fmt(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


def numbers(text: str) -> set[str]:
    """Normalised numeric values stated in ``text`` (strings, e.g. ``{"5", "10000"}``).

    Arabic numbers (with 万/亿), fractions (``2/3``, ``三分之二`` -> ``0.667``), and
    Chinese numerals of two or more characters or followed by a measure word (``一次``,
    ``五个``). Article numbers (``第十二条``) and ordinals (``第一``) are not values.
    """
    found: set[str] = set()
    work = text
    for match in _PER_RE.finditer(work):
        den, num = chinese_number(match.group(1)), chinese_number(match.group(2))
        if den and num is not None:
            found.add(_fmt(round(num / den, 3)))
    work = _PER_RE.sub(" ", work)
    for match in _FRACTION_RE.finditer(work):
        den = float(match.group(2))
        if den:
            found.add(_fmt(round(float(match.group(1)) / den, 3)))
    work = _FRACTION_RE.sub(" ", work)
    work = re.sub(r"(?<=\d),(?=\d{3})", "", work)
    for match in _ARABIC_RE.finditer(work):
        value = float(match.group(1)) * (_CN_BIG[match.group(2)] if match.group(2) else 1)
        found.add(_fmt(value))
    work = _ARABIC_RE.sub(" ", work)
    for match in _CN_RUN_RE.finditer(work):
        run = match.group(0)
        if run.startswith("第"):
            continue
        after = work[match.end() : match.end() + 1]
        if len(run) < 2 and not (after and after in _MEASURE):
            continue
        if run in ("一一", "万一", "一万一"):
            continue
        parsed = chinese_number(run)
        if parsed and not math.isnan(parsed):
            found.add(_fmt(parsed))
    return found


__all__ = [
    "Sentence",
    "bigram_coverage",
    "bigrams",
    "chinese_number",
    "coverage",
    "numbers",
    "sentences",
]
