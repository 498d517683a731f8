"""The merge node: RAG + web results → globally numbered UnifiedChunks (seed platform design §3).

Steps (seed §3.5): normalise knowledge-base items (``rag_chunks``, Dify
Knowledge Retrieval ``result``, dify-protocol.md §2) and web items
(``web_chunks``, any envelope of :mod:`gcite.envelopes`) to
:class:`gcite.chunks.UnifiedChunk`; drop chunks with empty content; sort
knowledge base first, then score descending (stable for ties); keep exact
duplicates (same ``source_type``, ``url`` and ``content``) once; cap the web
results; number 1..N and build ``formatted_chunks``.

:func:`merge_chunks` never raises on bad input and never trims to Dify's
limits; :func:`fit_dify_limits` does that for the exported Code node.

Standard library only (inlined into the exported Dify Code node).
"""

from __future__ import annotations

import json
import re
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, Context, Decimal
from typing import Any, TypedDict, cast

from gcite.chunks import (
    UnifiedChunk,
    as_score,
    as_text,
    display_subtitle,
    empty_chunk,
    extract_host,
)
from gcite.envelopes import extract_web_items, to_web_chunk

#: Separator between two ``[C:N]`` blocks of ``formatted_chunks`` (seed §3.3).
BLOCK_SEPARATOR = "\n\n"
#: Appended to content cut by :func:`fit_dify_limits`.
TRUNCATION_MARK = "…"
#: Dify's ``CODE_MAX_OBJECT_ARRAY_LENGTH`` default (dify-protocol.md §4).
DIFY_MAX_OBJECTS = 30
#: Dify's ``CODE_MAX_STRING_LENGTH`` default since 1.x; older deployments use 80,000.
DIFY_MAX_STRING_LENGTH = 400_000
#: Numbers Dify accepts (``CODE_MAX_NUMBER``) and decimal digits it allows (``CODE_MAX_PRECISION``).
DIFY_MAX_NUMBER = 9_223_372_036_854_775_807
DIFY_MAX_PRECISION = 20
DIFY_SCORE_LIMIT = 1e15
#: Output strings Dify's Code-node runner turns into floats: its template transformer's
#: ``_post_process_result`` applies ``re.match`` with this pattern, case-insensitive, to
#: every string of the result, nested ones included (``2e-3``, ``1E+5``; not ``12``, not
#: ``2e3``; ``$`` also matches before one final newline).
DIFY_NUMBER_LIKE = re.compile(r"^-?\d+\.?\d*e[+-]\d+$", re.IGNORECASE)
#: Appended to such a string so it stays a string in Dify: U+2060 WORD JOINER, invisible.
NUMBER_GUARD = "\u2060"


class MergeResult(TypedDict):
    """The merge node's three outputs, exactly as declared in Dify (seed §3.3, §3.7).

    ``formatted_chunks``: ``"[C:1]\\ncontent1\\n\\n[C:2]\\ncontent2"`` for the LLM
    context; ``chunk_count``: number of chunks; ``chunk_metadata``: the
    UnifiedChunks with ids "1".."N" in the same order.
    """

    formatted_chunks: str
    chunk_count: int
    chunk_metadata: list[UnifiedChunk]


def _as_rag_items(raw: Any) -> list[Any]:
    """The item list of ``rag_chunks``: a list, ``{"result": [...]}`` (the whole node
    output), one item, or a JSON string of these."""
    if isinstance(raw, str) and raw.strip()[:1] in ("[", "{"):
        try:
            raw = json.loads(raw)
        except ValueError:
            return []
    if isinstance(raw, list | tuple):
        return list(raw)
    if isinstance(raw, dict):
        result = raw.get("result")
        if isinstance(result, list):
            return result
        if "content" in raw:
            return [raw]
    return []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _pick(sources: tuple[dict[str, Any], ...], key: str) -> str:
    """The first non-blank text under ``key`` in ``sources`` (numbers become text)."""
    for source in sources:
        value = source.get(key)
        if value is not None:
            text = (value if isinstance(value, str) else as_text(value)).strip()
            if text:
                return text
    return ""


def _as_position(value: Any) -> int:
    number = as_score(value)
    if number is None:
        return 0
    return int(max(-DIFY_MAX_NUMBER, min(DIFY_MAX_NUMBER, number)))


