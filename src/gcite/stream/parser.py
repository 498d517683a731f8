"""The incremental citation parser: answer deltas in, segments with display indices out.

This is the mobile design document's stream buffer and idMap (§4.1, §4.2) with
the semantics of the marker spec (``citation-markers.md`` §2–§6):

- text is released as soon as it cannot be part of a marker; from an opener it
  is held back while it can still become one (bounded by ``max_hold``);
- a marker becomes one ``{"cite": raw_id, "idx": n}`` segment per valid id, where
  ``n`` is the display index given at the raw id's first appearance (idMap);
  ids outside ``known_ids`` are dropped and reported in :attr:`invalid`;
  the same raw id cited twice with nothing between collapses to one;
- fenced code blocks and inline code spans are literal;
- the output never depends on how the answer was cut into deltas, and the cost
  is linear in the answer length (each character is looked at a bounded number
  of times; plain runs are copied by one regex search).

Pure: no I/O. Misuse (feeding a closed parser, a non-``str`` delta) raises
``RuntimeError`` / ``TypeError``; malformed text never raises, it stays literal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, TypedDict, final

from gcite.stream.grammar import OPENERS, MarkerMatcher, Step


@final
class TextSegment(TypedDict):
    """Literal answer text (spec §6)."""

    text: str


@final
class CiteSegment(TypedDict):
    """One citation: the raw chunk id (``chunk_metadata[].id``) and its display index (from 1)."""

    cite: str
    idx: int


Segment = TextSegment | CiteSegment

_NORMAL, _INLINE, _FENCE = range(3)
_NORMAL_STOP: Final = re.compile("[`\n" + re.escape(OPENERS) + "]")
_INLINE_STOP: Final = re.compile("[`\n]")


def merge_segments(segments: Iterable[Segment]) -> list[Segment]:
    """Join adjacent text segments and drop empty ones (spec §6: adjacent text merges).

    Use it to combine the lists returned by successive :meth:`CitationParser.feed`
    calls into the final answer's segment list. Returns new dicts; the input is not changed.
    """
    out: list[Segment] = []
    parts: list[str] = []
    for seg in segments:
        if "text" in seg:
            parts.append(seg["text"])
            continue
        if parts:
            text = "".join(parts)
            if text:
                out.append({"text": text})
            parts = []
        out.append({"cite": seg["cite"], "idx": seg["idx"]})
    text = "".join(parts)
    if text:
        out.append({"text": text})
    return out


class CitationParser:
    """Incremental G-Cite marker parser with the idMap (mobile design document §4).

    ``known_ids``: the ``id`` values of ``chunk_metadata`` (strings; other values are
    converted with ``str``), or ``None`` when no chunk metadata was received, in
    which case every well-formed id is accepted (spec §2). ``max_hold`` (>= 2): the
    longest marker recognised, opener to closer, in characters (spec §5; the seeds use
    20, the default 32 leaves room for multi-id markers). Held text is therefore always
    shorter than ``max_hold``; a longer would-be marker is literal text. This is the
    JavaScript client's rule too (``clients/js``), so both agree on every input.
    ``ValueError`` for a bad ``max_hold``, ``TypeError`` when ``known_ids`` is a ``str``.

    ``feed(delta)`` returns the segments that became final with this delta (adjacent
    text already merged); ``close()`` releases held text at the end of the stream
    (``message_end``, an error or an abort) and returns the last segments.
    """

    def __init__(self, known_ids: Iterable[str] | None = None, max_hold: int = 32) -> None:
        if isinstance(max_hold, bool) or not isinstance(max_hold, int) or max_hold < 2:
            raise ValueError(f"max_hold must be an int >= 2, got {max_hold!r}")
        self._known: frozenset[str] | None = None
        self.set_known_ids(known_ids)
        self._max_hold = max_hold
        self._id_map: dict[str, int] = {}
        self._invalid: list[str] = []
        self._matcher = MarkerMatcher()
        self._held: list[str] = []
        # code state
        self._mode = _NORMAL
        self._code_char = ""
        self._code_len = 0
        self._line_start = True
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
        """The text currently held back (a possible marker start; shorter than ``max_hold``)."""
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
        self._consume(delta)
        return self._take()

    def close(self) -> list[Segment]:
        """End of stream: release held text as literal text; idempotent."""
        if not self._closed:
            self._closed = True
            self._release()
        return self._take()

    # -- output -------------------------------------------------------------------

    def _text(self, text: str) -> None:
        self._parts.append(text)
        self._last_cite = None

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
            self._out.append({"text": "".join(self._parts)})
            self._parts = []

    def _take(self) -> list[Segment]:
        self._flush_parts()
        out, self._out = self._out, []
        return out

    def _release(self) -> None:
        """The held text cannot become a marker: it is literal (it holds no opener after
        the first character, no backtick and no newline, so re-parsing it after the
        opener would also give plain text)."""
        if self._held:
            self._text("".join(self._held))
            self._held = []

    # -- state machine ------------------------------------------------------------

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
        self._run_char, self._run_len, self._run_at_line_start = ch, 1, self._line_start
        self._line_start = False
        self._text(ch)

    def _consume(self, text: str) -> None:
        i, n = 0, len(text)
        while i < n:
            if self._held:
                ch = text[i]
                step = self._matcher.step(ch)
                room = len(self._held) + 1 < self._max_hold
                if step is Step.DONE and len(self._held) < self._max_hold:
                    self._held = []
                    for raw_id in self._matcher.ids:
                        self._cite(raw_id)
                    i += 1
                elif step is Step.MORE and room:
                    self._held.append(ch)
                    i += 1
                else:  # FAIL, or no room left: the opener is literal; re-read ch
                    self._release()
                continue
            if self._run_len:
                if text[i] == self._run_char:
                    self._run_len += 1
                    self._text(text[i])
                    i += 1
                else:
                    self._resolve_run()
                continue
            if self._mode == _NORMAL:
                ch = text[i]
                if self._line_start and ch in "`~":
                    self._start_run(ch)
                    i += 1
                    continue
                m = _NORMAL_STOP.search(text, i)
                j = n if m is None else m.start()
                if j > i:
                    self._text(text[i:j])
                    self._line_start = False
                    i = j
                    continue
                if ch == "\n":
                    self._text(ch)
                    self._line_start = True
                elif ch == "`":
                    self._start_run(ch)
                else:  # an opener: hold it
                    self._matcher.reset()
                    self._held = [ch]
                    self._line_start = False
                i += 1
            elif self._mode == _INLINE:
                m = _INLINE_STOP.search(text, i)
                j = n if m is None else m.start()
                if j > i:
                    self._text(text[i:j])
                    self._line_start = False
                    i = j
                    continue
                if text[i] == "\n":
                    self._text("\n")
                    self._mode = _NORMAL
                    self._line_start = True
                else:
                    self._start_run("`")
                i += 1
            else:  # fenced code block
                if self._line_start and text[i] == self._code_char:
                    self._start_run(text[i])
                    i += 1
                    continue
                j = text.find("\n", i)
                if j < 0:
                    self._text(text[i:])
                    self._line_start = False
                    i = n
                else:
                    self._text(text[i : j + 1])
                    self._line_start = True
                    i = j + 1


@dataclass(frozen=True)
class ParseResult:
    """A whole answer parsed at once: merged ``segments``, ``citations``, ``invalid`` (spec §6)."""

    segments: list[Segment] = field(default_factory=list)
    citations: list[tuple[str, int]] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The answer without markers (the text segments joined)."""
        return "".join(s["text"] for s in self.segments if "text" in s)


def parse_all(
    text: str, known_ids: Iterable[str] | None = None, *, max_hold: int = 32
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
    return parse_all(text, None, max_hold=max(32, len(text))).text


def cited_ids(text: str, known_ids: Iterable[str] | None, *, max_hold: int = 32) -> list[str]:
    """The valid raw ids cited in ``text``, in display order, each once.

    The service uses it to build ``retriever_resources`` of only the cited chunks;
    with the default ``max_hold`` it matches what a streaming client displays.
    """
    return [raw_id for raw_id, _ in parse_all(text, known_ids, max_hold=max_hold).citations]
