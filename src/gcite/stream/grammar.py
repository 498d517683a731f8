"""The G-Cite marker grammar (version 2): character classes, a streaming matcher, a regex.

A marker cites one or more chunk ids, e.g. ``[C:7]``, ``【C：7】``, ``[C:1, C:2]``,
``[C:1，3、5]``, ``[C:1-3]``, ``\\[C:1\\]`` (spec ``citation-markers.md`` §1; the seeds fix
``[C:N]``, platform design document §5.2, mobile design document §4.1)::

    marker := [ESC] OPEN ws item (ws SEP ws item)* ws [ESC] CLOSE
    item   := [PREFIX ws COLON ws] id [ws RANGE ws id]   -- the first item carries the prefix
    id     := DIGIT{1,4}

A range ``a-b`` cites ``a, a+1, ..., b`` and is valid only when ``a <= b`` and
``b - a <= 9``; a marker holding an invalid range is no marker (literal text).

:class:`MarkerMatcher` recognises the grammar one character at a time after the
opener (the stream parser must know after every character whether the held text
can still become a marker; the optional leading ``\\`` is the parser's business);
:data:`MARKER_RE` is the same language as a regular expression except that it does
not check range widths, used for whole-text checks and as the naive benchmark
baseline. Pure, standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum
from typing import Final

OPENERS: Final = "[【［"
CLOSERS: Final = "]】］"
PREFIXES: Final = "CcＣｃ"
COLONS: Final = ":："
SEPARATORS: Final = ",，、;；"
RANGES: Final = "-–~～"
SPACES: Final = " \t\u00a0\u202f\u3000"
ESCAPE: Final = "\\"
ASCII_DIGITS: Final = "0123456789"
WIDE_DIGITS: Final = "０１２３４５６７８９"
MAX_ID_DIGITS: Final = 4
#: A range ``a-b`` may span at most this many steps (ten ids).
MAX_RANGE_SPAN: Final = 9

_DIGIT_VALUE: Final = {c: str(i) for i, c in enumerate(ASCII_DIGITS)} | {
    c: str(i) for i, c in enumerate(WIDE_DIGITS)
}

# character classes
_WS, _PREFIX, _COLON, _SEP, _CLOSE, _DIGIT, _RANGE, _ESC = range(8)
_CLASS: Final[dict[str, int]] = (
    dict.fromkeys(SPACES, _WS)
    | dict.fromkeys(PREFIXES, _PREFIX)
    | dict.fromkeys(COLONS, _COLON)
    | dict.fromkeys(SEPARATORS, _SEP)
    | dict.fromkeys(CLOSERS, _CLOSE)
    | dict.fromkeys(ASCII_DIGITS + WIDE_DIGITS, _DIGIT)
    | dict.fromkeys(RANGES, _RANGE)
    | {ESCAPE: _ESC}
)

# matcher states (after the opener)
(
    _S_OPEN,  # after OPEN: ws or PREFIX
    _S_PREFIX,  # after PREFIX: ws or COLON
    _S_COLON,  # after COLON: ws or DIGIT
    _S_ID,  # in an item's first id
    _S_ID_WS,  # after an item's first id and ws: ws, RANGE, SEP, ESC, CLOSE
    _S_RANGE,  # after RANGE: ws or DIGIT
    _S_ID2,  # in a range's second id
    _S_ID2_WS,  # after a range's second id and ws: ws, SEP, ESC, CLOSE
    _S_SEP,  # after SEP: ws, PREFIX or DIGIT
    _S_ESC,  # after the closer's escape: CLOSE only
) = range(10)
_AFTER_ID: Final = frozenset({_S_ID, _S_ID_WS, _S_ID2, _S_ID2_WS})

_WS_RE: Final = f"[{SPACES}]*"
_DIGIT_RE: Final = f"[{ASCII_DIGITS}{WIDE_DIGITS}]"
_ID_RE: Final = f"{_DIGIT_RE}{{1,{MAX_ID_DIGITS}}}"
_RANGE_RE: Final = f"(?:{_WS_RE}[{re.escape(RANGES)}]{_WS_RE}{_ID_RE})?"
_PREFIX_RE: Final = f"[{PREFIXES}]{_WS_RE}[{COLONS}]{_WS_RE}"
_OPEN_RE: Final = "[" + re.escape(OPENERS) + "]"
_CLOSE_RE: Final = "[" + re.escape(CLOSERS) + "]"
_ESC_RE: Final = re.escape(ESCAPE) + "?"

#: The marker grammar as one regular expression (no range-width check, no code-span
#: awareness, no hold limit).
MARKER_RE: Final = re.compile(
    f"{_ESC_RE}{_OPEN_RE}{_WS_RE}{_PREFIX_RE}{_ID_RE}{_RANGE_RE}"
    f"(?:{_WS_RE}[{SEPARATORS}]{_WS_RE}(?:{_PREFIX_RE})?{_ID_RE}{_RANGE_RE})*"
    f"{_WS_RE}{_ESC_RE}{_CLOSE_RE}"
)


class Step(Enum):
    """What one more character does to a marker being matched."""

    MORE = "more"  # still a prefix of a marker
    DONE = "done"  # the character closed a complete marker
    FAIL = "fail"  # can no longer become a marker


def normalise_id(digits: str) -> str:
    """Raw chunk id from its written digits: full-width folded, leading zeros dropped.

    ``"７"`` -> ``"7"``, ``"07"`` -> ``"7"``, ``"0"`` -> ``"0"`` (spec §1). ``digits``
    must be one to four ASCII or full-width digits; anything else raises ``ValueError``.
    """
    if not 1 <= len(digits) <= MAX_ID_DIGITS:
        raise ValueError(f"an id has 1 to {MAX_ID_DIGITS} digits, got {digits!r}")
    try:
        ascii_digits = "".join(_DIGIT_VALUE[c] for c in digits)
    except KeyError:
        raise ValueError(f"not a chunk id: {digits!r}") from None
    return str(int(ascii_digits))


def marker_ids(marker: str) -> list[str]:
    """The raw ids of one complete marker, in written order, ranges expanded.

    ``"[C:1，03]"`` -> ``["1", "3"]``, ``"\\[C:2-4\\]"`` -> ``["2", "3", "4"]``.
    Raises ``ValueError`` when ``marker`` is not exactly one marker.
    """
    text = marker[1:] if marker.startswith(ESCAPE) else marker
    if not text or text[0] not in OPENERS:
        raise ValueError(f"not a citation marker: {marker!r}")
    matcher = MarkerMatcher()
    for k, ch in enumerate(text[1:], start=2):
        step = matcher.step(ch)
        if step is Step.DONE and k == len(text):
            return list(matcher.ids)
        if step is not Step.MORE:
            break
    raise ValueError(f"not a citation marker: {marker!r}")


class MarkerMatcher:
    """Recognises one marker character by character, after its opener was seen.

    Call :meth:`reset` at an opener, then :meth:`step` with each following
    character. ``MORE`` means the text so far is still a marker prefix, ``DONE``
    that the character completed a marker (its ids, ranges expanded, are in
    :attr:`ids`), ``FAIL`` that it can no longer become one (also: a range wider
    than ten ids or reversed). Constant work per character.
    """

    __slots__ = ("_digits", "_state", "ids")

    def __init__(self) -> None:
        self._state = _S_OPEN
        self._digits: list[str] = []
        self.ids: list[str] = []

    def reset(self) -> None:
        """Start matching a new marker (the opener has just been read)."""
        self._state = _S_OPEN
        self._digits = []
        self.ids = []

    def _end_id(self) -> bool:
        """The id being read is complete; ``False`` when it ends an invalid range."""
        value = int("".join(self._digits))
        self._digits = []
        if self._state == _S_ID2:
            first = int(self.ids[-1])
            if not first <= value <= first + MAX_RANGE_SPAN:
                return False
            self.ids.extend(str(k) for k in range(first + 1, value + 1))
        else:
            self.ids.append(str(value))
        return True

    def step(self, ch: str) -> Step:
        """Advance by one character (a one-character ``str``)."""
        cls = _CLASS.get(ch)
        if cls is None:
            return Step.FAIL
        if self._state == _S_ESC:
            return self._after_escape(ch, cls)
        return _HANDLERS[cls](self, ch, cls)

    def _after_escape(self, ch: str, cls: int) -> Step:
        """After the closer's escape only a closer may follow."""
        if cls == _CLOSE:
            self._state = _S_OPEN
            return Step.DONE
        return Step.FAIL

    def _digit(self, ch: str, cls: int) -> Step:
        """A digit starts an id (after a colon, separator or range) or continues one."""
        state = self._state
        if state in (_S_ID, _S_ID2):
            if len(self._digits) >= MAX_ID_DIGITS:
                return Step.FAIL
        elif state in (_S_COLON, _S_SEP):
            self._state = _S_ID
        elif state == _S_RANGE:
            self._state = _S_ID2
        else:
            return Step.FAIL
        self._digits.append(_DIGIT_VALUE[ch])
        return Step.MORE

    def _space(self, ch: str, cls: int) -> Step:
        """Whitespace is allowed anywhere; it ends an id being read."""
        state = self._state
        if state in (_S_ID, _S_ID2):
            if not self._end_id():
                return Step.FAIL
            self._state = _S_ID_WS if state == _S_ID else _S_ID2_WS
        return Step.MORE

    def _prefix(self, ch: str, cls: int) -> Step:
        """The ``C`` prefix follows the opener or a separator."""
        if self._state in (_S_OPEN, _S_SEP):
            self._state = _S_PREFIX
            return Step.MORE
        return Step.FAIL

    def _colon(self, ch: str, cls: int) -> Step:
        """The colon follows the prefix."""
        if self._state == _S_PREFIX:
            self._state = _S_COLON
            return Step.MORE
        return Step.FAIL

    def _range(self, ch: str, cls: int) -> Step:
        """A range sign follows an item's first id."""
        state = self._state
        if state == _S_ID:
            self._end_id()
        elif state != _S_ID_WS:
            return Step.FAIL
        self._state = _S_RANGE
        return Step.MORE

    def _after_id(self, ch: str, cls: int) -> Step:
        """A separator, the closer's escape or the closer: only after an id."""
        state = self._state
        if state not in _AFTER_ID:
            return Step.FAIL
        if state in (_S_ID, _S_ID2) and not self._end_id():
            return Step.FAIL
        if cls == _SEP:
            self._state = _S_SEP
            return Step.MORE
        if cls == _ESC:
            self._state = _S_ESC
            return Step.MORE
        self._state = _S_OPEN
        return Step.DONE


#: The matcher's transition for each character class, indexed by the class.
_HANDLERS: Final[tuple[Callable[[MarkerMatcher, str, int], Step], ...]] = (
    MarkerMatcher._space,  # _WS
    MarkerMatcher._prefix,  # _PREFIX
    MarkerMatcher._colon,  # _COLON
    MarkerMatcher._after_id,  # _SEP
    MarkerMatcher._after_id,  # _CLOSE
    MarkerMatcher._digit,  # _DIGIT
    MarkerMatcher._range,  # _RANGE
    MarkerMatcher._after_id,  # _ESC
)
