"""Scoring of ``gcite eval``: one answer against its question's gold, and the totals (pure).

A question's :class:`Observation` (what the system answered, what it cited, what retrieval
ranked, the verifier's report, the time taken) becomes a :class:`Verdict`:

- **refused**: nothing cited and the answer empty or holding "根据现有资料无法确定";
- **keywords**: every keyword group found in the answer (any alternative; spaces and
  case ignored), None when the question lists none;
- **gold chunk**: a cited chunk from a gold document (file name, or title), holding a gold
  passage (spaces ignored), or - law sets - from the gold file and holding a gold article
  (a line of the chunk starting with ``第X条``, :data:`gcite.knowledge.chunking.ARTICLE_RE`);
  any chunk of a gold document counts (:func:`is_gold_chunk`);
- **gold passage chunk** (:func:`holds_gold_passage`): a chunk holding a gold passage or a
  gold article - the chunk that answers; None for a question listing neither;
- **right**: answerable, answered (not refused, no error), keywords found (if listed)
  and a gold chunk cited (if gold sources are listed); for a question that cannot be
  answered, right means refused;
- **precision**: cited gold chunks / cited chunks;
- **gold passage cited**: a cited chunk is a gold passage chunk;
- **gold rank** (:func:`gold_rank`): the rank and score of the first gold passage chunk
  among the ranked knowledge-base chunks (the first chunk of a gold document when the
  question lists no passage or article); **gold document rank** (:func:`gold_doc_rank`):
  of the first chunk of a gold document;
- **verifier flagged**: the report lists weak citations, or says the answer does not
  answer the question (``answers_question: false``);
- **refusal stage** (:func:`refusal_stage`): where a refusal was decided, as far as the
  stream shows it - no knowledge-base chunk passed the relevance gate, the chunks passed
  on do not hold the answer's keywords (retrieval), or they were passed on and the
  answerer refused (its type and evidence rules).

:func:`aggregate` gives the figures of a run (shares are 0-1 floats, None when there is
nothing to divide by).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import PurePath
from typing import Any

from gcite.eval.questions import EvalQuestion
from gcite.generate.prompt import NO_ANSWER
from gcite.knowledge.chunking import ARTICLE_RE

#: The outcomes of a verdict (key -> Chinese label of the report).
OUTCOMES: dict[str, str] = {
    "right": "答对",
    "wrong": "答错",
    "false_refusal": "误拒（可答却拒答）",
    "refused": "正确拒答",
    "answered_unanswerable": "不可答却作答",
    "error": "出错",
}


#: Where a refusal was decided (key -> Chinese label of the report), see
#: :func:`refusal_stage`.
REFUSAL_STAGES: dict[str, str] = {
    "gate": "相关性闸门：没有知识库片段通过",
    "retrieval": "检索：交给答案器的片段里没有答案",
    "answerer": "答案器：片段已交给它，仍拒答",
}


@dataclass
class Observation:
    """What one question produced.

    ``answer``: the answer without citation markers; ``cited``: the cited chunks
    (UnifiedChunk dicts; ``{}`` for an id without metadata), in display order;
    ``retrieved``: the run's ``chunk_metadata`` (knowledge-base and web chunks, in order);
    ``probe``: knowledge-base chunks ranked for the question without a score threshold
    (``document_name``, ``content``, ``score``), None when not probed; ``verification``:
    ``message_end.metadata.gcite_verification`` or None; ``latency_ms``: request to end of
    stream; ``first_text_ms``: to the first answer text (None without text); ``error``:
    the stream's error message, or None.
    """

    answer: str
    cited: list[dict[str, Any]] = field(default_factory=list)
    retrieved: list[dict[str, Any]] = field(default_factory=list)
    probe: list[dict[str, Any]] | None = None
    verification: dict[str, Any] | None = None
    latency_ms: float = 0.0
    first_text_ms: float | None = None
    error: str | None = None


@dataclass
class Verdict:
    """One question's result (JSON-able through :meth:`as_dict`)."""

    id: str
    question: str
    category: str
    answerable: bool
    off_topic: bool
    answer: str
    outcome: str
    right: bool
    refused: bool
    keywords_ok: bool | None
    keywords_missing: list[list[str]]
    gold_cited: bool | None
    cited: int
    cited_gold: int
    precision: float | None
    sources: list[dict[str, Any]]
    gold_rank: int | None
    gold_score: float | None
    verifier_checked: bool
    verifier_flagged: bool
    weak_citations: int
    latency_ms: float
    first_text_ms: float | None
    error: str | None
    turns: list[dict[str, Any]] = field(default_factory=list)
    refusal_stage: str | None = None
    gold_rank_by: str | None = None
    gold_doc_rank: int | None = None
    gold_doc_score: float | None = None
    gold_passage_cited: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        """The verdict as a JSON-able dict (with ``outcome_label`` and, for a refusal,
        ``refusal_label``)."""
        out = asdict(self)
        out["outcome_label"] = OUTCOMES[self.outcome]
        out["refusal_label"] = REFUSAL_STAGES.get(self.refusal_stage or "")
        return out


