"""Citation styles of the answer text a Dify client receives: markers, or display numbers.

An app key's ``citation_style`` (``[[app_keys]]``, :class:`gcite.config.ApiKey`) says how the
citations of its answers travel:

- ``markers``: the answer as the model wrote it, ``[C:N]`` markers included, for clients that
  parse them (G-Cite clients: the H5 page, the mini program, ``clients/js``, ``gcite ask``);
- ``numbers``: the service renders them, for stock clients that show the text as Markdown
  (Dify's chat web app and its ``streamdown`` renderer, SDKs that print the text): each
  citation becomes its display number in Unicode superscript digits, adjacent ones separated
  by ``˒`` (``点位¹˒²``), numbered by first appearance exactly as ``retriever_resources``
  number their ``position`` (the cited chunks in display order, positions 1..n). This is the
  Markdown rule of ``citation-markers.md`` §7 (:func:`gcite.stream.render.superscript`): no
  Markdown syntax of its own, so a renderer never turns it into a link (``[1](…)`` and an
  unfinished ``[C:1`` are links Streamdown blocks), a footnote or a definition.

:class:`NumberedText` renders a stream delta by delta with the one incremental parser
(:class:`gcite.stream.parser.CitationParser`): a possible marker is held back until it
resolves, so no delta ever carries part of a marker, and the text is the same however the
answer was cut (:func:`numbered_answer` of the whole answer equals the deltas joined).
Markers naming no chunk are dropped, as every G-Cite client drops them, and so is a marker
the answer leaves unfinished (an answer cut off at ``…两人[C:1``). A leading
``<think>`` block in the answer text stays a ``<think>`` block (its markers untouched).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal

from gcite.stream.grammar import ESCAPE, OPENERS
from gcite.stream.parser import CitationParser, Segment
from gcite.stream.render import CITE_SEPARATOR, superscript

CitationStyle = Literal["markers", "numbers"]
CITATION_STYLES: Final[tuple[CitationStyle, ...]] = ("markers", "numbers")
"""The values of ``citation_style``; ``markers`` is the default."""

_THINK_OPEN: Final = "<think>\n"
_THINK_CLOSE: Final = "\n</think>"


class NumberedText:
    """One answer's text in the ``numbers`` style, rendered as it streams.

    ``known_ids``: the ids of the merge node's ``chunk_metadata`` (None until they are known:
    every well-formed id counts). :meth:`feed` returns the text that became final with a delta
    (possibly ``""``), :meth:`close` the held rest at the end of the answer (idempotent).
    """

    def __init__(self, known_ids: Iterable[str] | None = None) -> None:
        self._parser = CitationParser()
        self._known: list[str] | None = None
        self.set_known_ids(known_ids)
        self._after_cite = False
        self._reasoning = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._parser.closed

    @property
    def known_ids(self) -> list[str] | None:
        """The chunk ids markers may name (None: any)."""
        return None if self._known is None else list(self._known)

    def set_known_ids(self, known_ids: Iterable[str] | None) -> None:
        """The chunk ids markers may name (``chunk_metadata[].id``), for text still to come."""
        self._known = None if known_ids is None else [str(i) for i in known_ids]
        self._parser.set_known_ids(self._known)

    def feed(self, delta: str) -> str:
        """The text that became final with ``delta``, citations as display numbers."""
        return self._render(self._parser.feed(delta))

    def close(self) -> str:
        """The end of the answer: the held text, released, except a marker the answer left
        unfinished (``…两人[C:1`` of an answer cut off): a stock client would show it raw."""
        if self._parser.closed:
            return ""
        held = self._parser.held
        opener = held[1:2] if held[:1] == ESCAPE else held[:1]
        open_marker = opener != "" and opener in OPENERS
        text = self._render(self._parser.close())
        if open_marker and held and text.endswith(held):
            text = text[: len(text) - len(held)]
        if self._reasoning:  # the answer ended inside its reasoning block
            self._reasoning = False
            text += _THINK_CLOSE
        return text

    def _render(self, segments: Iterable[Segment]) -> str:
        out: list[str] = []
        for segment in segments:
            if "reasoning" in segment:
                if not self._reasoning:
                    self._reasoning = True
                    out.append(_THINK_OPEN)
                out.append(segment["reasoning"])
                continue
            if self._reasoning:
                self._reasoning = False
                out.append(_THINK_CLOSE)
            if "cite" in segment:
                out.append(
                    (CITE_SEPARATOR if self._after_cite else "") + superscript(segment["idx"])
                )
                self._after_cite = True
            else:
                out.append(segment["text"])
                self._after_cite = False
        return "".join(out)


def numbered_answer(answer: str, known_ids: Iterable[str] | None) -> str:
    """A whole answer in the ``numbers`` style: the same text as its stream's deltas joined."""
    numbered = NumberedText(known_ids)
    return numbered.feed(answer) + numbered.close()


def styled_answer(answer: str, known_ids: Iterable[str] | None, style: str) -> str:
    """``answer`` as a client of ``style`` sees it (``markers``: unchanged)."""
    return numbered_answer(answer, known_ids) if style == "numbers" else answer


__all__ = [
    "CITATION_STYLES",
    "CitationStyle",
    "NumberedText",
    "numbered_answer",
    "styled_answer",
]
