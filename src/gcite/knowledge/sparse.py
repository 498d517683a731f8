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
:mod:`gcite.knowledge.relevance`).

This is gcite's one tokeniser: the citation verifier and the offline answerer take the
content words of a text with their IDF weights from :func:`terms`, cut the same way
(the same codes kept whole) with a longer stopword list (:data:`NON_CONTENT`).
Pure functions; jieba's dictionary and IDF table load once per process (about a
second).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

K1 = 1.2
B = 0.75
AVG_LEN = 180.0  # tokens; roughly one 600-character chunk of Chinese law text

_WORD = re.compile(r"[\w\u3400-\u9fff]", re.U)
_CJK = re.compile(r"[\u3400-\u9fff]")
_STOPWORD_TEXT = (
    "的 了 和 与 及 或 是 在 对 由 为 被 把 之 其 等 这 那 有 也 都 就 而 并 则 以 于 "
    "吗 呢 吧 啊 么 什么 怎么 如何 哪些 多少 我们 你们 他们 我 你 他 她 它 要 该 会 能 "
    "a an the of to and or in on for is are be by with"
)
#: Function words left out of the BM25 vectors.
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
#: Words that carry no content in a question or a claim (question words, fillers): left
#: out of :func:`terms` besides :data:`STOPWORDS`.
NON_CONTENT = STOPWORDS | frozenset(
    """
    什么 怎么 怎么样 怎样 如何 哪些 哪个 哪里 哪儿 多少 几个 是否 是不是 能否 能不能 可以 可否
    请问 一下 我们 你们 他们 她们 这个 那个 这些 那些 为什么 为何 需要 应该 要求 有没有 没有
    有关 关于 以及 或者 还是 就是 自己 进行 其中 时候 问题 知道 告诉 规定 情况 吗 呢 吧 啊 呀
    的 了 是 在 有 和 与 或 及 等 也 都 就 还 要 会 能 得 地 着 过 被 把 对 向 从 给 让 按 按照
    个 这 那 其 之 所 为 以 于 而 并 且 但 则 由 将 已 应 须 该 可 不 又 再 该由 哦 嘛 咋 啥 么
    怎 谁 几 多 多久 一 上 下 中 里 后 前 内 外 时 人 事 来 去 做 说 想 找 用 办 弄 搞 行 算 呗
    请 您 你 我 他 她 它 咱 咱们 大家 现在 今天 一般 通常 法律 规定 要求 按法律 法律上 the and
    what how is are of to a an in
    """.split()  # noqa: SIM905 - a word list reads better as text
)
#: The longest run of characters jieba cuts as one block (its ``re_han`` class plus the
#: CJK extension A). jieba's HMM step (``finalseg.viterbi``) copies its path per character,
#: quadratic in a block of unknown single characters (seconds for 20,000 of one character);
#: a longer run is cut into blocks of this length, which no sentence of real text reaches.
MAX_BLOCK = 400
_LONG_BLOCK = re.compile(rf"[\u3400-\u9fffa-z0-9+#&._%\-]{{{MAX_BLOCK}}}")
_IDENTIFIER = re.compile(
    r"(?<![0-9a-z])(?=[0-9a-z._/-]*[0-9])[0-9a-z]+(?:[-_./][0-9a-z]+)+(?![0-9a-z])"
)


@functools.cache
def _t2s() -> Any:
    """OpenCC's traditional-to-simplified converter (its dictionaries loaded once per
    process)."""
    import opencc

    return opencc.OpenCC("t2s")


def simplified(text: str) -> str:
    """``text`` with traditional Chinese characters and phrases written in simplified ones
    ("報修電話" -> 报修电话; OpenCC ``t2s``); text without Chinese, and simplified text,
    unchanged. The tokens of every text are cut from this form (:func:`words`), so a
    document and a question match whichever script each is written in; quotes keep the
    document's own characters. A lone UTF-16 surrogate (a web page's JSON may hold half of
    a pair its provider cut) is read as U+FFFD: OpenCC takes UTF-8 only, and the form keeps
    its length."""
    if not _CJK.search(text):
        return text
    try:
        return str(_t2s().convert(text))
    except UnicodeEncodeError:
        from gcite.stream.surrogates import fix_surrogates

        return str(_t2s().convert(fix_surrogates(text)))


@dataclass(frozen=True)
class Sparse:
    """A sparse vector: parallel ``indices`` (uint32 token ids) and ``values``."""

    indices: list[int]
    values: list[float]