def squeeze(text: str) -> str:
    """``text`` without whitespace, case-folded (keyword and passage matching)."""
    return "".join(text.split()).casefold()


def is_refusal(answer: str, cited: int) -> bool:
    """Whether an answer is a refusal: nothing cited, and empty or "根据现有资料无法确定"."""
    return cited == 0 and (not answer.strip() or NO_ANSWER in answer)


def refusal_stage(question: EvalQuestion, seen: Observation) -> str | None:
    """Where the refusal ``seen`` was decided (a key of :data:`REFUSAL_STAGES`; None when
    it is no refusal or failed): ``gate`` when no knowledge-base chunk was passed on
    (``retrieved`` holds none: the relevance gate refused); ``retrieval`` when the
    question lists keywords and the chunks passed on (knowledge base and web, together)
    lack some keyword group - the answer never reached the answerer; else ``answerer``
    (the chunks were passed on - holding the keywords, when there are any - and the
    answerer's rules refused)."""
    if seen.error is not None or not is_refusal(seen.answer, len(seen.cited)):
        return None
    if not any(str(c.get("source_type") or "rag") == "rag" for c in seen.retrieved):
        return "gate"
    # a separator whitespace-squeezing keeps: no keyword is found across two chunks
    passed = "\0".join(str(c.get("content") or "") for c in seen.retrieved)
    if question.keywords and missing_keywords(question, passed):
        return "retrieval"
    return "answerer"


def chunk_articles(content: str) -> list[str]:
    """The law articles whose heading (``第X条``) starts a line of ``content``."""
    out: list[str] = []
    for line in content.splitlines():
        match = ARTICLE_RE.match(line)
        if match:
            out.append(match.group(1))
    return out


def _same_file(name: str, gold: str) -> bool:
    if not name or not gold:
        return False
    a, b = PurePath(name.replace("\\", "/")), PurePath(gold.replace("\\", "/"))
    return a.name == b.name or (a.stem == b.stem and bool(a.stem))


def _holds_article(question: EvalQuestion, name: str, content: str) -> bool:
    if not question.gold_articles:
        return False
    held = set(chunk_articles(content))
    return any(_same_file(name, g.doc) and g.article in held for g in question.gold_articles)


def _holds_passage(question: EvalQuestion, content: str) -> bool:
    flat = squeeze(content)
    return any(squeeze(p) in flat for p in question.gold_passages if p.strip())


def _in_gold_doc(question: EvalQuestion, name: str, title: str) -> bool:
    return any(_same_file(name, doc) or bool(title and title == doc) for doc in question.gold_docs)


def is_gold_chunk(question: EvalQuestion, chunk: dict[str, Any]) -> bool:
    """Whether ``chunk`` (a UnifiedChunk or a probe item) comes from the question's gold:
    any chunk of a gold document, a chunk holding a gold passage, or a chunk of a gold
    article's file holding that article (gold cited and citation precision)."""
    name = str(chunk.get("document_name") or "")
    content = str(chunk.get("content") or "")
    return (
        _holds_article(question, name, content)
        or _in_gold_doc(question, name, str(chunk.get("document_title") or ""))
        or _holds_passage(question, content)
    )


