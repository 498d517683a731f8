"""A small in-memory BM25 index over passages, with jieba tokens (the offline source's fallback).

Okapi BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework:
BM25 and Beyond", 2009) with ``k1 = 1.5``, ``b = 0.75`` and the non-negative
idf ``log(1 + (N - df + 0.5) / (df + 0.5))``. Tokens come from the one BM25
tokeniser the knowledge base uses too (:func:`gcite.knowledge.sparse.tokenize`:
jieba search-mode words, lower-cased, without punctuation and stopwords), so
Chinese and Latin text both work. Pure and synchronous; build cost is linear in
the text size.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from gcite.knowledge.sparse import tokenize


@dataclass(frozen=True)
class Hit:
    """One ranked passage: its position in the indexed sequence and its BM25 score (> 0)."""

    index: int
    score: float


class Bm25Index:
    """BM25 over ``passages`` (any strings); :meth:`search` returns :class:`Hit` items."""

    def __init__(self, passages: Sequence[str], *, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._docs = [Counter(tokenize(p)) for p in passages]
        self._lengths = [sum(d.values()) for d in self._docs]
        self._avg = (sum(self._lengths) / len(self._docs)) if self._docs else 0.0
        df: Counter[str] = Counter()
        for doc in self._docs:
            df.update(doc.keys())
        n = len(self._docs)
        self._idf = {t: math.log(1.0 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def __len__(self) -> int:
        return len(self._docs)

    def search(self, query: str, top_k: int) -> list[Hit]:
        """The ``top_k`` best passages for ``query``, score descending (ties: index order).

        Passages sharing no token with the query are never returned; an empty
        query or ``top_k < 1`` gives ``[]``.
        """
        terms = [t for t in dict.fromkeys(tokenize(query)) if t in self._idf]
        if not terms or top_k < 1:
            return []
        hits: list[Hit] = []
        for i, doc in enumerate(self._docs):
            score = 0.0
            norm = self.k1 * (1.0 - self.b + self.b * self._lengths[i] / (self._avg or 1.0))
            for term in terms:
                tf = doc.get(term, 0)
                if tf:
                    score += self._idf[term] * tf * (self.k1 + 1.0) / (tf + norm)
            if score > 0:
                hits.append(Hit(i, score))
        hits.sort(key=lambda h: (-h.score, h.index))
        return hits[:top_k]


__all__ = ["Bm25Index", "Hit", "tokenize"]
