"""The refusal decision: did retrieval find something relevant enough to answer at all?

The knowledge base scores each chunk on its own (:mod:`gcite.knowledge.relevance`: a
calibrated 0-1 score, ``score_threshold`` its boundary). One absolute score drops the
right chunk when the question uses other words than the document (ranked first, scored
0.3-0.5), and admits an off-topic question whose words happen to be common in the
corpus. The gate weighs the whole ranked list instead (:func:`decide`, pure):

* **above the threshold** the best chunk is admitted, unless it is a *lookalike*: its
  score is not high (below :data:`CONFIDENT`), it does not stand far out of the list
  (:data:`LOOKALIKE_STANDOUT_RATIO` times the background) and it holds less than
  :data:`LOOKALIKE_COVERAGE` of the question's content weight (the embedding found a
  passage on something else);
* **between** :data:`FLOOR` **and the threshold** the best chunk is *promoted* (answered
  from as if above the threshold) when the evidence is relative rather than absolute:
  it holds at least :data:`MIN_COVERAGE` of the question's content weight, and it stands
  out of the list - its score is at least :data:`BACKGROUND_RATIO` times the score at
  rank :data:`BACKGROUND_RANK`, the level any chunk of this knowledge base reaches for
  this question (the off-topic baseline: for a question the documents do not answer
  the whole list scores alike);
* otherwise nothing is admitted: the answer is a refusal.

Coverage (:func:`coverage`) is the IDF-weighted share of the question's content words
(:func:`gcite.knowledge.sparse.terms`, the project's one tokeniser, without the words
that only ask - "多长时间", "咋办", "哪查" - which no document repeats,
:func:`gcite.verify.asks.without_asking`) found in the chunk's text, case ignored ("UPS"
asked as "ups") and in simplified characters (the words are cut from that form; a
document may be written in traditional ones). :func:`admit` applies the decision to the
knowledge retrieval node's items, for the offline answerer and a language model alike.
``score_threshold`` 0 turns the gate off (every retrieved chunk is kept, as the threshold
itself would).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gcite.knowledge.sparse import simplified, terms

FLOOR = 0.3
"""Below this relevance score a chunk is never promoted."""
MIN_COVERAGE = 0.3
"""Share of the question's content weight a promoted chunk holds at least."""
LOOKALIKE_COVERAGE = 0.2
"""A chunk above the threshold holding less than this share is a lookalike..."""
CONFIDENT = 0.85
"""... unless its score is at least this high (the embedding is sure) ..."""
LOOKALIKE_STANDOUT_RATIO = 8.0
"""... or it stands far out of the list: at least this many times the background score
(a background there is: at least :data:`BACKGROUND_RANK` chunks came back). A question in
other words than the document's shares few of its words, yet the embedding places one
chunk far above everything else the knowledge base holds."""
BACKGROUND_RATIO = 4.0
"""A promoted chunk scores at least this many times the background score."""
BACKGROUND_RANK = 5
"""The rank (1-based) whose score is the background (0 when fewer chunks came back)."""
STANDOUT_FLOOR = 0.05
"""A best chunk under the weak floor that stands out of the list (:data:`STANDOUT_RATIO`)
and scores at least this is still passed on as weak (see :func:`admit`)."""
STANDOUT_RATIO = 1.6
"""A best chunk stands out of the list (to be passed on as weak) at this many times the
background score: the answerer still needs strong evidence to quote it."""
SAME_DOCUMENT_RANK = 3
"""With a best chunk standing out, the other chunks of its document ranked within this
many (1-based) are passed on as weak too: the document is the right one, the chunk ranked
first often is not (the question's words are in one section, the answer in the next)."""

Reason = Literal["above_threshold", "promoted", "lookalike", "below_floor", "weak", "none", "off"]


@dataclass(frozen=True)
class Evidence:
    """What the decision weighs, for one question and its ranked chunks.

    ``score``: the best chunk's relevance (0-1); ``background``: the score at rank
    :data:`BACKGROUND_RANK` (0 without one); ``coverage``: the best chunk's share of the
    question's content weight (0-1).
    """

    score: float
    background: float
    coverage: float


@dataclass(frozen=True)
class Decision:
    """``answer``: whether anything retrieved may be answered from; ``promoted``: the best
    chunk is below the threshold but admitted; ``reason``: which rule decided."""

    answer: bool
    promoted: bool
    reason: Reason


@dataclass
class Admitted:
    """The gate applied to retrieved items: ``items`` the chunks passed on (admitted ones,
    then - for a backend that weighs weak chunks itself - the rest down to its floor);
    ``promoted``: segment ids of the chunks admitted below the threshold."""

    items: list[dict[str, Any]]
    decision: Decision
    promoted: set[str] = field(default_factory=set)


def coverage(question: str, content: str) -> float:
    """IDF-weighted share (0-1) of ``question``'s content words found in ``content``
    (as substrings, case ignored, so a word cut differently in the chunk still counts; in
    simplified characters, :func:`gcite.knowledge.sparse.simplified`).
    Words that only ask (:func:`gcite.verify.asks.asks_only`) do not count, unless
    the question has no other; a compound not found counts half the share of its parts
    found. 0 for a question without content words."""
    from gcite.verify.asks import without_asking

    weights = without_asking(terms(question, search=False))
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    low = simplified(content).lower()
    return sum(w * _found_share(word.lower(), low) for word, w in weights.items()) / total