def gold_rank_by(question: EvalQuestion) -> str | None:
    """What :func:`gold_rank` looks for: ``passage`` (the question lists gold passages),
    ``article`` (gold law articles, no passages), ``document`` (gold documents only), or
    None (no gold sources)."""
    if question.gold_passages:
        return "passage"
    if question.gold_articles:
        return "article"
    return "document" if question.gold_docs else None


def holds_gold_passage(question: EvalQuestion, chunk: dict[str, Any]) -> bool | None:
    """Whether ``chunk`` holds a gold passage (spaces and case ignored, any document) or a
    gold article (from the article's file); None when the question lists neither."""
    if not (question.gold_passages or question.gold_articles):
        return None
    content = str(chunk.get("content") or "")
    name = str(chunk.get("document_name") or "")
    return _holds_article(question, name, content) or _holds_passage(question, content)


def missing_keywords(question: EvalQuestion, answer: str) -> list[list[str]]:
    """The keyword groups of which no alternative occurs in ``answer``."""
    flat = squeeze(answer)
    return [
        list(group) for group in question.keywords if not any(squeeze(k) in flat for k in group)
    ]


def _first_rank(
    ranked: Sequence[dict[str, Any]], wanted: Callable[[dict[str, Any]], bool]
) -> tuple[int | None, float | None]:
    """(1-based rank among the knowledge-base chunks, score) of the first ``wanted``
    chunk of ``ranked``, or (None, None)."""
    rank = 0
    for chunk in ranked:
        if chunk.get("source_type", "rag") != "rag":
            continue
        rank += 1
        if wanted(chunk):
            return rank, chunk_score(chunk)
    return None, None


def chunk_score(chunk: dict[str, Any]) -> float | None:
    """A chunk's ``score`` as a finite float, else None (a service's JSON may say ``NaN``
    or an integer too large for a float; neither is a score, nor valid in the report)."""
    score = chunk.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float):
        return None
    try:
        value = float(score)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def gold_rank(
    question: EvalQuestion, ranked: Sequence[dict[str, Any]]
) -> tuple[int | None, float | None]:
    """(1-based rank among the knowledge-base chunks of ``ranked``, score) of the gold
    chunk: the first chunk holding a gold passage or article (:func:`holds_gold_passage`),
    or - a question listing neither - the first chunk of a gold document; (None, None)
    when ``ranked`` holds none."""
    if gold_rank_by(question) == "document":
        return _first_rank(ranked, lambda c: is_gold_chunk(question, c))
    return _first_rank(ranked, lambda c: bool(holds_gold_passage(question, c)))


def gold_doc_rank(
    question: EvalQuestion, ranked: Sequence[dict[str, Any]]
) -> tuple[int | None, float | None]:
    """(rank, score) as :func:`gold_rank`, of the first chunk of a gold document: a
    ``gold_docs`` file (or title), a gold article's file, or - when the question lists
    passages but no documents - a document of which a knowledge-base chunk in ``ranked``
    holds a gold passage."""
    docs: set[str] = set()
    if question.gold_passages and not question.gold_docs:
        docs = {
            str(c.get("document_name") or "")
            for c in ranked
            if c.get("source_type", "rag") == "rag"
            and _holds_passage(question, str(c.get("content") or ""))
        } - {""}

    def in_gold_doc(chunk: dict[str, Any]) -> bool:
        name = str(chunk.get("document_name") or "")
        return (
            _in_gold_doc(question, name, str(chunk.get("document_title") or ""))
            or any(_same_file(name, g.doc) for g in question.gold_articles)
            or name in docs
        )

    return _first_rank(ranked, in_gold_doc)


def verifier_flags(report: dict[str, Any] | None) -> tuple[bool, bool, int]:
    """(checked, flagged, weak citations) of a ``gcite_verification`` report."""
    if not isinstance(report, dict):
        return False, False, 0
    weak = report.get("weak")
    count = len(weak) if isinstance(weak, list) else 0
    return True, count > 0 or report.get("answers_question") is False, count