def normalize_rag_chunk(item: Any) -> UnifiedChunk | None:
    """One Knowledge Retrieval ``result`` item → a ``"rag"`` UnifiedChunk (seed §3.2.1, §3.5).

    Reads, in both the 1.x shape (``metadata.doc_metadata`` nested) and the 0.x
    shape (everything in ``metadata``): ``content``; ``document_title`` from
    ``doc_metadata`` then ``metadata``, falling back to ``document_name`` (from
    ``doc_metadata``, ``metadata``, then the item's ``title``); ``dataset_name``;
    ``source_file_url`` (also the ``url``); ``score`` (``metadata.score``, then
    ``item.score``; numeric strings accepted, non-finite → 0.0);
    ``segment_position`` (int, 0 when unknown) and the ids ``dataset_id``,
    ``document_id``, ``segment_id``. ``display_subtitle`` is the dataset name.

    Returns ``None`` (the chunk is dropped) when ``item`` is not a dict or its
    content is empty after stripping; content must be a string or a number.
    ``id`` is left "" for :func:`merge_chunks` to fill.
    """
    if not isinstance(item, dict):
        return None
    content = as_text(item.get("content")).strip()
    if not content:
        return None
    metadata = _dict(item.get("metadata"))
    doc_meta = _dict(metadata.get("doc_metadata"))
    both = (doc_meta, metadata)
    document_name = _pick((*both, item), "document_name") or _pick((item,), "title")
    dataset_name = _pick((metadata, doc_meta), "dataset_name")
    source_file_url = _pick(both, "source_file_url")
    score = as_score(metadata.get("score"))
    if score is None:
        score = as_score(item.get("score"))
    position = metadata.get("segment_position", doc_meta.get("segment_position"))
    chunk = empty_chunk("rag")
    chunk["content"] = content
    chunk["document_title"] = _pick(both, "document_title") or document_name
    chunk["document_name"] = document_name
    chunk["dataset_name"] = dataset_name
    chunk["source_file_url"] = source_file_url
    chunk["url"] = source_file_url
    chunk["score"] = 0.0 if score is None else score
    chunk["segment_position"] = _as_position(position)
    chunk["display_subtitle"] = dataset_name
    chunk["dataset_id"] = _pick((metadata, doc_meta), "dataset_id")
    chunk["document_id"] = _pick((metadata, doc_meta), "document_id")
    chunk["segment_id"] = _pick((metadata, doc_meta), "segment_id")
    return chunk


def normalize_web_chunk(item: Any) -> UnifiedChunk | None:
    """One provider web item → a ``"web"`` UnifiedChunk (seed §3.2.2, §3.5 step 2, §4).

    Fields come from :func:`gcite.envelopes.to_web_chunk`; ``document_name``
    and ``source_file_url`` are the URL (seed Appendix A), ``site_host`` is the
    URL's host without ``www.``, ``display_subtitle`` follows the §3.6 chain.
    Returns ``None`` when ``item`` is not a dict or has no content.
    """
    if not isinstance(item, dict):
        return None
    web = to_web_chunk(item)
    if not web["content"]:
        return None
    url = web["url"]
    chunk = empty_chunk("web")
    chunk["content"] = web["content"]
    chunk["document_title"] = web["title"]
    chunk["document_name"] = url
    chunk["url"] = url
    chunk["source_file_url"] = url
    chunk["site_name"] = web["site_name"]
    chunk["site_host"] = extract_host(url)
    chunk["score"] = web["score"]
    chunk["published_date"] = web["published_date"]
    chunk["display_subtitle"] = display_subtitle(web["site_name"], url, web["published_date"])
    return chunk


def _sort_key(chunk: UnifiedChunk) -> tuple[int, float]:
    return (0 if chunk["source_type"] == "rag" else 1, -chunk["score"])


#: The start of a citation marker (spec citation-markers.md §1: opener, spaces, prefix, colon).
_MARKER_START = re.compile("[\\[【［][ \u3000]*[CcＣｃ][ \u3000]*[:：]")


def neutralize_markers(content: str) -> str:
    """``content`` with every citation-marker opener turned into ``(`` (same length).

    A document (or a web page) whose text contains ``[C:1]`` or a forged
    ``\\n\\n[C:2]\\n...`` block must not make the model credit text to a chunk id it
    did not come from: in ``formatted_chunks`` such sequences read ``(C:1]``, which
    is not a marker (spec §1). Only the LLM context is changed; ``chunk_metadata``
    keeps the document's text as it is.
    """
    return _MARKER_START.sub(lambda m: "(" + m.group(0)[1:], content)


