"""BM25 sparse vectors with a Chinese tokenizer (jieba search mode).

Documents get the BM25 term-frequency part per token::

    w(t, d) = tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avg_len))

and queries get weight 1 per distinct token; the store's sparse vector is
configured with the IDF modifier, so Qdrant multiplies by each token's IDF at
query time, giving exactly BM25 (Qdrant "sparse vectors with IDF" docs). A
fixed ``avg_len`` keeps a document's vector independent of the rest of the
corpus, so re-ingesting one file never touches the others.

Codes and identifiers (letters and digits joined by ``-``, ``_``, ``.`` or
``/`` and holding a digit, e.g. ``EQ-000123``, ``GB50016-2014``, ``v2.1``) are
also indexed whole, so an exact code outranks codes that only share a part.

Token ids are the first 4 bytes of BLAKE2b of the token (stable across runs
and machines, unlike ``hash()``). :func:`query_weights` weighs query tokens by
jieba's general-Chinese IDF table (for the relevance score,
:mod:`gcite.knowledge.relevance`). Pure functions; jieba's dictionary and
IDF table load once per process (about a second).
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections import Counter
from dataclasses import dataclass

K1 = 1.2
B = 0.75
AVG_LEN = 180.0  # tokens; roughly one 600-character chunk of Chinese law text

_WORD = re.compile(r"[\w\u3400-\u9fff]", re.U)
_STOPWORD_TEXT = (
    "的 了 和 与 及 或 是 在 对 由 为 被 把 之 其 等 这 那 有 也 都 就 而 并 则 以 于 "
    "吗 呢 吧 啊 么 什么 怎么 如何 哪些 多少 我们 你们 他们 我 你 他 她 它 要 该 会 能 "
    "a an the of to and or in on for is are be by with"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_IDENTIFIER = re.compile(
    r"(?<![0-9a-z])(?=[0-9a-z._/-]*[0-9])[0-9a-z]+(?:[-_./][0-9a-z]+)+(?![0-9a-z])"
)
_lock = threading.Lock()
_ready = False
_idf: dict[str, float] | None = None
_idf_default = 12.0


@dataclass(frozen=True)
class Sparse:
    """A sparse vector: parallel ``indices`` (uint32 token ids) and ``values``."""

    indices: list[int]
    values: list[float]


def _jieba() -> object:
    global _ready
    import jieba

    if not _ready:
        with _lock:
            if not _ready:
                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _ready = True
    return jieba


def tokenize(text: str) -> list[str]:
    """Lower-cased jieba search-mode tokens without punctuation and stopwords,
    plus every code/identifier (``eq-000123``) as one whole token."""
    jieba = _jieba()
    lowered = text.lower()
    tokens: list[str] = []
    for token in jieba.lcut_for_search(lowered):  # type: ignore[attr-defined]
        token = token.strip()
        if token and _WORD.search(token) and token not in _STOPWORDS:
            tokens.append(token)
    tokens.extend(match.group(0) for match in _IDENTIFIER.finditer(lowered))
    return tokens


def _idf_table() -> tuple[dict[str, float], float]:
    global _idf, _idf_default
    if _idf is None:
        with _lock:
            if _idf is None:
                from importlib.resources import files

                table: dict[str, float] = {}
                source = files("jieba.analyse").joinpath("idf.txt")
                for line in source.read_text(encoding="utf-8").splitlines():
                    word, _, value = line.rpartition(" ")
                    if word:
                        table[word] = float(value)
                values = sorted(table.values())
                _idf_default = values[len(values) // 2] if values else 12.0
                _idf = table
    return _idf, _idf_default


def query_weights(text: str) -> dict[int, float]:
    """Token id -> general IDF weight of each distinct query token (for lexical coverage).

    Weights come from jieba's IDF table (``jieba/analyse/idf.txt``, general
    Chinese text); a token it does not list (a rare word, a code, a number)
    gets the table's median. Single characters weigh half: they are mostly
    parts of longer words already counted.
    """
    return _weights(tokenize(text))


def _weights(tokens: list[str]) -> dict[int, float]:
    table, default = _idf_table()
    weights: dict[int, float] = {}
    for token in dict.fromkeys(tokens):
        weight = table.get(token, default)
        if len(token) == 1:
            weight /= 2
        idx = token_id(token)
        weights[idx] = max(weights.get(idx, 0.0), weight)
    return weights


def token_id(token: str) -> int:
    """Stable 32-bit id of a token."""
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=4).digest(), "big")


def _collect(counts: Counter[str]) -> dict[int, int]:
    merged: dict[int, int] = {}
    for token, tf in counts.items():
        idx = token_id(token)
        merged[idx] = merged.get(idx, 0) + tf
    return merged


def document_vector(text: str, *, k1: float = K1, b: float = B, avg_len: float = AVG_LEN) -> Sparse:
    """BM25 term-frequency weights of a document (IDF is applied by the store)."""
    tokens = tokenize(text)
    length = len(tokens)
    merged = _collect(Counter(tokens))
    norm = k1 * (1 - b + b * length / avg_len)
    indices = sorted(merged)
    values = [merged[i] * (k1 + 1) / (merged[i] + norm) for i in indices]
    return Sparse(indices, values)


def query_vector(text: str) -> Sparse:
    """Weight 1.0 per distinct query token (the store multiplies by IDF)."""
    return _vector(tokenize(text))


def _vector(tokens: list[str]) -> Sparse:
    indices = sorted(_collect(Counter(tokens)))
    return Sparse(indices, [1.0] * len(indices))


def query_terms(text: str) -> tuple[Sparse, dict[int, float]]:
    """``(query_vector(text), query_weights(text))`` from one tokenisation of ``text``."""
    tokens = tokenize(text)
    return _vector(tokens), _weights(tokens)


__all__ = [
    "AVG_LEN",
    "K1",
    "B",
    "Sparse",
    "document_vector",
    "query_terms",
    "query_vector",
    "query_weights",
    "token_id",
    "tokenize",
]