def _source(question: EvalQuestion, chunk: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(chunk.get("id") or ""),
        "source_type": str(chunk.get("source_type") or ""),
        "document": str(chunk.get("document_name") or chunk.get("url") or ""),
        "title": str(chunk.get("document_title") or ""),
        "articles": chunk_articles(str(chunk.get("content") or ""))[:6],
        "score": chunk_score(chunk),
        "gold": is_gold_chunk(question, chunk) if question.has_gold_sources else None,
        "gold_passage": holds_gold_passage(question, chunk),
    }


def judge(question: EvalQuestion, seen: Observation) -> Verdict:
    """The :class:`Verdict` of one question."""
    cited = [c for c in seen.cited if isinstance(c, dict)]
    refused = seen.error is None and is_refusal(seen.answer, len(seen.cited))
    missing = missing_keywords(question, seen.answer) if question.keywords else []
    keywords_ok = (not missing) if question.keywords else None
    sources = [_source(question, c) for c in cited]
    cited_gold = sum(1 for s in sources if s["gold"])
    gold_cited = cited_gold > 0 if question.has_gold_sources else None
    passage_cited = (
        any(s["gold_passage"] for s in sources)
        if question.gold_passages or question.gold_articles
        else None
    )
    precision = cited_gold / len(seen.cited) if question.has_gold_sources and seen.cited else None
    if seen.error is not None:
        outcome, right = "error", False
    elif question.answerable:
        right = not refused and keywords_ok is not False and gold_cited is not False
        outcome = "right" if right else ("false_refusal" if refused else "wrong")
    else:
        right = refused
        outcome = "refused" if refused else "answered_unanswerable"
    rank, score, doc_rank, doc_score = None, None, None, None
    if question.answerable and question.has_gold_sources:
        ranked = seen.probe if seen.probe is not None else seen.retrieved
        rank, score = gold_rank(question, ranked)
        doc_rank, doc_score = gold_doc_rank(question, ranked)
    checked, flagged, weak = verifier_flags(seen.verification)
    return Verdict(
        id=question.id,
        question=question.question,
        category=question.category,
        answerable=question.answerable,
        off_topic=question.off_topic,
        answer=seen.answer,
        outcome=outcome,
        right=right,
        refused=refused,
        keywords_ok=keywords_ok,
        keywords_missing=missing,
        gold_cited=gold_cited,
        cited=len(seen.cited),
        cited_gold=cited_gold,
        precision=precision,
        sources=sources,
        gold_rank=rank,
        gold_score=score,
        verifier_checked=checked,
        verifier_flagged=flagged,
        weak_citations=weak,
        latency_ms=seen.latency_ms,
        first_text_ms=seen.first_text_ms,
        error=seen.error,
        turns=[{"query": t.query, "answer": t.answer} for t in question.turns],
        refusal_stage=refusal_stage(question, seen),
        gold_rank_by=gold_rank_by(question) if question.answerable else None,
        gold_doc_rank=doc_rank,
        gold_doc_score=doc_score,
        gold_passage_cited=passage_cited,
    )


def _share(part: int, whole: int) -> dict[str, Any]:
    return {"n": part, "of": whole, "share": part / whole if whole else None}


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


#: The rank bins of ``false_refusal_gold_ranks`` ("none": not among the ranked chunks).
RANK_BINS: tuple[str, ...] = ("1", "2-3", "4-10", "11+", "none")


def rank_bin(rank: int | None) -> str:
    """The :data:`RANK_BINS` bin of a 1-based rank (None: ``none``)."""
    if rank is None:
        return "none"
    if rank == 1:
        return "1"
    return "2-3" if rank <= 3 else ("4-10" if rank <= 10 else "11+")


