"""Conformance runner for the Dify stream contract (``docs/stream-contract.md``).

A stream-contract vectors document is ``{"version": 1, "kind": "dify-stream", "cases":
[{"name", "sse" | "sse_base64", "expect": {"outputs", "result"}}]}``: the raw bytes of
a chat SSE response (as UTF-8 text, or base64 for bytes that are not UTF-8) and what
:class:`~gcite.stream.sse.DifyStreamConsumer` must report. Every case is fed three
ways — whole, one byte at a time, and cut at random points (five seeded cuttings) —
and passes only when each produces exactly ``expect``. The JavaScript client's
``AnswerStream`` runs the same check (``clients/js/src/conformance.js``). Pure: no I/O.

The comparison is on a projection both languages can produce:

- ``outputs``: the updates in order — ``{"metadata": [chunk ids]}``,
  ``{"segments": [...]}`` (consecutive ones merged), ``{"replace": [...]}``,
  ``{"error": {"code", "status", "message"}}``;
- ``result``: ``answer``, ``reasoning``, ``segments``, ``citations``, ``invalid``,
  ``panel`` (:func:`~gcite.stream.panel.panel_view` rows), ``panel_source``,
  ``message_id``, ``conversation_id``, ``task_id``, ``workflow_status`` (``null`` when
  absent), ``finished``, ``error``, ``warnings`` (kinds only) and ``events``.
"""

from __future__ import annotations

import base64
import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from gcite.stream.panel import chunk_id, panel_view
from gcite.stream.parser import Segment, merge_segments
from gcite.stream.sse import (
    AnswerResult,
    DifyStreamConsumer,
    MetadataReceived,
    SegmentsReceived,
    StreamFailed,
    StreamUpdate,
)

#: The ``kind`` of a stream-contract vectors document.
KIND: Final = "dify-stream"
RANDOM_CUTS: Final = 5


def _random_cuts(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(data)), k=min(len(data) - 1, rng.randint(1, 12))))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


#: The ways of feeding a case: (name, bytes -> chunks).
WAYS: Final[tuple[tuple[str, Callable[[bytes], list[bytes]]], ...]] = (
    ("whole", lambda data: [data]),
    ("byte by byte", lambda data: [data[k : k + 1] for k in range(len(data))]),
    *(
        (f"random cuts #{n + 1}", lambda data, n=n: _random_cuts(data, 1000 + n) if data else [])
        for n in range(RANDOM_CUTS)
    ),
)


def case_bytes(case: dict[str, Any]) -> bytes:
    """The raw response bytes of a case (``sse`` text as UTF-8, or ``sse_base64``)."""
    if "sse_base64" in case:
        return base64.b64decode(case["sse_base64"])
    return str(case["sse"]).encode("utf-8", "surrogatepass")


def _error(error: StreamFailed | None) -> dict[str, Any] | None:
    if error is None:
        return None
    return {"code": error.code, "status": error.status, "message": error.message}


def _segments(segments: Sequence[Segment]) -> list[dict[str, Any]]:
    return [dict(seg) for seg in merge_segments(segments)]


def project_updates(updates: Sequence[StreamUpdate]) -> list[dict[str, Any]]:
    """The ``outputs`` projection of a consumer's updates (see the module docstring)."""
    out: list[dict[str, Any]] = []
    for update in updates:
        if isinstance(update, MetadataReceived):
            out.append({"metadata": [chunk_id(c) for c in update.chunk_metadata]})
        elif isinstance(update, SegmentsReceived) and update.replace:
            out.append({"replace": _segments(update.segments)})
        elif isinstance(update, SegmentsReceived):
            if out and "segments" in out[-1]:
                out[-1] = {"segments": _segments(out[-1]["segments"] + list(update.segments))}
            elif update.segments:
                out.append({"segments": _segments(update.segments)})
        elif isinstance(update, StreamFailed):
            out.append({"error": _error(update)})
    return out


def project_result(result: AnswerResult) -> dict[str, Any]:
    """The ``result`` projection of an :class:`AnswerResult`."""
    return {
        "answer": result.answer,
        "reasoning": result.reasoning,
        "segments": _segments(result.segments),
        "citations": [[raw_id, idx] for raw_id, idx in result.citations],
        "invalid": list(result.invalid),
        "panel": panel_view(result.panel),
        "panel_source": result.panel_source,
        "message_id": result.message_id or None,
        "conversation_id": result.conversation_id or None,
        "task_id": result.task_id or None,
        "workflow_status": result.workflow_status or None,
        "finished": result.finished,
        "error": _error(result.error),
        "warnings": [w.split(":", 1)[0] for w in result.warnings],
        "events": list(result.events),
    }


def run_consumer(chunks: Sequence[bytes]) -> dict[str, Any]:
    """Feed ``chunks`` to a fresh consumer, close it; returns ``{"outputs", "result"}``."""
    consumer = DifyStreamConsumer()
    updates: list[StreamUpdate] = []
    for chunk in chunks:
        updates.extend(consumer.feed(chunk))
    updates.extend(consumer.close())
    return {"outputs": project_updates(updates), "result": project_result(consumer.result)}


@dataclass(frozen=True)
class StreamCaseResult:
    """The outcome of one case: ``failures`` lists ``(way, got)`` for each way that differed."""

    name: str
    expect: dict[str, Any]
    failures: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every way produced ``expect``."""
        return not self.failures


def is_stream_vectors(doc: Any) -> bool:
    """Whether a parsed document is a stream-contract vectors file (``"kind": "dify-stream"``)."""
    return isinstance(doc, dict) and doc.get("kind") == KIND


def stream_vectors_problem(doc: Any) -> str | None:
    """What is wrong with a parsed stream-contract document, or ``None`` when usable."""
    if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
        return 'no "cases" array'
    for k, case in enumerate(doc["cases"]):
        where = f"case {k}"
        if not isinstance(case, dict):
            return f"{where} is not an object"
        if not isinstance(case.get("sse"), str) and not isinstance(case.get("sse_base64"), str):
            return f'{where}: "sse" or "sse_base64" must be a string'
        if "sse_base64" in case:
            try:
                base64.b64decode(case["sse_base64"], validate=True)
            except ValueError:
                return f'{where}: "sse_base64" is not base64'
        expect = case.get("expect")
        if not isinstance(expect, dict) or not isinstance(expect.get("outputs"), list):
            return f'{where}: "expect.outputs" must be an array'
        if not isinstance(expect.get("result"), dict):
            return f'{where}: "expect.result" must be an object'
    return None


def run_stream_case(case: dict[str, Any], index: int = 0) -> StreamCaseResult:
    """Run one (valid) case every way."""
    data = case_bytes(case)
    expect = {"outputs": case["expect"]["outputs"], "result": case["expect"]["result"]}
    failures = []
    for way, cut in WAYS:
        got = run_consumer(cut(data))
        if got != expect:
            failures.append((way, got))
    return StreamCaseResult(str(case.get("name") or f"#{index}"), expect, failures)


def run_stream_vectors(doc: dict[str, Any]) -> list[StreamCaseResult]:
    """Run every case of a document that :func:`stream_vectors_problem` accepted."""
    return [run_stream_case(case, k) for k, case in enumerate(doc["cases"])]
