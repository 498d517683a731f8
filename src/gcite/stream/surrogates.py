"""Lone UTF-16 surrogates in model text: pairs split across deltas joined, the rest U+FFFD.

A model API that streams JSON may cut a character outside the Basic Multilingual
Plane between two deltas, each carrying one half as a JSON escape (``"\\ud83d"``
then ``"\\udeaa"``). ``json.loads`` gives each half as a lone surrogate code point,
which is not encodable UTF-8: written to a response as is, it raises. These
helpers turn such text back into valid Unicode (spec ``citation-markers.md`` §5:
the parser never fails on bad text). Pure, standard library only.
"""

from __future__ import annotations

import re
from typing import Final

_PAIR_OR_LONE: Final = re.compile("[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")
_ANY: Final = re.compile("[\ud800-\udfff]")
_HIGH: Final = ("\ud800", "\udbff")
REPLACEMENT: Final = "\ufffd"


def _fix(m: re.Match[str]) -> str:
    pair = m.group()
    if len(pair) == 1:
        return REPLACEMENT
    high, low = ord(pair[0]) - 0xD800, ord(pair[1]) - 0xDC00
    return chr(0x10000 + (high << 10) + low)


def fix_surrogates(text: str) -> str:
    """``text`` with every surrogate pair joined into its character and every lone
    surrogate replaced by U+FFFD; text without surrogates is returned unchanged."""
    if _ANY.search(text) is None:
        return text
    return _PAIR_OR_LONE.sub(_fix, text)


class SurrogateJoiner:
    """Streaming :func:`fix_surrogates`: a high surrogate at the end of one delta waits
    for the next delta, whose leading low surrogate completes it.

    ``feed(delta)`` returns the text that is final; ``flush()`` at the end of the stream
    returns a high surrogate still waiting as U+FFFD (or ``""``).
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = ""

    @property
    def pending(self) -> bool:
        """Whether a high surrogate waits for the next delta."""
        return bool(self._pending)

    def feed(self, delta: str) -> str:
        """The fixed text of ``pending + delta``, keeping a trailing high surrogate back."""
        text = self._pending + delta if self._pending else delta
        self._pending = ""
        if text and _HIGH[0] <= text[-1] <= _HIGH[1]:
            text, self._pending = text[:-1], text[-1]
        return fix_surrogates(text)

    def flush(self) -> str:
        """End of stream: a waiting high surrogate is lone, so U+FFFD."""
        pending, self._pending = self._pending, ""
        return REPLACEMENT if pending else ""