def _false_refusal_ranks(answerable: Sequence[Verdict]) -> dict[str, Any]:
    refused = [v for v in answerable if v.outcome == "false_refusal"]
    ranked = [v for v in refused if v.gold_rank_by is not None]

    def top3(ranks: list[int | None]) -> dict[str, Any]:
        return _share(sum(1 for r in ranks if r is not None and r <= 3), len(ranks))

    def bins(ranks: list[int | None]) -> dict[str, int]:
        out = dict.fromkeys(RANK_BINS, 0)
        for r in ranks:
            out[rank_bin(r)] += 1
        return out

    return {
        "false_refusals_gold_top3": top3([v.gold_rank for v in refused]),
        "false_refusals_gold_doc_top3": top3([v.gold_doc_rank for v in refused]),
        "false_refusal_gold_ranks": {
            "chunk": bins([v.gold_rank for v in ranked]),
            "document": bins([v.gold_doc_rank for v in ranked]),
        },
    }


def aggregate(verdicts: Sequence[Verdict]) -> dict[str, Any]:
    """The figures of a run. Each share is ``{"n", "of", "share"}`` (``share`` None when
    ``of`` is 0); latencies in milliseconds (None without questions)."""
    answerable = [v for v in verdicts if v.answerable]
    unanswerable = [v for v in verdicts if not v.answerable]
    close = [v for v in unanswerable if not v.off_topic]
    off = [v for v in unanswerable if v.off_topic]
    with_gold = [v for v in answerable if v.gold_cited is not None and v.error is None]
    judged = [v for v in verdicts if v.precision is not None]
    answered = [v for v in verdicts if not v.refused and v.error is None]
    wrong = [v for v in answered if not v.right and v.verifier_checked]
    right = [v for v in answered if v.right and v.verifier_checked]
    categories: dict[str, dict[str, Any]] = {}
    for v in verdicts:
        entry = categories.setdefault(v.category, {"n": 0, "right": 0, "refused": 0})
        entry["n"] += 1
        entry["right"] += v.right
        entry["refused"] += v.refused
    for entry in categories.values():
        entry["share"] = entry["right"] / entry["n"]
    latencies = [v.latency_ms for v in verdicts if v.error is None]
    passages = [v for v in answerable if v.gold_passage_cited is not None and v.error is None]
    return {
        "questions": len(verdicts),
        "right": _share(sum(v.right for v in verdicts), len(verdicts)),
        "answerable_right": _share(sum(v.right for v in answerable), len(answerable)),
        "answerable_refused": _share(
            sum(v.outcome == "false_refusal" for v in answerable), len(answerable)
        ),
        "unanswerable_refused": _share(sum(v.refused for v in unanswerable), len(unanswerable)),
        "close_unanswerable_refused": _share(sum(v.refused for v in close), len(close)),
        "off_topic_refused": _share(sum(v.refused for v in off), len(off)),
        "gold_cited": _share(sum(bool(v.gold_cited) for v in with_gold), len(with_gold)),
        "gold_passage_cited": _share(
            sum(bool(v.gold_passage_cited) for v in passages), len(passages)
        ),
        "citation_precision": _share(
            sum(v.cited_gold for v in judged), sum(v.cited for v in judged)
        ),
        "verifier_flags_wrong": _share(sum(v.verifier_flagged for v in wrong), len(wrong)),
        "verifier_flags_right": _share(sum(v.verifier_flagged for v in right), len(right)),
        **_false_refusal_ranks(answerable),
        "false_refusal_stages": {
            stage: sum(v.outcome == "false_refusal" and v.refusal_stage == stage for v in verdicts)
            for stage in REFUSAL_STAGES
        },
        "errors": sum(v.error is not None for v in verdicts),
        "outcomes": {k: sum(v.outcome == k for v in verdicts) for k in OUTCOMES},
        "categories": categories,
        "latency_ms": {
            "median": statistics.median(latencies) if latencies else None,
            "p90": _percentile(latencies, 0.9),
            "max": max(latencies) if latencies else None,
        },
    }


__all__ = [
    "OUTCOMES",
    "RANK_BINS",
    "REFUSAL_STAGES",
    "Observation",
    "Verdict",
    "aggregate",
    "chunk_articles",
    "chunk_score",
    "gold_doc_rank",
    "gold_rank",
    "gold_rank_by",
    "holds_gold_passage",
    "is_gold_chunk",
    "is_refusal",
    "judge",
    "missing_keywords",
    "rank_bin",
    "refusal_stage",
    "squeeze",
    "verifier_flags",
]