def format_chunks(chunks: list[UnifiedChunk]) -> str:
    """``formatted_chunks``: ``[C:id]\\ncontent`` blocks joined by a blank line (seed §3.3).

    Marker-like text inside a chunk is neutralised (:func:`neutralize_markers`).
    """
    return BLOCK_SEPARATOR.join(
        f"[C:{c['id']}]\n{neutralize_markers(c['content'])}" for c in chunks
    )


def merge_chunks(
    rag_chunks: Any, web_chunks: Any, *, max_web_results: int | None = None
) -> MergeResult:
    """Merge knowledge-base and web results into numbered UnifiedChunks (seed §3.5, Appendix A).

    ``rag_chunks``: Knowledge Retrieval ``result`` items (or the node output
    ``{"result": [...]}``, or either as a JSON string); ``web_chunks``: any web payload of
    :func:`gcite.envelopes.extract_web_items`. ``max_web_results`` keeps only
    the N best web chunks after sorting (seed Appendix A ``MAX_WEB_RESULTS``,
    the workaround for a search tool that ignores Top-K); ``None`` means no cap,
    0 or less means no web chunks.

    Returns :class:`MergeResult`. Order: ``"rag"`` first, then score
    descending, ties in input order. Items that are not dicts or have empty
    content are dropped; exact duplicates (same source type, URL and content)
    are kept once (the best-scored). Never raises on bad input; no limit on the
    number of chunks (see :func:`fit_dify_limits`).
    """
    unified: list[UnifiedChunk] = []
    for item in _as_rag_items(rag_chunks):
        chunk = normalize_rag_chunk(item)
        if chunk is not None:
            unified.append(chunk)
    for item in extract_web_items(web_chunks):
        chunk = normalize_web_chunk(item)
        if chunk is not None:
            unified.append(chunk)
    unified.sort(key=_sort_key)

    web_left = -1 if max_web_results is None else max(0, max_web_results)
    seen: set[tuple[str, str, str]] = set()
    kept: list[UnifiedChunk] = []
    for chunk in unified:
        key = (chunk["source_type"], chunk["url"], chunk["content"])
        if key in seen:
            continue
        seen.add(key)
        if chunk["source_type"] == "web":
            if web_left == 0:
                continue
            web_left -= 1
        chunk["id"] = str(len(kept) + 1)
        kept.append(chunk)
    return {
        "formatted_chunks": format_chunks(kept),
        "chunk_count": len(kept),
        "chunk_metadata": kept,
    }


def _passes_dify_precision(number: float) -> bool:
    """Both of Dify's float checks: ``len(str(v).split(".")[1]) <= 20`` (0.x, early 1.x;
    ``str(1e-05)`` has no "." and raises there) and ``Decimal(str(v)).normalize()``
    with at most ``CODE_MAX_PRECISION`` decimal places (current Dify)."""
    text = str(number)
    if "." not in text or len(text.split(".")[1]) > DIFY_MAX_PRECISION:
        return False
    exponent = Decimal(text).normalize().as_tuple().exponent
    return isinstance(exponent, int) and (exponent >= 0 or -exponent <= DIFY_MAX_PRECISION)


def _fit_score(score: float) -> float:
    """A score both Dify precision rules accept, as close to ``score`` as possible.

    Clamped to ±1e15 (``str`` stays in fixed notation, with a "."); a score whose
    ``str`` has no "." (``1e-05``) or more than 20 decimals is replaced by the nearest
    float with fewer significant digits that passes (``1e-05`` →
    ``9.99999999999999e-06``): within 1e-13 of its value, or 1e-20 for the tiniest
    (Dify allows 20 decimal places); from 1e-19 down none may pass, and the score becomes
    0.0. Non-finite input gives 0.0.
    """
    if score != score or score in (float("inf"), float("-inf")):
        return 0.0
    score = max(-DIFY_SCORE_LIMIT, min(DIFY_SCORE_LIMIT, score))
    if _passes_dify_precision(score):
        return score
    toward_zero = score - score * 2**-52  # the next float closer to zero
    for digits in range(16, 0, -1):
        for start, rounding in ((score, ROUND_HALF_EVEN), (toward_zero, ROUND_DOWN)):
            shorter = Context(prec=digits, rounding=rounding).create_decimal(repr(start))
            candidate = float(shorter)
            if _passes_dify_precision(candidate):
                return candidate
    return 0.0