@functools.cache
def _jieba() -> Any:
    """jieba with its dictionary loaded (its ``initialize`` holds jieba's own lock)."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def jieba_module() -> Any:
    """jieba, its dictionary loaded (once per process)."""
    return _jieba()


@functools.cache
def word_tags() -> Mapping[str, str]:
    """jieba's dictionary: word -> part-of-speech tag (loaded once per process)."""
    jieba_module()
    import jieba.posseg

    tokenizer: Any = jieba.posseg.dt
    return tokenizer.word_tag_tab  # type: ignore[no-any-return]


def _words(text: str, *, search: bool = True) -> list[str]:
    """Lower-cased jieba tokens of ``text`` (in simplified characters: :func:`simplified`)
    holding a letter, digit or CJK character (``search``: search mode, a long word and its
    sub-words; else the accurate cut), then every code/identifier (``eq-000123``) as one
    whole token."""
    jieba = _jieba()
    lowered = simplified(text.lower())
    blocks = _LONG_BLOCK.sub(r"\g<0> ", lowered)
    cut = jieba.lcut_for_search(blocks) if search else jieba.lcut(blocks)
    tokens = [token.strip() for token in cut]
    tokens = [token for token in tokens if token and _WORD.search(token)]
    tokens.extend(match.group(0) for match in _IDENTIFIER.finditer(lowered))
    return tokens


def words(text: str, *, search: bool = True) -> list[str]:
    """Every lower-cased token of ``text`` with a letter, digit or CJK character, stopwords
    included (``search``: jieba's search mode, else the accurate cut), then every
    code/identifier whole: what :func:`tokenize` and :func:`terms` filter."""
    return _words(text, search=search)


def tokenize(text: str) -> list[str]:
    """Lower-cased jieba search-mode tokens without punctuation and stopwords,
    plus every code/identifier (``eq-000123``) as one whole token."""
    return [token for token in _words(text) if token not in STOPWORDS]


@functools.cache
def _idf_table() -> tuple[dict[str, float], float]:
    """jieba's general-Chinese IDF table (``jieba/analyse/idf.txt``) and its median.

    The file is read as a resource of ``jieba`` itself: naming the package
    ``jieba.analyse`` would import it, and its import builds jieba's keyword extractors
    (loading the same table into one of them, and the part-of-speech tagger)."""
    from importlib.resources import files

    table: dict[str, float] = {}
    source = files("jieba").joinpath("analyse", "idf.txt")
    for line in source.read_text(encoding="utf-8").splitlines():
        word, _, value = line.rpartition(" ")
        if word:
            table[word] = float(value)
    values = sorted(table.values())
    return table, values[len(values) // 2] if values else 12.0


def _idf(token: str) -> float:
    """The IDF weight of ``token``: the table's, else its median (a rare word, a code, a
    number); single characters weigh half (mostly parts of longer words counted already)."""
    table, default = _idf_table()
    weight = table.get(token, default)
    return weight / 2 if len(token) == 1 else weight


def terms(text: str, *, search: bool = True) -> dict[str, float]:
    """Content words of ``text`` -> IDF weight (for the verifier and the offline answerer).

    The tokens of :func:`tokenize` (``search=False``: jieba's accurate cut, each word
    once) without :data:`NON_CONTENT` words and single non-CJK characters, weighed as
    :func:`query_weights` weighs them.
    """
    return dict(_terms(text, search))


@functools.lru_cache(maxsize=8192)
def _terms(text: str, search: bool) -> tuple[tuple[str, float], ...]:
    weights: dict[str, float] = {}
    for word in _words(text, search=search):
        if word in NON_CONTENT or (len(word) == 1 and not _CJK.match(word)):
            continue
        weights[word] = max(weights.get(word, 0.0), _idf(word))
    return tuple(weights.items())


def query_weights(text: str) -> dict[int, float]:
    """Token id -> general IDF weight of each distinct query token (for lexical coverage).

    Weights come from jieba's IDF table (``jieba/analyse/idf.txt``, general
    Chinese text); a token it does not list (a rare word, a code, a number)
    gets the table's median. Single characters weigh half: they are mostly
    parts of longer words already counted.
    """
    return _weights(tokenize(text))


def _weights(tokens: list[str]) -> dict[int, float]:
    weights: dict[int, float] = {}
    for token in dict.fromkeys(tokens):
        idx = token_id(token)
        weights[idx] = max(weights.get(idx, 0.0), _idf(token))
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
    "NON_CONTENT",
    "STOPWORDS",
    "B",
    "Sparse",
    "document_vector",
    "query_terms",
    "query_vector",
    "query_weights",
    "terms",
    "token_id",
    "tokenize",
    "word_tags",
]
