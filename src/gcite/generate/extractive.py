"""The offline extractive backend: answers with the chunk sentences that best match the question.

It follows the seed §5.2 answering rules without a language model: every sentence it
writes is copied from one merged chunk and ends with that chunk's ``[C:N]`` marker
(rule 2); chunks that do not match are not used (rule 3); when nothing matches it
answers exactly "根据现有资料无法确定" with no marker (rule 6).

Scoring is lexical: the question is cut into words with jieba (search mode), question
words (什么, 怎么, 多少 ...) are dropped, and a sentence's score is the share of the
question's word weight (word length, in characters) that it contains. Deterministic:
same chunks and question, same answer, same deltas.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from gcite.generate.backends import BackendLifecycle, Usage, estimate_tokens
from gcite.generate.prompt import NO_ANSWER

_STOPWORDS = frozenset(
    [
        "什么",
        "怎么",
        "怎么样",
        "怎样",
        "如何",
        "哪些",
        "哪个",
        "哪里",
        "哪儿",
        "多少",
        "几个",
        "是否",
        "是不是",
        "能否",
        "可以",
        "可否",
        "请问",
        "一下",
        "我们",
        "你们",
        "他们",
        "她们",
        "这个",
        "那个",
        "这些",
        "那些",
        "为什么",
        "为何",
        "需要",
        "应该",
        "要求",
        "有没有",
        "没有",
        "有关",
        "关于",
        "以及",
        "或者",
        "还是",
        "就是",
        "自己",
        "进行",
        "其中",
        "时候",
        "问题",
        "知道",
        "告诉",
        "规定",
        "情况",
        "the",
        "and",
        "what",
        "how",
    ]
)
# Sentences end at 。！？!? and line breaks; semicolons stay inside, so an enumerated
# procedure ("第一步……；第二步……。") is one answer sentence.
_SENTENCE_RE = re.compile(r"[^。！？!?\n]+[。！？!?]*")
_END_PUNCT = "。！？!?；;"
_WORD_RE = re.compile(r"[\w\u4e00-\u9fff]")
_jieba_lock = threading.Lock()


def _cut(text: str) -> list[str]:
    import jieba

    with _jieba_lock:  # jieba lazily builds its dictionary; not thread-safe on first use
        jieba.setLogLevel(logging.WARNING)
        return list(jieba.cut_for_search(text))


def query_terms(query: str) -> dict[str, int]:
    """The question's content words with their weights (length in characters).

    Words shorter than two characters, punctuation and question words are dropped;
    a question with no such word falls back to its CJK character bigrams.
    """
    terms: dict[str, int] = {}
    for raw in _cut(query):
        word = raw.strip().lower()
        if len(word) < 2 or word in _STOPWORDS or not _WORD_RE.search(word):
            continue
        terms[word] = len(word)
    if not terms:
        cjk = "".join(ch for ch in query if "\u4e00" <= ch <= "\u9fff")
        for i in range(len(cjk) - 1):
            terms[cjk[i : i + 2]] = 2
    return terms


#: Answer cues: what kind of answer a question asks for, and text that looks like one.
#: A question that asks for a phone number is answered by a sentence with a hotline,
#: one that asks "how to use" by steps, "where" by a place (classic answer-type cues).
_CUES: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = (
    (
        re.compile(r"电话|号码|热线|联系方式|怎么联系|打给"),
        re.compile(r"热线|电话|拨打|号码|\d{3,4}[-\s]?\d{3,4}"),
    ),
    (
        re.compile(r"怎么用|如何用|怎样用|怎么使用|如何使用|用法|使用方法|怎么操作|如何操作|步骤"),
        re.compile(r"使用|步骤|第[一二三四1-4]步|首先|然后|操作"),
    ),
    (
        re.compile(r"哪里|在哪|什么地方|位置|地点|放在"),
        re.compile(r"位于|存放|放在|设在|[0-9０-９BbＢ]+\s*层|东侧|西侧|南侧|北侧"),
    ),
    (
        re.compile(r"多久|多长时间|几天|几小时|几分钟|什么时候|何时|几点|时限|期限"),
        re.compile(r"\d+\s*(?:分钟|小时|天|日|个工作日|周|月|年)|\d{1,2}[:：]\d{2}|内"),
    ),
    (
        re.compile(r"多少|几个|几次|几名|几人"),
        re.compile(r"\d|[一二两三四五六七八九十百千]+\s*(?:个|次|名|人|具|处|条)"),
    ),
)
#: Score added to a sentence that looks like the kind of answer the question asks for.
CUE_BONUS = 0.3


def answer_cues(query: str) -> list[re.Pattern[str]]:
    """The answer-cue patterns (see ``_CUES``) that apply to ``query``."""
    return [answer for question, answer in _CUES if question.search(query)]


def split_sentences(content: str) -> list[str]:
    """Sentences of a chunk (split after 。！？!? and line breaks), headings cleaned."""
    sentences: list[str] = []
    for match in _SENTENCE_RE.finditer(content):
        sentence = match.group(0).strip().lstrip("#").strip()
        if len(sentence) >= 4:
            sentences.append(sentence)
    return sentences


_LIST_MARK_RE = re.compile(r"^(?:\d{1,3}[.、)）]|[-*•·])\s*")


def _is_heading_line(line: str, first: bool) -> bool:
    """A Markdown heading, a breadcrumb (``A > B``), or a short unpunctuated first line."""
    text = line.strip()
    if not text or text[-1] in _END_PUNCT + "。，,：:":
        return False
    return text.startswith("#") or " > " in text or (first and len(text) <= 40)


def chunk_units(content: str) -> tuple[str, list[str]]:
    """``(heading context, answerable sentences)`` of one chunk.

    Heading lines (Markdown headings, the knowledge base's breadcrumb first line, a short
    unpunctuated first line) are context, never answer sentences: they say where a
    sentence stands, and a question's words in them lift the sentences below.
    List markers (``1.``, ``-``) are dropped from the sentences.
    """
    headings: list[str] = []
    body: list[str] = []
    for line in content.splitlines():
        if not line.strip():
            continue
        if _is_heading_line(line, first=not body and not headings):
            headings.append(line.strip().lstrip("#").strip())
        else:
            body.append(line)
    sentences = [_LIST_MARK_RE.sub("", s) for s in split_sentences("\n".join(body))]
    return " ".join(headings), [s for s in sentences if len(s) >= 4]


def coverage(sentence: str, terms: dict[str, int]) -> float:
    """Share (0..1) of the question's term weight found in ``sentence``."""
    total = sum(terms.values())
    if not total:
        return 0.0
    low = sentence.lower()
    return sum(w for t, w in terms.items() if t in low) / total