def _found_share(word: str, low: str) -> float:
    """1 when ``word`` is in ``low``; for a compound that is not ("监控室" where the text
    says "监控中心"), half the share of the weight of its parts (the tokeniser's search
    cut, words of two or more characters) found; else 0."""
    if word in low:
        return 1.0
    if len(word) < 3:
        return 0.0
    parts = {p: v for p, v in terms(word, search=True).items() if p != word and len(p) >= 2}
    total = sum(parts.values())
    if total <= 0:
        return 0.0
    return 0.5 * sum(v for p, v in parts.items() if p.lower() in low) / total


def score_of(item: Mapping[str, Any]) -> float:
    """The relevance score of a Dify retrieval item (``metadata.score``, else ``score``;
    0 when missing or not a number)."""
    metadata = item.get("metadata")
    value = metadata.get("score") if isinstance(metadata, Mapping) else None
    if value is None:
        value = item.get("score")
    return float(value) if isinstance(value, int | float) else 0.0


def evidence(question: str, items: Sequence[Mapping[str, Any]]) -> Evidence:
    """The :class:`Evidence` of ``items`` (ranked best first) for ``question``."""
    if not items:
        return Evidence(0.0, 0.0, 0.0)
    scores = sorted((score_of(i) for i in items), reverse=True)
    background = scores[BACKGROUND_RANK - 1] if len(scores) >= BACKGROUND_RANK else 0.0
    best = max(items, key=score_of)
    return Evidence(scores[0], background, coverage(question, str(best.get("content") or "")))


def decide(ev: Evidence, threshold: float) -> Decision:
    """The refusal decision for ``ev`` at ``score_threshold`` ``threshold`` (see the module
    docstring). Pure."""
    if threshold <= 0:
        return Decision(True, False, "off")
    if ev.score <= 0:
        return Decision(False, False, "none")
    stands_out = ev.score >= BACKGROUND_RATIO * ev.background
    if ev.score >= threshold:
        far_out = 0 < LOOKALIKE_STANDOUT_RATIO * ev.background <= ev.score
        if ev.score < CONFIDENT and ev.coverage < LOOKALIKE_COVERAGE and not far_out:
            return Decision(False, False, "lookalike")
        return Decision(True, False, "above_threshold")
    if ev.score < FLOOR:
        return Decision(False, False, "below_floor")
    if ev.coverage >= MIN_COVERAGE and stands_out:
        return Decision(True, True, "promoted")
    return Decision(False, False, "weak")


def admit(
    question: str,
    items: Sequence[dict[str, Any]],
    threshold: float,
    *,
    weak_floor: float | None = None,
) -> Admitted:
    """The gate on the knowledge retrieval node's ``items`` (retrieved without a score
    threshold, at least :data:`BACKGROUND_RANK` of them when the knowledge base has them,
    best first). Admitted: every chunk at or above ``threshold`` and a promoted best
    chunk - none when the decision refuses. ``weak_floor``: also pass on the other chunks
    scored at or above it (a backend that weighs weak chunks itself,
    :func:`gcite.chatflow.run.weak_margin`), and the best chunk when it stands out of
    the list (:data:`STANDOUT_RATIO` times the background, at least
    :data:`STANDOUT_FLOOR`: a question in other words than the document's scores its
    chunk low, but still far above the rest) with its document's other chunks ranked
    within :data:`SAME_DOCUMENT_RANK` (``metadata.document_id``), except for a
    lookalike; ``None``: only the admitted ones. Pure."""
    ev = evidence(question, items)
    decision = decide(ev, threshold)
    if decision.reason == "off":
        return Admitted(list(items), decision)
    admitted: list[dict[str, Any]] = []
    promoted: set[str] = set()
    if decision.answer:
        best = max(items, key=score_of)
        for item in items:
            if score_of(item) >= threshold:
                admitted.append(item)
            elif item is best:
                admitted.append(item)
                promoted.add(_segment_id(item))
    rest: list[dict[str, Any]] = []
    if weak_floor is not None and decision.reason != "lookalike":
        floor = weak_floor
        standout = ev.score >= max(STANDOUT_FLOOR, STANDOUT_RATIO * ev.background)
        if standout:
            floor = min(weak_floor, ev.score)
        rest = [i for i in items if i not in admitted and score_of(i) >= floor]
        if standout:
            best = max(items, key=score_of)
            doc = _document_id(best)
            rest += [
                i
                for i in items[:SAME_DOCUMENT_RANK]
                if i not in admitted and i not in rest and doc and _document_id(i) == doc
            ]
    return Admitted(admitted + rest, decision, promoted)


def _document_id(item: Mapping[str, Any]) -> str:
    metadata = item.get("metadata")
    value = metadata.get("document_id") if isinstance(metadata, Mapping) else None
    return str(value or "")


def _segment_id(item: Mapping[str, Any]) -> str:
    metadata = item.get("metadata")
    value = metadata.get("segment_id") if isinstance(metadata, Mapping) else None
    return str(value or item.get("segment_id") or "")


__all__ = [
    "BACKGROUND_RANK",
    "BACKGROUND_RATIO",
    "CONFIDENT",
    "FLOOR",
    "LOOKALIKE_COVERAGE",
    "LOOKALIKE_STANDOUT_RATIO",
    "MIN_COVERAGE",
    "SAME_DOCUMENT_RANK",
    "STANDOUT_FLOOR",
    "STANDOUT_RATIO",
    "Admitted",
    "Decision",
    "Evidence",
    "admit",
    "coverage",
    "decide",
    "evidence",
    "score_of",
]
