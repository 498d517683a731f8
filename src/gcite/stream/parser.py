"""The incremental citation parser: answer deltas in, segments with display indices out.

This is the mobile design document's stream buffer and idMap (§4.1, §4.2) with
the semantics of the marker spec, version 2 (``citation-markers.md`` §2–§6):

- text is released as soon as it cannot be part of a marker; from an opener (or
  from the ``\\`` of an escaped marker) it is held back while it can still become
  one, bounded by ``max_hold``; when it cannot, the first held character is literal
  and parsing resumes right after it;
- a marker becomes one ``{"cite": raw_id, "idx": n}`` segment per valid id (ranges
  expanded), where ``n`` is the display index given at the raw id's first appearance
  (idMap); ids outside ``known_ids`` are dropped and reported in :attr:`invalid`;
  the same raw id cited twice with nothing between collapses to one;
- fenced code blocks (also inside list items and block quotes) and inline code
  spans are literal;
- a leading ``<think>``/``<thinking>`` block is reasoning: ``{"reasoning": text}``
  segments whose markers are never parsed (§4a);
- the output never depends on how the answer was cut into deltas, and the cost
  is linear in the answer length (each character is looked at a bounded number
  of times; plain runs are copied by one regex search).

Lone UTF-16 surrogates (what a JSON decoder makes of a surrogate pair split across
two model deltas) are joined when the pair completes across deltas and become
U+FFFD otherwise, so the segments are always encodable UTF-8.

Pure: no I/O. Misuse (feeding a closed parser, a non-``str`` delta) raises
``RuntimeError`` / ``TypeError``; malformed text never raises, it stays literal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, TypedDict, final

from gcite.stream.grammar import ESCAPE, OPENERS, MarkerMatcher, Step
from gcite.stream.surrogates import SurrogateJoiner


@final
class TextSegment(TypedDict):
    """Literal answer text (spec §6)."""

    text: str


@final
class CiteSegment(TypedDict):
    """One citation: the raw chunk id (``chunk_metadata[].id``) and its display index (from 1)."""

    cite: str
    idx: int


@final
class ReasoningSegment(TypedDict):
    """Reasoning text from a leading ``<think>`` block (spec §4a); never answer text."""

    reasoning: str


Segment = TextSegment | CiteSegment | ReasoningSegment

#: Default ``max_hold`` (spec §5, version 2).
DEFAULT_MAX_HOLD: Final = 64

_NORMAL, _INLINE, _FENCE = range(3)
# where the answer is: at its start (a reasoning block may open), in reasoning,
# dropping the line breaks after reasoning, in the answer body
_START, _REASON, _AFTER_REASON, _BODY = range(4)
# line-start state: mid-line, at a line start or inside container prefixes, after a
# list bullet (a space must follow), inside a list number
_LS_NONE, _LS_START, _LS_BULLET, _LS_DIGITS = range(4)
_MAX_LIST_DIGITS: Final = 9

_NORMAL_STOP: Final = re.compile("[`\n" + re.escape(OPENERS + ESCAPE) + "]")
_INLINE_STOP: Final = re.compile("[`\n]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_START_SPACE: Final = " \t\r\n"
_THINK_TAGS: Final = {"<think>": "</think>", "<thinking>": "</thinking>"}
_QUOTE_SPACE: Final = " \t>"
_BULLETS: Final = "-*+"


def merge_segments(segments: Iterable[Segment]) -> list[Segment]:
    """Join adjacent text (and adjacent reasoning) segments, drop empty ones (spec §6).

    Use it to combine the lists returned by successive :meth:`CitationParser.feed`
    calls into the final answer's segment list. Returns new dicts; the input is not changed.
    """
    out: list[Segment] = []
    kind = ""
    parts: list[str] = []

    def flush() -> None:
        text = "".join(parts)
        if text and kind == "text":
            out.append({"text": text})
        elif text:
            out.append({"reasoning": text})
        parts.clear()

    for seg in segments:
        if "text" in seg or "reasoning" in seg:
            this = "text" if "text" in seg else "reasoning"
            if this != kind:
                flush()
                kind = this
            parts.append(seg["text"] if "text" in seg else seg["reasoning"])
            continue
        flush()
        kind = ""
        out.append({"cite": seg["cite"], "idx": seg["idx"]})
    flush()
    return out


class CitationParser:
    """Incremental G-Cite marker parser with the idMap (mobile design document §4).

    ``known_ids``: the ``id`` values of ``chunk_metadata`` (strings; other values are
    converted with ``str``), or ``None`` when no chunk metadata was received, in
    which case every well-formed id is accepted (spec §2). ``max_hold`` (>= 2): the
    longest marker recognised, from its first character (the opener, or the ``\\`` of
    an escaped marker) to its closer, in characters (spec §5: default 64; the seeds
    use 20). Held text is therefore always shorter than ``max_hold``; a longer
    would-be marker is literal text. This is the JavaScript client's rule too
    (``clients/js``), so both agree on every input.
    ``ValueError`` for a bad ``max_hold``, ``TypeError`` when ``known_ids`` is a ``str``.

    ``feed(delta)`` returns the segments that became final with this delta (adjacent
    text already merged); ``close()`` releases held text at the end of the stream
    (``message_end``, an error or an abort) and returns the last segments.
    """

    def __init__(
        self, known_ids: Iterable[str] | None = None, max_hold: int = DEFAULT_MAX_HOLD
    ) -> None:
        if isinstance(max_hold, bool) or not isinstance(max_hold, int) or max_hold < 2:
            raise ValueError(f"max_hold must be an int >= 2, got {max_hold!r}")
        self._known: frozenset[str] | None = None
        self.set_known_ids(known_ids)
        self._max_hold = max_hold
        self._id_map: dict[str, int] = {}
        self._invalid: list[str] = []
        self._matcher = MarkerMatcher()
        self._held: list[str] = []
        self._surrogates = SurrogateJoiner()
        # answer phase (reasoning block)
        self._phase = _START
        self._start_space: list[str] = []
        self._start_tag = ""
        self._close_tag = ""
        self._reason_held = ""
        # code state
        self._mode = _NORMAL
        self._code_char = ""
        self._code_len = 0
        self._ls = _LS_START
        self._ls_list = False  # a list marker was seen in this line's prefix
        self._ls_digits = 0
        # pending run of backticks / tildes whose length is not known yet
        self._run_char = ""
        self._run_len = 0
        self._run_at_line_start = False
        self._last_cite: str | None = None
        self._closed = False
        # output of the current call
        self._out: list[Segment] = []
        self._parts: list[str] = []

    # -- public API ---------------------------------------------------------------

    @property
    def citations(self) -> list[tuple[str, int]]:
        """The idMap so far: ``(raw_id, display_idx)`` per cited chunk, in display order."""
        return list(self._id_map.items())

    @property
    def invalid(self) -> list[str]:
        """Raw ids dropped because they are not in ``known_ids``, in order, repeats kept."""
        return list(self._invalid)

    @property
    def held(self) -> str:
        """The text currently held back (a possible marker start; shorter than ``max_hold``,
        or the start of a possible reasoning block)."""
        if self._phase == _START:
            return "".join(self._start_space) + self._start_tag
        if self._phase == _REASON:
            return self._reason_held
        return "".join(self._held)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def set_known_ids(self, known_ids: Iterable[str] | None) -> None:
        """Replace the set of valid ids for markers completed from now on.

        Used when ``chunk_metadata`` arrives after the answer started (unusual); already
        emitted citations are final and stay as they are (spec §5).
        """
        if known_ids is None:
            self._known = None
        elif isinstance(known_ids, str):
            raise TypeError("known_ids must be an iterable of ids, not a str")
        else:
            self._known = frozenset(str(i) for i in known_ids)

    def feed(self, delta: str) -> list[Segment]:
        """Parse one more piece of the answer; returns the segments it made final."""
        if self._closed:
            raise RuntimeError("CitationParser.feed() after close()")
        if not isinstance(delta, str):
            raise TypeError(f"delta must be str, got {type(delta).__name__}")
        if self._surrogates.pending or _SURROGATE.search(delta) is not None:
            delta = self._surrogates.feed(delta)
        if self._phase == _BODY:
            self._body(delta)
        else:
            self._consume(delta)
        return self._take()

    def close(self) -> list[Segment]:
        """End of stream: release held text as literal text; idempotent."""
        if not self._closed:
            self._consume(self._surrogates.flush())
            self._closed = True
            if self._phase == _START:
                held = "".join(self._start_space) + self._start_tag
                self._phase = _BODY
                self._body(held)
            elif self._phase == _REASON:
                self._reasoning(self._reason_held)
                self._reason_held = ""
            self._release()
        return self._take()

    # -- output -------------------------------------------------------------------

    def _text(self, text: str) -> None:
        self._parts.append(text)
        self._last_cite = None

    def _reasoning(self, text: str) -> None:
        if not text:
            return
        last = self._out[-1] if self._out else None
        if last is not None and "reasoning" in last:
            last["reasoning"] += text
        else:
            self._out.append({"reasoning": text})

    def _cite(self, raw_id: str) -> None:
        if self._known is not None and raw_id not in self._known:
            self._invalid.append(raw_id)
            return
        if raw_id == self._last_cite:
            return
        idx = self._id_map.setdefault(raw_id, len(self._id_map) + 1)
        self._flush_parts()
        self._out.append({"cite": raw_id, "idx": idx})
        self._last_cite = raw_id

    def _flush_parts(self) -> None:
        if self._parts:
            text = "".join(self._parts)
            if text:
                self._out.append({"text": text})
            self._parts = []

    def _take(self) -> list[Segment]:
        self._flush_parts()
        out, self._out = self._out, []
        return out

    def _release(self) -> None:
        """End of stream: the held text is literal. It holds no closer, so no marker
        could start inside it and end later; re-parsing it would give the same text."""
        if self._held:
            self._text("".join(self._held))
            self._held = []

    # -- reasoning block (spec §4a) -------------------------------------------------

    def _consume(self, text: str) -> None:
        """Feed ``text`` through the phases before the body (start, reasoning, after it)."""
        i = 0
        while i < len(text) and self._phase != _BODY:
            if self._phase == _START:
                i = self._consume_start(text, i)
            elif self._phase == _REASON:
                text, i = self._consume_reasoning(text, i)
            else:  # line breaks right after the closing tag are dropped
                i = self._skip_line_break(text, i)
        if i < len(text):
            self._body(text[i:] if i else text)

    def _consume_start(self, text: str, i: int) -> int:
        """One character at the answer's start: a ``<think>`` tag or the body's start."""
        ch = text[i]
        if not self._start_tag and ch in _START_SPACE:
            self._start_space.append(ch)
            return i + 1
        tag = self._start_tag + ch
        if tag in _THINK_TAGS:
            self._phase, self._close_tag = _REASON, _THINK_TAGS[tag]
            self._start_space, self._start_tag = [], ""
        elif any(t.startswith(tag) for t in _THINK_TAGS):
            self._start_tag = tag
        else:  # no reasoning block: what was held is the answer's start
            held = "".join(self._start_space) + self._start_tag
            self._start_space, self._start_tag = [], ""
            self._phase = _BODY
            self._body(held)
            return i  # re-read ch in the body
        return i + 1

    def _consume_reasoning(self, text: str, i: int) -> tuple[str, int]:
        """Reasoning text up to the closing tag; returns the text and position to go on."""
        rest = self._reason_held + text[i:]
        end = rest.find(self._close_tag)
        if end >= 0:
            self._reasoning(rest[:end])
            self._reason_held = ""
            self._phase = _AFTER_REASON
            return rest, end + len(self._close_tag)
        keep = rest.rfind("<", max(0, len(rest) - len(self._close_tag) + 1))
        if keep >= 0 and self._close_tag.startswith(rest[keep:]):
            self._reasoning(rest[:keep])
            self._reason_held = rest[keep:]
        else:
            self._reasoning(rest)
            self._reason_held = ""
        return rest, len(rest)

    def _skip_line_break(self, text: str, i: int) -> int:
        if text[i] in "\r\n":
            return i + 1
        self._phase = _BODY
        return i

    # -- answer body state machine ----------------------------------------------------

    def _resolve_run(self) -> None:
        char, length, at_line_start = self._run_char, self._run_len, self._run_at_line_start
        self._run_len = 0
        if self._mode == _NORMAL:
            if at_line_start and length >= 3:
                self._mode, self._code_char, self._code_len = _FENCE, char, length
            elif char == "`":
                self._mode, self._code_len = _INLINE, length
        elif self._mode == _INLINE:
            if length == self._code_len:
                self._mode = _NORMAL
        elif at_line_start and char == self._code_char and length >= self._code_len:
            self._mode = _NORMAL

    def _start_run(self, ch: str) -> None:
        self._run_char, self._run_len = ch, 1
        self._run_at_line_start = self._ls == _LS_START
        self._ls = _LS_NONE
        self._text(ch)

    def _new_line(self) -> None:
        self._ls, self._ls_list, self._ls_digits = _LS_START, False, 0

    def _line_prefix(self, ch: str) -> bool:
        """At a line start: consume ``ch`` when it belongs to the container prefixes
        (spec §4: block quotes, spaces, tabs, one list marker); ``False`` ends them."""
        ls = self._ls
        if ls == _LS_START:
            if ch in _QUOTE_SPACE:
                self._text(ch)
                return True
            if not self._ls_list and ch in _BULLETS:
                self._ls, self._ls_list = _LS_BULLET, True
                self._text(ch)
                return True
            if not self._ls_list and "0" <= ch <= "9":
                self._ls, self._ls_list, self._ls_digits = _LS_DIGITS, True, 1
                self._text(ch)
                return True
        elif ls == _LS_BULLET:
            if ch in " \t":
                self._ls = _LS_START
                self._text(ch)
                return True
        elif "0" <= ch <= "9" and self._ls_digits < _MAX_LIST_DIGITS:
            self._ls_digits += 1
            self._text(ch)
            return True
        elif ch in ".)":
            self._ls = _LS_BULLET
            self._text(ch)
            return True
        self._ls = _LS_NONE
        return False

    def _hold_fail(self) -> None:
        """The held text cannot become a marker: its first character is literal and
        parsing resumes right after it (spec §5)."""
        first, rest = self._held[0], "".join(self._held[1:])
        self._held = []
        self._text(first)
        if rest:
            self._body(rest)

    def _body(self, text: str) -> None:
        """The answer body: each step consumes one character or one plain run."""
        i, n = 0, len(text)
        while i < n:
            if self._held:
                i = self._held_step(text, i)
            elif self._run_len:
                i = self._run_step(text, i)
            else:
                i = self._plain_step(text, i, n)

    def _held_step(self, text: str, i: int) -> int:
        """A possible marker is held: one more character (spec §5)."""
        held, ch, max_hold = self._held, text[i], self._max_hold
        if len(held) == 1 and held[0] == ESCAPE:  # an escape waits for its opener
            if ch in OPENERS and max_hold > 2:
                held.append(ch)
                self._matcher.reset()
                return i + 1
            self._hold_fail()
            return i
        step = self._matcher.step(ch)
        if step is Step.MORE and len(held) + 1 < max_hold:
            held.append(ch)
            return i + 1
        if step is Step.DONE and len(held) < max_hold:
            self._held = []
            for raw_id in self._matcher.ids:
                self._cite(raw_id)
            return i + 1
        self._hold_fail()  # FAIL, or no room left; re-read ch
        return i

    def _run_step(self, text: str, i: int) -> int:
        """Inside a run of backticks or tildes: extend it or resolve what it opens/closes."""
        if text[i] == self._run_char:
            self._run_len += 1
            self._text(text[i])
            return i + 1
        self._resolve_run()
        return i

    def _plain_step(self, text: str, i: int, n: int) -> int:
        """Neither holding nor in a run: line prefixes, then by code mode."""
        ch = text[i]
        if self._ls != _LS_NONE:
            if self._ls == _LS_START and ch in "`~" and self._mode != _INLINE:
                self._start_run(ch)
                return i + 1
            if self._line_prefix(ch):
                return i + 1
        if self._mode == _NORMAL:
            return self._normal_step(text, i, n)
        if self._mode == _INLINE:
            return self._inline_step(text, i, n)
        return self._fence_step(text, i, n)

    def _normal_step(self, text: str, i: int, n: int) -> int:
        """Outside code: copy the plain run, then a line break, a backtick or an opener."""
        m = _NORMAL_STOP.search(text, i)
        j = n if m is None else m.start()
        if j > i:
            self._text(text[i:j])
            return j
        ch = text[i]
        if ch == "\n":
            self._text(ch)
            self._new_line()
        elif ch == "`":
            self._start_run(ch)
        else:  # an opener or an escape: hold it
            self._matcher.reset()
            self._held = [ch]
        return i + 1

    def _inline_step(self, text: str, i: int, n: int) -> int:
        """Inside an inline code span: literal up to a backtick run or a line break."""
        m = _INLINE_STOP.search(text, i)
        j = n if m is None else m.start()
        if j > i:
            self._text(text[i:j])
            return j
        if text[i] == "\n":
            self._text("\n")
            self._mode = _NORMAL
            self._new_line()
        else:
            self._start_run("`")
        return i + 1

    def _fence_step(self, text: str, i: int, n: int) -> int:
        """Inside a fenced code block: literal up to and including the line break."""
        j = text.find("\n", i)
        if j < 0:
            self._text(text[i:])
            return n
        self._text(text[i : j + 1])
        self._new_line()
        return j + 1


@dataclass(frozen=True)
class ParseResult:
    """A whole answer parsed at once: merged ``segments``, ``citations``, ``invalid`` (spec §6)."""

    segments: list[Segment] = field(default_factory=list)
    citations: list[tuple[str, int]] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The answer without markers and without reasoning (the text segments joined)."""
        return "".join(s["text"] for s in self.segments if "text" in s)

    @property
    def reasoning(self) -> str:
        """The reasoning of a leading ``<think>`` block (spec §4a), ``""`` when none."""
        return "".join(s["reasoning"] for s in self.segments if "reasoning" in s)


def parse_all(
    text: str, known_ids: Iterable[str] | None = None, *, max_hold: int = DEFAULT_MAX_HOLD
) -> ParseResult:
    """Parse a complete answer (one delta, then close) — same output as any streaming split."""
    parser = CitationParser(known_ids, max_hold=max_hold)
    segments = parser.feed(text) + parser.close()
    return ParseResult(merge_segments(segments), parser.citations, parser.invalid)


def strip_markers(text: str) -> str:
    """The answer with every well-formed marker outside code removed (ids not checked).

    Used to put earlier answers back into the conversation history without their
    citation markers. No hold limit applies here, so long multi-id markers go too.
    Linear in ``len(text)``.
    """
    return parse_all(text, None, max_hold=max(DEFAULT_MAX_HOLD, len(text) + 1)).text


def cited_ids(
    text: str, known_ids: Iterable[str] | None, *, max_hold: int = DEFAULT_MAX_HOLD
) -> list[str]:
    """The valid raw ids cited in ``text``, in display order, each once.

    The service uses it to build ``retriever_resources`` of only the cited chunks;
    with the default ``max_hold`` it matches what a streaming client displays.
    """
    return [raw_id for raw_id, _ in parse_all(text, known_ids, max_hold=max_hold).citations]