@dataclass(frozen=True)
class Pick:
    """One chosen sentence: its chunk id, the chunk's rank, its position, its score."""

    chunk_id: str
    rank: int
    position: int
    score: float
    sentence: str


def pick_sentences(
    query: str,
    chunks: Sequence[dict[str, Any]],
    *,
    max_sentences: int = 3,
    min_score: float = 0.34,
) -> list[Pick]:
    """The best-matching sentences, in chunk order then sentence order.

    A sentence's score mixes its own :func:`coverage` (0.5), the coverage of the
    sentence with its chunk's heading context (0.3, :func:`chunk_units`) and the whole
    chunk's coverage (0.2). When the question asks for a kind of answer
    (:func:`answer_cues`: a number for "多少", a hotline for "电话", steps for "怎么用"),
    ``CUE_BONUS`` of the score goes to sentences that look like one. A sentence without
    any question word qualifies only through such a cue in a chunk that covers at least
    half of the question; any other sentence needs a score (before the cue) of at least
    ``min_score``: the cue ranks, it never makes an irrelevant sentence relevant.
    Qualified sentences within 60 % of the best final score are kept, at most
    ``max_sentences``, duplicates dropped. Empty when nothing qualifies.
    """
    terms = query_terms(query)
    cues = answer_cues(query)
    scored: list[Pick] = []
    for rank, chunk in enumerate(chunks):
        chunk_id = str(chunk.get("id") or "").strip()
        content = chunk.get("content")
        if not chunk_id or not isinstance(content, str):
            continue
        heading, sentences = chunk_units(content)
        chunk_cov = coverage(heading + " " + content, terms)
        for position, sentence in enumerate(sentences):
            own = coverage(sentence, terms)
            cued = any(cue.search(sentence) for cue in cues)
            if own <= 0.0 and not (cued and chunk_cov >= 0.5):
                # the sentence must say something the question asks about, or be the
                # kind of answer asked for in a chunk that is about the question
                continue
            score = 0.5 * own + 0.3 * coverage(heading + " " + sentence, terms) + 0.2 * chunk_cov
            # Relevance decides whether a sentence qualifies; the cue only ranks it
            # (a sentence with no question word qualifies through its chunk, above).
            if own > 0.0 and score < min_score:
                continue
            if cues:
                score = (1.0 - CUE_BONUS) * score + (CUE_BONUS if cued else 0.0)
            scored.append(Pick(chunk_id, rank, position, score, sentence))
    if not scored:
        return []
    best = max(p.score for p in scored)
    scored.sort(key=lambda p: (-p.score, p.rank, p.position))
    chosen: list[Pick] = []
    seen: set[str] = set()
    for pick in scored:
        if pick.score < 0.6 * best or len(chosen) >= max_sentences:
            break
        norm = "".join(pick.sentence.split())
        if norm in seen:
            continue
        seen.add(norm)
        chosen.append(pick)
    chosen.sort(key=lambda p: (p.rank, p.position))
    return chosen