def guard_number_like(text: str) -> str:
    """``text`` plus :data:`NUMBER_GUARD` when Dify would turn it into a float
    (:data:`DIFY_NUMBER_LIKE`), else ``text`` unchanged."""
    return text + NUMBER_GUARD if DIFY_NUMBER_LIKE.match(text) else text


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    if limit <= len(TRUNCATION_MARK):
        return text[: max(0, limit)]
    return text[: limit - len(TRUNCATION_MARK)] + TRUNCATION_MARK


def fit_dify_limits(
    result: MergeResult,
    max_objects: int = DIFY_MAX_OBJECTS,
    max_string_length: int = DIFY_MAX_STRING_LENGTH,
) -> MergeResult:
    """Trim a merge result to the Dify Code node's limits, consistently (dify-protocol.md §4).

    - at most ``max_objects`` chunks (``CODE_MAX_OBJECT_ARRAY_LENGTH``, 30):
      the lowest-priority ones (the end of the sorted list) are dropped;
    - ``formatted_chunks`` at most ``max_string_length`` characters
      (``CODE_MAX_STRING_LENGTH``: 400,000, or 80,000 on older deployments):
      blocks are kept in order while they fit; the first block that does not fit
      has its content cut (ending in "…") when at least its ``[C:N]`` header and
      one character fit, and every later chunk is dropped;
    - every string field of every chunk at most ``max_string_length`` characters;
    - every string field that Dify's runner would turn into a float (``2e-3``,
      :data:`DIFY_NUMBER_LIKE`) ends in the invisible :data:`NUMBER_GUARD`, so it
      reaches the clients as the string it was;
    - scores clamped to ±1e15 and, only when Dify's old (``str`` split at ".")
      or new (``Decimal``, ``CODE_MAX_PRECISION`` 20) precision check would
      refuse them (``1e-05``, ``1.2345678901234567e-05``), moved to the nearest
      float both accept (see :func:`_fit_score`); ``segment_position`` within
      ``CODE_MAX_NUMBER``.

    The ``content`` in ``chunk_metadata`` is the (possibly cut) text the LLM
    sees (plus the guard where one is needed), ids stay 1..K, and ``formatted_chunks``
    cites exactly the chunks of ``chunk_metadata``. Returns a new result; ``result`` is
    not modified. Objects are flat (depth 2 < ``CODE_MAX_DEPTH`` 5).
    """
    limit = max(0, max_string_length)
    blocks: list[str] = []
    kept: list[UnifiedChunk] = []
    used = 0
    for chunk in result["chunk_metadata"][: max(0, max_objects)]:
        header = f"[C:{chunk['id']}]\n"
        separator = len(BLOCK_SEPARATOR) if blocks else 0
        room = limit - used - separator - len(header)
        if room <= 0:
            break
        content = _cut(chunk["content"], room)
        fields = {
            k: _cut(guard_number_like(v), limit) if isinstance(v, str) else v
            for k, v in chunk.items()
        }
        fitted = cast(UnifiedChunk, fields)
        fitted["content"] = guard_number_like(content)
        fitted["score"] = _fit_score(chunk["score"])
        fitted["segment_position"] = max(
            -DIFY_MAX_NUMBER, min(DIFY_MAX_NUMBER, chunk["segment_position"])
        )
        blocks.append(header + neutralize_markers(content))
        kept.append(fitted)
        used += separator + len(header) + len(content)
        if content != chunk["content"]:
            break
    return {
        "formatted_chunks": BLOCK_SEPARATOR.join(blocks),
        "chunk_count": len(kept),
        "chunk_metadata": kept,
    }


def code_node_outputs(
    rag_chunks: Any,
    web_chunks: Any,
    *,
    max_web_results: int | None = None,
    max_objects: int = DIFY_MAX_OBJECTS,
    max_string_length: int = DIFY_MAX_STRING_LENGTH,
) -> MergeResult:
    """What the exported Dify Code node's ``main`` returns: merge, then fit Dify's limits."""
    merged = merge_chunks(rag_chunks, web_chunks, max_web_results=max_web_results)
    return fit_dify_limits(merged, max_objects=max_objects, max_string_length=max_string_length)


__all__ = [
    "BLOCK_SEPARATOR",
    "DIFY_MAX_OBJECTS",
    "DIFY_MAX_STRING_LENGTH",
    "DIFY_NUMBER_LIKE",
    "NUMBER_GUARD",
    "TRUNCATION_MARK",
    "MergeResult",
    "code_node_outputs",
    "fit_dify_limits",
    "format_chunks",
    "guard_number_like",
    "merge_chunks",
    "neutralize_markers",
    "normalize_rag_chunk",
    "normalize_web_chunk",
]
