"""Conformance runner for citation-marker test vectors (``citation-markers.md`` §8).

A vectors document is ``{"version": 2, "cases": [{"name", "known_ids", "deltas",
"expect": {"segments", "citations", "invalid"}}]}``. Every case is fed three ways —
the deltas as given, the whole answer as one delta, one character per delta — and
passes only when all three produce exactly ``expect``. The JavaScript client runs
the same check (``clients/js/bin/vectors.mjs``). Any version of the format is
accepted (version 2 adds ``{"reasoning": ...}`` segments). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from gcite.stream.parser import DEFAULT_MAX_HOLD, CitationParser, merge_segments

#: The three ways of feeding a case: (name, deltas -> deltas).
WAYS: Final[tuple[tuple[str, Callable[[list[str]], list[str]]], ...]] = (
    ("as given", lambda deltas: list(deltas)),
    ("one delta", lambda deltas: ["".join(deltas)]),
    ("one character per delta", lambda deltas: list("".join(deltas))),
)


@dataclass(frozen=True)
class CaseResult:
    """The outcome of one case: ``failures`` lists ``(way, got)`` for each way that differed."""

    name: str
    expect: dict[str, Any]
    failures: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when all three ways produced ``expect``."""
        return not self.failures


def run_parser(
    known_ids: Sequence[str] | None, deltas: Sequence[str], max_hold: int = DEFAULT_MAX_HOLD
) -> dict[str, Any]:
    """Feed ``deltas``, close; returns ``{"segments", "citations", "invalid"}`` as JSON values."""
    parser = CitationParser(known_ids, max_hold)
    segments = []
    for delta in deltas:
        segments.extend(parser.feed(delta))
    segments.extend(parser.close())
    return {
        "segments": merge_segments(segments),
        "citations": [[raw_id, idx] for raw_id, idx in parser.citations],
        "invalid": parser.invalid,
    }


def vectors_problem(doc: Any) -> str | None:
    """What is wrong with a parsed vectors document, or ``None`` when it is usable."""
    if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
        return 'no "cases" array'
    for k, case in enumerate(doc["cases"]):
        where = f"case {k}"
        if not isinstance(case, dict):
            return f"{where} is not an object"
        deltas = case.get("deltas")
        if not isinstance(deltas, list) or not all(isinstance(d, str) for d in deltas):
            return f'{where}: "deltas" must be an array of strings'
        known = case.get("known_ids")
        if known is not None and (
            not isinstance(known, list) or not all(isinstance(i, str) for i in known)
        ):
            return f'{where}: "known_ids" must be an array of strings or null'
        expect = case.get("expect")
        if not isinstance(expect, dict):
            return f'{where}: "expect" must be an object'
        for key in ("segments", "citations", "invalid"):
            if not isinstance(expect.get(key, []), list):
                return f'{where}: "expect.{key}" must be an array'
    return None


def run_case(case: dict[str, Any], index: int = 0) -> CaseResult:
    """Run one (valid) case the three ways."""
    raw_expect = case["expect"]
    expect = {
        "segments": raw_expect.get("segments", []),
        "citations": raw_expect.get("citations", []),
        "invalid": raw_expect.get("invalid", []),
    }
    failures = []
    for way, cut in WAYS:
        got = run_parser(case.get("known_ids"), cut(case["deltas"]))
        if got != expect:
            failures.append((way, got))
    return CaseResult(str(case.get("name") or f"#{index}"), expect, failures)


def run_vectors(doc: dict[str, Any]) -> list[CaseResult]:
    """Run every case of a document that :func:`vectors_problem` accepted."""
    return [run_case(case, k) for k, case in enumerate(doc["cases"])]