def compose_answer(picks: Sequence[Pick]) -> str:
    """Join the picked sentences, each with ``[C:id]`` before its final punctuation."""
    if not picks:
        return NO_ANSWER
    parts: list[str] = []
    for pick in picks:
        body = pick.sentence.rstrip(_END_PUNCT).rstrip()
        end = pick.sentence[len(body) :].strip()[:1] or "。"
        if end in ";；":
            end = "。"
        parts.append(f"{body}[C:{pick.chunk_id}]{end}")
    return "".join(parts)


class ExtractiveBackend(BackendLifecycle):
    """Offline backend: :func:`pick_sentences` + :func:`compose_answer`, streamed in deltas.

    ``delta_chars``: characters per delta (markers may be cut across deltas, as real models
    do). ``name`` is ``"extractive"``.
    """

    name = "extractive"

    def __init__(self, *, delta_chars: int = 6, max_sentences: int = 3) -> None:
        self.delta_chars = max(1, delta_chars)
        self.max_sentences = max_sentences

    def warm_up(self) -> None:
        """Load jieba's dictionary now (about a second) instead of at the first question."""
        _cut("预热")

    def answer(self, query: str, chunks: Sequence[dict[str, Any]]) -> str:
        """The full answer text (markers included)."""
        return compose_answer(pick_sentences(query, chunks, max_sentences=self.max_sentences))

    async def stream(
        self,
        messages: Sequence[dict[str, str]],
        *,
        chunks: Sequence[dict[str, Any]],
        query: str,
        usage: Usage | None = None,
    ) -> AsyncIterator[str]:
        """Yield the answer in ``delta_chars``-sized deltas (never raises on bad chunks)."""
        text = await asyncio.to_thread(self.answer, query, list(chunks))
        if usage is not None:
            usage.prompt_tokens = estimate_tokens(messages)
            usage.completion_tokens = 0
            usage.estimated = True
        for i in range(0, len(text), self.delta_chars):
            if usage is not None:
                usage.completion_tokens += 1
            yield text[i : i + self.delta_chars]
            await asyncio.sleep(0)


__all__ = [
    "CUE_BONUS",
    "ExtractiveBackend",
    "Pick",
    "answer_cues",
    "chunk_units",
    "compose_answer",
    "coverage",
    "pick_sentences",
    "query_terms",
    "split_sentences",
]
