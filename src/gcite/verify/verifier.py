"""Verify a finished answer's citations against the chunks they cite.

:func:`answer_claims` cuts an answer (markers included, grammar v2) into sentences with
the raw chunk ids each one cites; :func:`verify_answer` scores every (sentence, cited
chunk) pair with a :class:`~gcite.verify.support.SupportModel` and returns a JSON-able
report, the value of ``message_end.metadata.gcite_verification``::

    {"version": 1, "model": "lexical+use", "threshold": 0.45, "judge": null | "<model>",
     "sentences": [{"index": 0, "text": "物业须在5分钟内到场。", "start": 0, "end": 11,
                    "citations": [{"id": "2", "score": 0.83, "supported": true,
                                   "support": {"text": "物业须在 5 分钟内到场…",
                                               "start": 261, "end": 283},
                                   "missing_numbers": []}]}],
     "weak": [{"sentence": 0, "id": "2"}], "checked": 3, "supported": 2,
     "answers_question": true | false | null,
     "answering": null | {"parts": [{"text": "电梯关人了物业几分钟能到", "types": ["duration"],
                                     "typed": true, "cover": 0.71, "missing": ["关人"],
                                     "answered": true, "refused": false}],
                          "min_cover": 0.25, "outranked_by": null | "1"}}

Two dimensions: *supported* (``sentences``, ``weak``: does each cited chunk state its
sentence) and *answers the question* (``answers_question``, ``answering``: does the
answer give what the question asks for, :func:`answering_report`; null when the run
had no question or cited nothing).

``start``/``end`` of a sentence are offsets in the answer *without markers* (what the
user reads); ``support.start``/``end`` are offsets in the cited chunk's ``content``.
A cited id unknown to ``chunks`` is reported with ``score`` 0, ``supported`` false and
``support`` null. Source: platform design §6.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gcite.config import Settings
from gcite.knowledge.sparse import simplified
from gcite.stream.parser import parse_all
from gcite.verify.asks import (
    answer_check,
    outranked_by,
    own_cover,
    question_types,
    sides_typed,
)
from gcite.verify.support import SupportModel, support_model

if TYPE_CHECKING:
    from gcite.knowledge.embed import Embedders

#: A citation whose support score is below this is weak ("该来源未能直接支持这句话").
#: Chosen from the planted-error curve (docs/benchmarks.md, "Citation verifier").
DEFAULT_THRESHOLD = 0.45
#: The second dimension flags an answer holding less than this share of a question
#: part's content words (the offline answerer itself refuses below
#: :data:`gcite.verify.asks.MIN_WORD_COVER`): a warning zone, not a refusal.
FLAG_COVER = 0.25
#: ... unless it holds at least this many of the part's own content words.
FLAG_WORDS = 3
#: A part of a question asking several things, or a follow-up (the earlier question
#: carried), is flagged when the answer holds less than this share of the weight of
#: the part's own content words: an answer to the other part, or to the earlier
#: question, does not answer it.
FLAG_OWN_COVER = 0.1
_ENDS = "。！？!?；;\n"
_CLAUSE_ENDS = "；;"
_CLOSERS = "”’」』）)"


@dataclass
class Claim:
    """One answer sentence: its text (no markers), offsets in the marker-free answer, ids."""

    text: str
    start: int
    end: int
    ids: list[str] = field(default_factory=list)


def answer_claims(answer: str) -> list[Claim]:
    """The answer's sentences with the raw ids they cite, in order.

    A marker belongs to the sentence whose text precedes it; a marker right after a
    sentence end ("…到场。[C:2]") belongs to that sentence. A clause ended by "；" / ";"
    is a sentence of its own only when it carries a marker; otherwise it stays joined
    to the clauses after it, up to their marker ("全部 24 个点位；日间……一条线路[C:1]。" is
    one claim citing 1). Sentences without text (punctuation only) are dropped;
    sentences without a marker are kept with ``ids=[]``.
    """
    claims: list[Claim] = []
    current = Claim("", 0, 0)
    pos = 0

    def close() -> None:
        nonlocal current
        if current.text.strip(" \t\n" + _ENDS + _CLOSERS):
            lead = len(current.text) - len(current.text.lstrip())
            current.start += lead
            current.text = current.text.strip()
            current.end = current.start + len(current.text)
            claims.append(current)
        elif current.ids and claims:
            claims[-1].ids.extend(i for i in current.ids if i not in claims[-1].ids)
        current = Claim("", pos, pos)

    for segment in parse_all(answer).segments:
        if "cite" in segment:
            raw = str(segment["cite"])
            if not current.text.strip(" \t\n" + _ENDS + _CLOSERS) and claims:
                if raw not in claims[-1].ids:
                    claims[-1].ids.append(raw)
            elif raw not in current.ids:
                current.ids.append(raw)
            continue
        text = segment.get("text")
        if not isinstance(text, str):
            continue
        for ch in text:
            current.text += ch
            pos += 1
            if ch in _ENDS and (ch not in _CLAUSE_ENDS or current.ids):
                close()
        # closers right after an end stay with the closed sentence (rare; ignored)
    close()
    return claims


def _cited_titles(answer: str, chunks: Sequence[Mapping[str, Any]]) -> str:
    """The document titles of the chunks ``answer`` cites, space-separated."""
    cited = {raw for claim in answer_claims(answer) for raw in claim.ids}
    titles = [
        str(chunk.get("document_title") or "")
        for chunk in chunks
        if str(chunk.get("id") or "").strip() in cited
    ]
    return " ".join(dict.fromkeys(t for t in titles if t))


def _simplified_chunk(chunk: Mapping[str, Any]) -> Mapping[str, Any]:
    """``chunk`` with its ``content`` and ``document_title`` in simplified characters (the
    same mapping when they are)."""
    content, title = chunk.get("content"), chunk.get("document_title")
    simple = simplified(content) if isinstance(content, str) else content
    renamed = simplified(title) if isinstance(title, str) else title
    if simple == content and renamed == title:
        return chunk
    return {**chunk, "content": simple, "document_title": renamed}


def _content_of(chunks: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for chunk in chunks:
        raw = str(chunk.get("id") or "").strip()
        content = chunk.get("content")
        if raw and isinstance(content, str):
            out[raw] = content
    return out


def answering_report(
    question: str,
    answer: str,
    *,
    search_query: str = "",
    context: str = "",
    min_cover: float = FLAG_COVER,
    chunks: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any] | None:
    """The second dimension: does ``answer`` (markers included) answer ``question``?

    ``{"answers_question": bool, "parts": [{"text", "types", "typed", "cover",
    "missing", "answered", "refused"}], "min_cover": 0.25}``, or None when there is
    nothing to judge (no question, or nothing cited: a refusal). Each part of the
    question (:func:`gcite.verify.asks.question_parts`) is answered when the answer
    gives a value of the strict answer type it asks for (a sum of money, a duration, a
    phone number, a place...; each side of a part typed as two questions with a space
    between them the type it asks, :func:`gcite.verify.asks.sides_typed`) and holds
    ``min_cover`` of the weight of its content
    words (:func:`gcite.knowledge.sparse.terms`) or ``FLAG_WORDS`` of them; a part of
    a question of several parts, or of a follow-up (``search_query`` holds the question
    after an earlier one), also needs ``FLAG_OWN_COVER`` of its own words
    (:func:`gcite.verify.asks.own_cover`).
    ``search_query``: the retrieval query of a follow-up (the earlier turn's subject:
    its words at half weight, its answer types when the part asks none).
    ``question`` is read in simplified characters (a question typed in traditional ones
    is judged as its simplified form, as it was searched), and so are the answer, the
    titles and the chunks (a document written in traditional characters, quoted as
    written, is compared with the question's words in the same form).
    ``context``: the cited documents' titles (words found there count half). When
    the answer also says something it does not cite (a part it declares unknown:
    "根据现有资料无法确定"), a part it does not answer is ``refused``, not unanswered.
    ``answers_question`` is False when some part is neither answered nor refused, or
    when a knowledge-base chunk of ``chunks`` (the run's, in their order) ranked above
    every cited one answers a part better than the answer and its cited chunks' best
    sentences (``outranked_by``: its id, else None; see
    :func:`gcite.verify.asks.outranked_by`)."""
    claims = answer_claims(answer)
    if not question.strip() or not any(claim.ids for claim in claims):
        return None
    question = simplified(question)  # as the retrieval query holds it
    text = simplified("".join(claim.text for claim in claims))
    context = simplified(context)
    chunks = [_simplified_chunk(chunk) for chunk in chunks]
    carried = ""
    if search_query.strip() and search_query.strip() != question.strip():
        carried = search_query.replace(question.strip(), " ").strip()
    declares = any(not claim.ids for claim in claims)
    parts: list[dict[str, Any]] = []
    checks = answer_check(question, text, carried=carried, context=context)
    # an earlier question carried in front of this one (a follow-up), not the question
    # rewritten in the documents' words (a normalised query holds no copy of it)
    follow_up = bool(question_types(carried)) and question.strip() in search_query
    leaning = len(checks) > 1 or follow_up
    for check in checks:
        # two questions typed with a space between them: each gets the type it asks
        typed = check.typed and sides_typed(check.text, text, carried=carried)
        answered = typed and check.every and check.covered(min_cover, FLAG_WORDS)
        if leaning and own_cover(check.text, text, context) < FLAG_OWN_COVER:
            answered = False
        parts.append(
            {
                "text": check.text,
                "types": list(check.types),
                "typed": typed,
                "cover": check.cover,
                "missing": list(check.missing),
                "answered": answered,
                "refused": declares and not answered,
            }
        )
    ok = all(p["answered"] or p["refused"] for p in parts) and any(p["answered"] for p in parts)
    cited = {raw for claim in claims for raw in claim.ids}
    better = outranked_by(question, checks, cited, chunks, carried=carried) if ok else None
    return {
        "answers_question": ok and better is None,
        "parts": parts,
        "min_cover": min_cover,
        "outranked_by": better,
    }


def verify_answer(
    answer: str,
    chunks: Sequence[Mapping[str, Any]],
    model: SupportModel,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    question: str = "",
    search_query: str = "",
) -> dict[str, Any]:
    """The verification report of ``answer`` against ``chunks`` (module docstring shape).

    ``chunks``: the run's UnifiedChunks (``id``, ``content``); ``question``: the user's
    question (and ``search_query`` the run's retrieval query), for the second
    dimension (:func:`answering_report`: ``answers_question`` and ``answering``; both
    None without a question or for a refusal). Never raises on odd input: an empty
    answer gives ``sentences: []``.
    """
    report = _support_report(answer, chunks, model, threshold=threshold)
    answering = answering_report(
        question,
        answer,
        search_query=search_query,
        context=_cited_titles(answer, chunks),
        chunks=chunks,
    )
    report["answers_question"] = None if answering is None else answering.pop("answers_question")
    report["answering"] = answering
    return report


def _support_report(
    answer: str,
    chunks: Sequence[Mapping[str, Any]],
    model: SupportModel,
    *,
    threshold: float,
) -> dict[str, Any]:
    """The first dimension: every (sentence, cited chunk) pair's support."""
    claims = answer_claims(answer)
    contents = _content_of(chunks)
    pairs: list[tuple[str, str]] = []
    for claim in claims:
        for raw in claim.ids:
            if raw in contents:
                pairs.append((claim.text, contents[raw]))
    supports = iter(model.support_many(pairs))
    sentences: list[dict[str, Any]] = []
    weak: list[dict[str, Any]] = []
    checked = supported = 0
    for index, claim in enumerate(claims):
        citations: list[dict[str, Any]] = []
        for raw in claim.ids:
            checked += 1
            if raw not in contents:
                citations.append(
                    {
                        "id": raw,
                        "score": 0.0,
                        "supported": False,
                        "support": None,
                        "missing_numbers": [],
                    }
                )
                weak.append({"sentence": index, "id": raw})
                continue
            found = next(supports)
            ok = found.score >= threshold
            supported += ok
            citations.append(
                {
                    "id": raw,
                    "score": round(found.score, 3),
                    "supported": ok,
                    "support": {"text": found.sentence, "start": found.start, "end": found.end}
                    if found.sentence
                    else None,
                    "missing_numbers": list(found.missing_numbers),
                }
            )
            if not ok:
                weak.append({"sentence": index, "id": raw})
        sentences.append(
            {
                "index": index,
                "text": claim.text,
                "start": claim.start,
                "end": claim.end,
                "citations": citations,
            }
        )
    return {
        "version": 1,
        "model": model.name,
        "threshold": threshold,
        "judge": None,
        "sentences": sentences,
        "weak": weak,
        "checked": checked,
        "supported": supported,
    }


def _cite_id(value: Any) -> str | None:
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _score(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
        if number == number and abs(number) != float("inf"):
            return number
    return 0.0


def best_support_by_chunk(report: Any) -> dict[str, dict[str, Any]]:
    """Per cited raw id: its best-scoring citation of the report (for a source list).

    ``{"2": {"score": 0.83, "supported": True, "support": {...}, "sentence": 0}}``.
    The display rule of ``bestSupport`` in ``clients/js/src/verification.js`` (shared
    through ``tests/vectors/verification-display.v1.json``): anything that is not a
    mapping with a ``sentences`` list gives ``{}``; sentences and citations that are not
    mappings, and citations without an id (a non-empty string or an integer), are
    skipped; a score that is not a finite number counts 0; a later citation of the same
    id wins only with a higher score; ``supported`` is ``True``, ``False`` or ``None``
    (anything else: not judged); ``support`` a mapping or ``None``.
    """
    best: dict[str, dict[str, Any]] = {}
    sentences = report.get("sentences") if isinstance(report, Mapping) else None
    if not isinstance(sentences, list):
        return best
    for sentence in sentences:
        cites = sentence.get("citations") if isinstance(sentence, Mapping) else None
        if not isinstance(cites, list):
            continue
        for cite in cites:
            if not isinstance(cite, Mapping):
                continue
            raw = _cite_id(cite.get("id"))
            if raw is None:
                continue
            score = _score(cite.get("score"))
            if raw in best and not score > best[raw]["score"]:
                continue
            supported = cite.get("supported")
            support = cite.get("support")
            best[raw] = {
                "id": raw,
                "score": score,
                "supported": supported if isinstance(supported, bool) else None,
                "support": support if isinstance(support, Mapping) else None,
                "sentence": sentence.get("index"),
            }
    return best


#: Seconds the judge may take for one answer; citations it has not reached by then keep
#: the offline verdict (counted in ``judge_errors``).
JUDGE_BUDGET_S = 20.0


def make_verifier(
    settings: Settings,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    embedders: Embedders | None = None,
) -> Callable[[str, list[dict[str, Any]], str, str], dict[str, Any]]:
    """The run-end verifier for ``settings``: ``(answer, chunk_metadata, question="",
    search_query="") -> report`` (:func:`verify_answer`), on
    :func:`gcite.verify.support.support_model` (the bundled embedder when configured),
    with the model judge of :mod:`gcite.verify.judge` when ``settings.verify`` has a
    ``judge_base_url`` and a ``judge_model``. Its ``warm_up()`` attribute runs the offline part
    once on a sample (no judge call), so the first answer does not pay the loading.
    ``embedders``: the owner's (:class:`gcite.knowledge.embed.Embedders`), so the bundled
    model is the one its knowledge store loaded.

    The offline part (sentence embeddings, CPU) runs one answer at a time per verifier
    (the service has one): concurrent ones only take the GIL from the event loop and the
    searches that bring other streams their first text (benchmarks/bench_scale.py)."""
    model = support_model(settings, embedders)
    offline = threading.Lock()
    judge = None
    checks = settings.verify
    if checks.judge_base_url and checks.judge_model:
        from gcite.verify.judge import Judge

        judge = Judge(checks.judge_base_url, checks.judge_model, checks.judge_api_key)

    def verify(
        answer: str, chunks: list[dict[str, Any]], question: str = "", search_query: str = ""
    ) -> dict[str, Any]:
        with offline:  # CPU work: one at a time
            report = verify_answer(
                answer,
                chunks,
                model,
                threshold=threshold,
                question=question,
                search_query=search_query,
            )
        if judge is not None and report["checked"]:  # network calls: concurrently
            from gcite.verify.judge import apply_judge

            deadline = time.monotonic() + JUDGE_BUDGET_S
            report = apply_judge(report, _content_of(chunks), judge, deadline=deadline)
        return report

    def warm_up() -> None:
        # the first verification builds the IDF table, the term cache and the support
        # model (seconds of CPU); a server does it at start-up, not under load
        with offline:
            verify_answer(_WARM_UP[0], list(_WARM_UP[1]), model, threshold=threshold)

    verify.warm_up = warm_up  # type: ignore[attr-defined]
    return verify


_WARM_UP: tuple[str, tuple[dict[str, Any], ...]] = (
    "消防设施的维修费用由业主共同承担[C:1]。",
    ({"id": "1", "source_type": "rag", "content": "公用消防设施的维修费用由业主共同承担。"},),
)


__all__ = [
    "DEFAULT_THRESHOLD",
    "Claim",
    "answer_claims",
    "best_support_by_chunk",
    "make_verifier",
    "verify_answer",
]
