"""The G-Cite marker grammar: character classes, a streaming matcher and a regex.

A marker cites one or more chunk ids, e.g. ``[C:7]``, ``【C：7】``, ``[C:1, C:2]``,
``[C:1，3、5]`` (spec ``citation-markers.md`` §1; the seeds fix ``[C:N]``, platform
design document §5.2, mobile design document §4.1)::

    marker := OPEN ws item (ws SEP ws item)* ws CLOSE
    item   := [PREFIX ws COLON ws] id        -- the first item carries the prefix
    id     := DIGIT{1,4}

:class:`MarkerMatcher` recognises the grammar one character at a time (what the
stream parser needs: it must know after every character whether the held text
can still become a marker); :data:`MARKER_RE` is the same language as a regular
expression, used for whole-text checks and as the naive benchmark baseline.
Pure, standard library only.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Final

OPENERS: Final = "[【［"
CLOSERS: Final = "]】］"
PREFIXES: Final = "CcＣｃ"
COLONS: Final = ":："
SEPARATORS: Final = ",，、;；"
SPACES: Final = " \u3000"
ASCII_DIGITS: Final = "0123456789"
WIDE_DIGITS: Final = "０１２３４５６７８９"
MAX_ID_DIGITS: Final = 4

_DIGIT_VALUE: Final = {c: str(i) for i, c in enumerate(ASCII_DIGITS)} | {
    c: str(i) for i, c in enumerate(WIDE_DIGITS)
}

# character classes
_WS, _PREFIX, _COLON, _SEP, _CLOSE, _DIGIT = range(6)
_CLASS: Final[dict[str, int]] = (
    dict.fromkeys(SPACES, _WS)
    | dict.fromkeys(PREFIXES, _PREFIX)
    | dict.fromkeys(COLONS, _COLON)
    | dict.fromkeys(SEPARATORS, _SEP)
    | dict.fromkeys(CLOSERS, _CLOSE)
    | dict.fromkeys(ASCII_DIGITS + WIDE_DIGITS, _DIGIT)
)

# matcher states (after the opener)
_S_OPEN, _S_PREFIX, _S_COLON, _S_ID, _S_ID_WS, _S_SEP = range(6)

_WS_RE: Final = f"[{SPACES}]*"
_DIGIT_RE: Final = f"[{ASCII_DIGITS}{WIDE_DIGITS}]"
_ID_RE: Final = f"{_DIGIT_RE}{{1,{MAX_ID_DIGITS}}}"
_PREFIX_RE: Final = f"[{PREFIXES}]{_WS_RE}[{COLONS}]{_WS_RE}"
_OPEN_RE: Final = "[" + re.escape(OPENERS) + "]"
_CLOSE_RE: Final = "[" + re.escape(CLOSERS) + "]"

#: The marker grammar as one regular expression (no code-span awareness, no hold limit).
MARKER_RE: Final = re.compile(
    f"{_OPEN_RE}{_WS_RE}{_PREFIX_RE}{_ID_RE}"
    f"(?:{_WS_RE}[{SEPARATORS}]{_WS_RE}(?:{_PREFIX_RE})?{_ID_RE})*"
    f"{_WS_RE}{_CLOSE_RE}"
)
_ID_FIND_RE: Final = re.compile(_ID_RE)


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
    """The raw ids of one complete marker, in written order: ``"[C:1，03]"`` -> ``["1", "3"]``.

    Raises ``ValueError`` when ``marker`` is not exactly one marker.
    """
    if MARKER_RE.fullmatch(marker) is None:
        raise ValueError(f"not a citation marker: {marker!r}")
    return [normalise_id(m.group()) for m in _ID_FIND_RE.finditer(marker)]


class MarkerMatcher:
    """Recognises one marker character by character, after its opener was seen.

    Call :meth:`reset` at an opener, then :meth:`step` with each following
    character. ``MORE`` means the text so far is still a marker prefix, ``DONE``
    that the character completed a marker (its ids are in :attr:`ids`), ``FAIL``
    that it can no longer become one. Constant work per character.
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

    def _end_id(self) -> None:
        self.ids.append(str(int("".join(self._digits))))
        self._digits = []

    def step(self, ch: str) -> Step:
        """Advance by one character (a one-character ``str``)."""
        cls = _CLASS.get(ch)
        if cls is None:
            return Step.FAIL
        state = self._state
        if cls == _WS:
            if state == _S_ID:
                self._end_id()
                self._state = _S_ID_WS
            return Step.MORE
        if cls == _DIGIT:
            more = state == _S_ID and len(self._digits) < MAX_ID_DIGITS
            if more or state in (_S_COLON, _S_SEP):
                self._digits.append(_DIGIT_VALUE[ch])
                self._state = _S_ID
                return Step.MORE
            return Step.FAIL
        if cls == _PREFIX:
            if state in (_S_OPEN, _S_SEP):
                self._state = _S_PREFIX
                return Step.MORE
            return Step.FAIL
        if cls == _COLON:
            if state == _S_PREFIX:
                self._state = _S_COLON
                return Step.MORE
            return Step.FAIL
        if cls == _SEP:
            if state == _S_ID:
                self._end_id()
            elif state != _S_ID_WS:
                return Step.FAIL
            self._state = _S_SEP
            return Step.MORE
        # closer
        if state == _S_ID:
            self._end_id()
        elif state != _S_ID_WS:
            return Step.FAIL
        self._state = _S_OPEN
        return Step.DONE
