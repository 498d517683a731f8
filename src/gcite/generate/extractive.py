"""The offline extractive backend: answers with the chunk sentences that answer the question.

It follows the seed §5.2 answering rules without a language model: every sentence it
writes is copied verbatim from one merged chunk and ends with that chunk's ``[C:N]``
marker (rule 2); chunks that do not match are not used (rule 3); when nothing relevant
was retrieved it answers exactly "根据现有资料无法确定" with no marker (rule 6).

It runs on the verifier's support model (:mod:`gcite.verify`): the question's content
words weighted by IDF, the CJK bigrams of words it misspells, the bundled embedding
model's similarity (when the backend has a :class:`~gcite.verify.SupportModel` with an
embedder), and answer-type cues (a number for "多少", a hotline for "电话", steps for
"怎么用"). A sentence is kept with the context it needs to stay true: a sentence inside
a labelled line ("一级（紧急）：……。物业须在 5 分钟内到场。") is quoted from the label on,
so a fault level, a condition or a list heading is never stripped. A follow-up question
("那灯坏了呢？") borrows the words of the previous question. Deterministic: same chunks,
question and history, same answer, same deltas.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gcite.generate.backends import WEAK_KEY, BackendLifecycle, Usage, estimate_tokens
from gcite.generate.prompt import NO_ANSWER
from gcite.knowledge.jurisdiction import document_place, places_named
from gcite.knowledge.sparse import simplified, terms
from gcite.verify.asks import (
    SYNONYMS,
    better_answer,
    check_part,
    gives,
    gives_any,
    question_parts,
    question_types,
    strict_types,
    units_agree,
)
from gcite.verify.sanctions import asks_sanction, in_sanctions, law_articles
from gcite.verify.support import SupportModel
from gcite.verify.text import Sentence, bigram_coverage, sentences

_END_PUNCT = "。！？!?；;"

#: Answer cues: what kind of answer a question asks for, and text that looks like one.
_CUES: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = (
    (
        re.compile(r"电话|号码|热线|联系方式|怎么联系|打给|打哪|拨打"),
        re.compile(r"热线|电话|拨打|号码|\d{3,4}[-\s]?\d{3,4}|\b\d{3,4}\b"),
    ),
    (
        re.compile(
            r"怎么用|如何用|怎样用|咋用|怎么使用|如何使用|用法|使用方法|怎么操作|如何操作|步骤"
        ),
        re.compile(r"步骤|第[一二三四五1-5]步|首先|然后|其次|最后|按下|压下|拨打|立即|先.{1,12}再"),
    ),
    (
        re.compile(r"哪里|在哪|哪儿|哪边|什么地方|位置|地点|放在|停哪|放哪|站哪|去哪"),
        re.compile(
            r"位于|存放|放在|设在|停放|[0-9０-９BbＢ]+\s*层|[Bb]\d|东侧|西侧|南侧|北侧|东门|上风|柜"
        ),
    ),
    (
        re.compile(
            r"多久|多长时间|几天|几小时|几个钟|几分钟|什么时候|啥时候|何时|几点|时限|期限|多频繁"
            r"|多少(?:天|日|小时|分钟|个工作日|个月|年)"
        ),
        re.compile(
            r"\d+\s*(?:分钟|小时|天|日|个工作日|周|月|年)|\d{1,2}[:：]\d{2}"
            r"|[一二两三四五六七八九十百半]+\s*(?:个月|年|天|日|小时|分钟|个工作日|周)"
            r"|每(?:年|月|周|季度|半年|天|日)"
        ),
    ),
    (
        re.compile(r"多少|几个|几次|几名|几人|几间|几部|几台|多大"),
        re.compile(r"\d|[一二两三四五六七八九十百千]+\s*(?:个|次|名|人|具|处|条|间|部|台)"),
    ),
)
#: Questions that ask for a value only a number can give (a phone number, a price, a
#: clock time, a count) and what such a value looks like: without one in the chunk, the
#: chunk does not answer the question, however related it is.
_STRICT: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = (
    (
        re.compile(r"(?:电话|号码|热线).{0,4}(?:多少|是啥|是什么)|打哪个电话|打什么电话"),
        re.compile(r"\d{3,}"),
    ),
    (re.compile(r"多少钱|什么价|价格|收费多少|费用多少"), re.compile(r"\d\s*元|元|免费")),
    (re.compile(r"几点|什么时间开|开到几"), re.compile(r"\d{1,2}\s*[:：点]\s*\d{0,2}")),
    (
        re.compile(r"(?:密码|验证码|取件码|口令)\s*(?:是|为)?\s*(?:多少|啥|什么|几)"),
        re.compile(r"(?:密码|验证码|取件码|口令)\s*[是为：:]\s*\S"),
    ),
)
#: Score added to a sentence that looks like the kind of answer the question asks for.
CUE_BONUS = 0.15
#: A question is answered only when the best sentence's relevance reaches this ...
MIN_RELEVANCE = 0.2
#: ... its chunk covers this share of the question's weight (plus SHORT_EXTRA_COVER for a
#: question of at most 4 content words) ...
MIN_CHUNK_COVER = 0.1
SHORT_EXTRA_COVER = 0.2
#: ... and (with an embedder) some sentence of the chunk is at least this similar, unless
#: the best sentence's lexical evidence alone reaches ``LEXICAL_ALONE``.
MIN_SEMANTIC = 0.1
LEXICAL_ALONE = 0.5
#: Provinces and large cities: a question naming one is about that place even when no
#: retrieved chunk is of its regulation (another place's regulation then does not answer).
#: Every other place a question names is read from the retrieved documents' titles
#: (:func:`gcite.knowledge.jurisdiction.document_place`, see :func:`_named_places`).
_PLACE_RE = re.compile(
    r"北京|上海|天津|重庆|河北|山西|辽宁|吉林|黑龙江|江苏|浙江|安徽|福建|江西|山东|河南|湖北|湖南"
    r"|广东|海南|四川|贵州|云南|陕西|甘肃|青海|内蒙古|广西|西藏|宁夏|新疆|深圳|广州|杭州|南京|武汉|成都"
)
#: A document the question names ("国务院《物业管理条例》"): when a retrieved chunk comes
#: from it, chunks of other documents do not answer.
_NAMED_RE = re.compile(r"《([^》]{2,40})》")
_TITLE_NOISE_RE = re.compile(r"^中华人民共和国|[（(][^）)]*[）)]\s*$")


def _core_title(title: str) -> str:
    """A title without "中华人民共和国" and a trailing "（2024年修正）" / "(2021-04-29)"."""
    return _TITLE_NOISE_RE.sub("", title.strip()).strip()


def names_document(asked: str, title: str) -> bool:
    """Whether ``title`` is a document that ``asked`` names in 《》."""
    core = _core_title(title)
    return bool(core) and any(_core_title(n) == core for n in _NAMED_RE.findall(asked))


#: A sentence giving the strict type of value asked (a place for "在哪", a duration for
#: "多久") may lead with this share of ``min_relevance``.
TYPED_RELEVANCE_SHARE = 0.75
#: A chunk the retrieval ranked first gets this much (a tie-break more than a vote: the
#: retrieval's order is already in the chunk set, and a near-tie is often the wrong one).
FIRST_RANK_BONUS = 0.02
#: Seed §5.2 rule 4: building procedures, rules and equipment are answered from the
#: knowledge base first - its chunks get this much over a web chunk.
KB_PREFERENCE = 0.05
#: How far below the retrieval's relevance threshold the answerer sees knowledge-base
#: chunks ("weak" chunks: answered from only on strong evidence, see ``pick_sentences``).
WEAK_MARGIN = 0.2
#: A weak chunk's sentence needs this embedding evidence (rescaled cosine to the
#: question) and this many of the question's words (see :func:`strong_evidence`).
WEAK_SEMANTIC = 0.35
WEAK_MIN_WORDS = 2
#: ... or, with one of the question's words, this much embedding evidence (the same
#: meaning said in other words: "失主来领东西要给保管费吗" / "权利人领取遗失物时，应当
#: 支付保管遗失物等支出的必要费用").
WEAK_SEMANTIC_ALONE = 0.5
#: ... or, giving the strict type of value asked (a duration for "多久", a place for
#: "在哪"), this much embedding evidence without any of the question's words (the
#: question said in other words than the document's).
WEAK_TYPED_SEMANTIC = 0.35
#: The retrieval's first chunk is trusted a little more than the rest: below the
#: threshold, its sentence giving the strict type of value asked may lead with lexical
#: evidence ``FIRST_TYPED_LEXICAL`` (a colloquial question the small embedder does not
#: place) - under ``FIRST_TYPED_LEXICAL_ALONE`` only when not unrelated in meaning
#: (``MIN_SEMANTIC``); a knowledge-base chunk's cover need only reach
#: ``FIRST_TYPED_COVER`` when such a sentence leads (a saved web page ranked first,
#: ``FIRST_WEB_TYPED_COVER``: the knowledge base's ranking does not vouch for it);
#: above the threshold, a knowledge-base chunk is not dropped as "unrelated in meaning"
#: for its words alone (a web page is: :func:`_retrieval_first`).
FIRST_TYPED_LEXICAL = 0.2
FIRST_TYPED_LEXICAL_ALONE = 0.25
FIRST_TYPED_COVER = 0.2
FIRST_WEB_TYPED_COVER = 0.25
#: A follow-up's sentence gets this share of how much of the new question's own words it
#: holds ("那灯坏了呢？" is about the lamp, not the previous question's air conditioner).
FOLLOW_UP_BONUS = 0.2
#: A question naming a place prefers that place's regulation to a national one.
LOCAL_PREFERENCE = 0.05
#: For a question naming no place, a place's regulation leads the national chunks only
#: when its chunk scores this much more than the best of them.
NATIONAL_MARGIN = 0.2
#: The chunks are ordered by their score plus this share of their best sentence's
#: embedding evidence: where the sentences hold the question's words alike (the articles
#: of a law share their vocabulary), the one closer in meaning comes first.
SEMANTIC_PREFERENCE = 0.1
#: A sentence's embedding evidence for the question is read on the support model's scale
#: (:class:`~gcite.verify.support.SemanticScale`) raised by this share of its range: a
#: question is shorter than the claims the verifier compares, its cosines lower.
QUESTION_SEMANTIC_SHIFT = 1 / 12
#: Sentences embedded per question (the best lexical candidates).
MAX_EMBEDDED = 60
#: Other sentences are added when their score is at least this share of the best one's
#: (same chunk), or ``OTHER_CHUNK_SHARE`` (another chunk).
SAME_CHUNK_SHARE = 0.8
#: ... or this share for a "how do I" question (a procedure has several sentences).
HOW_TO_SHARE = 0.6
OTHER_CHUNK_SHARE = 0.98
#: A "how do I" question gets the steps after its best sentence in the same paragraph or
#: list, up to this many sentences in all, while each keeps this share of its relevance.
STEP_SENTENCES = 4
STEP_FLOOR = 0.6
#: A sentence that says what to do next (a step of a procedure or an emergency plan).
_STEP_RE = re.compile(
    r"第[一二三四五六七八九十\d]+步|立即|立刻|马上|然后|随后|接着|再|按下|拨打|撤离|疏散|扑救|关闭"
    r"|切断|报告|通知|联系|不要|严禁|保持|使用|用湿|捂住"
)
#: ... or this share when the second chunk is of the other source type (web vs knowledge
#: base): an answer may show both kinds of source.
OTHER_SOURCE_SHARE = 0.9
_LIST_MARK_RE = re.compile(r"^\s*(?:[-*•·]|\d{1,3}[.、)）])\s*")
_HOW_TO_RE = re.compile(
    r"怎么用|如何用|怎样用|咋用|怎么使用|如何使用|怎么办|咋办|怎么做|如何处理|怎么处理|步骤"
)
_FOLLOW_UP_RE = re.compile(r"^(?:那|那么|那要是|那如果|还有|另外|再问)|呢[？?。\s]*$")


def answer_cues(query: str) -> list[re.Pattern[str]]:
    """The answer-cue patterns (see ``_CUES``) that apply to ``query``."""
    return [answer for question, answer in _CUES if question.search(query)]


#: "多久之内" / "几天内": a question asking for a deadline, and a deadline ("五个工作日内",
#: "24 小时内"). When some sentence states a deadline, only such a sentence can lead.
_DEADLINE_Q_RE = re.compile(
    r"(?:多久|多长时间|几天|几个小时|几小时|几分钟|多少(?:天|日|小时|分钟|个工作日|个月|年))"
    r"\s*(?:之内|以内|内)"
)
_DEADLINE_RE = re.compile(
    r"(?:\d+|[一二两三四五六七八九十百]+)\s*(?:个)?(?:分钟|小时|天|日|工作日|周|月|年)\s*(?:之内|以内|内)"
)
#: "几个点": the measure word and the character after it, the thing counted (not across
#: a space: on a phone a space ends the clause, "几次 一般啥时候").
_COUNT_RE = re.compile(r"(?:几|多少)\s*([个名间部台具次条处层])([\u4e00-\u9fff])?")


def _counted(query: str) -> re.Pattern[str] | None:
    """For "几个点" / "多少个人": a pattern for a count of that thing ("24 个巡更点位")."""
    match = _COUNT_RE.search(query)
    if match is None:
        return None
    measure, noun = match.group(1), match.group(2) or ""
    tail = rf"[^，。；]{{0,4}}{re.escape(noun)}" if noun else ""
    return re.compile(rf"(?:\d+|[一二两三四五六七八九十百]+)\s*{measure}{tail}")


def strict_cues(query: str) -> list[re.Pattern[str]]:
    """The value patterns (see ``_STRICT``) an answer to ``query`` must contain."""
    return [answer for question, answer in _STRICT if question.search(query)]


def query_terms(query: str, previous: str = "") -> dict[str, float]:
    """The question's content words -> weight (IDF, :func:`gcite.verify.text.terms`).

    ``previous``: the previous question of a follow-up; its words join at half weight.
    """
    weights = dict(terms(_new_part(query, previous) if previous else query))
    if previous:
        for word, weight in terms(previous).items():
            weights.setdefault(word, 0.5 * weight)
    return weights


def is_follow_up(query: str) -> bool:
    """A question that leans on the previous one ("那灯坏了呢？", "晚上呢")."""
    return bool(_FOLLOW_UP_RE.search(query.strip())) or len(terms(query)) <= 1


def _found(word: str, low: str) -> float:
    """1 when ``word`` (or a synonym) is in ``low``; 0.5 for a two-character word whose
    characters occur in order, close together ("灯坏" in "灯具损坏"); else 0."""
    if word in low or any(alt in low for alt in SYNONYMS.get(word, ())):
        return 1.0
    if len(word) == 2:
        first = low.find(word[0])
        while first >= 0:
            if word[1] in low[first + 1 : first + 4]:
                return 0.5
            first = low.find(word[0], first + 1)
    return 0.0


def _weighted_cover(weights: dict[str, float], text: str, context: str = "") -> float:
    """Share of weight found: in ``text`` fully (the word or one of its :data:`SYNONYMS`;
    half for a two-character word's characters close together), in ``context`` half,
    misspelt (>= 3 characters, half its bigrams found) at a quarter."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    low, ctx = text.lower(), context.lower()
    found = 0.0
    for word, weight in weights.items():
        here = _found(word, low)
        if here < 1.0:
            here = max(here, 0.5 * _found(word, ctx))
        if not here and len(word) >= 3 and bigram_coverage(word, text) >= 0.5:
            here = 0.25
        if here < 0.5 and len(word) >= 3:
            here = max(here, _parts_found(word, weights, low))
        found += here * weight
    return found / total


def _parts_found(word: str, weights: dict[str, float], low: str) -> float:
    """For a compound the question also holds in parts ("消防演习": "消防", "演习"), the
    share of its parts' weight found in ``low``, at most a half (0 without parts)."""
    parts = {w: v for w, v in weights.items() if w != word and len(w) >= 2 and w in word}
    total = sum(parts.values())
    if total <= 0:
        return 0.0
    return 0.5 * sum(v for w, v in parts.items() if _found(w, low) >= 1.0) / total


@dataclass(frozen=True)
class Pick:
    """One chosen sentence: chunk id and rank, position, score, relevance, quoted text."""

    chunk_id: str
    rank: int
    position: int
    score: float
    sentence: str
    relevance: float = 0.0


@dataclass
class _Unit:
    chunk_id: str
    rank: int
    position: int
    sentence: Sentence
    quote: str
    own: float
    lexical: float
    chunk_cover: float
    cued: bool
    title_cover: float = 0.0
    title: str = ""
    source: str = ""
    semantic: float = 0.0
    score: float = 0.0
    relevance: float = 0.0
    weak: bool = False
    fresh: float = 0.0
    joined: bool = False  # same paragraph or list as the chunk's sentence before it
    lead_in: int = -1  # an enumerated item's: the position of its list heading
    lead_text: str = ""  # ... and that heading ("有下列行为之一的，处…罚款：")
    provision: bool = False  # of a chunk of a law's articles ("第十八条 …")
    penalty: bool = False  # a law's penalty provision (gcite.verify.sanctions)


def _quote(content: str, units: list[Sentence], index: int) -> str:
    """The sentence as quoted: from its line's label on when the label is a colon label
    (a fault level, a condition) the sentence does not start with; a sentence that ends
    with a colon (a list heading) with the list items that follow it (up to 6)."""
    unit = units[index]
    if unit.text.rstrip().endswith(("：", ":")):
        end = unit.end
        for item in units[index + 1 : index + 7]:
            line_start = content.rfind("\n", 0, item.start) + 1
            if not _LIST_MARK_RE.match(content[line_start:]):
                break
            if content[end : item.start].count("\n") > 1:
                break
            end = item.end
        if end > unit.end:
            return content[unit.start : end].strip()
    if not unit.label or unit.label.startswith("第") or unit.text.startswith(unit.label):
        return unit.text
    start = unit.start
    j = index - 1
    while j >= 0 and units[j].label == unit.label and unit.start - units[j].end <= 2:
        start = units[j].start
        if units[j].text.startswith(unit.label):
            break
        j -= 1
    quoted = content[start : unit.end].strip()
    return quoted if len(quoted) <= 240 else unit.text


def _answers_nothing(sentence: Sentence) -> bool:
    """Too short, or a question (a page echoing the user's question answers nothing)."""
    return len(sentence.text) < 4 or sentence.text.rstrip("”’」』）)\"'").endswith(("？", "?"))


def _chunk_units(
    query_weights: dict[str, float], rank: int, chunk: dict[str, Any], cues: list[Any]
) -> list[_Unit]:
    """The candidate sentences of one chunk (none for a chunk without id or content)."""
    chunk_id = str(chunk.get("id") or "").strip()
    content = chunk.get("content")
    if not chunk_id or not isinstance(content, str):
        return []
    title = str(chunk.get("document_title") or "")
    chunk_cover = _weighted_cover(query_weights, title + " " + content)
    title_cover = _weighted_cover(query_weights, title)
    body = [s for s in sentences(content, semicolons=False) if not s.heading]
    heads = _list_heads(body)
    provision = law_articles(content)
    out: list[_Unit] = []
    for position, sentence in enumerate(body):
        if _answers_nothing(sentence):
            continue
        quote = _quote(content, body, position)
        head = heads.get(position, -1)
        joined = position > 0 and content[body[position - 1].end : sentence.start].count("\n") <= 1
        out.append(
            _Unit(
                chunk_id,
                rank,
                position,
                sentence,
                quote,
                _weighted_cover(query_weights, quote),
                _weighted_cover(query_weights, quote, sentence.context + " " + title),
                chunk_cover,
                any(cue.search(quote) for cue in cues),
                title_cover,
                title,
                str(chunk.get("source_type") or ""),
                weak=bool(chunk.get(WEAK_KEY)),
                joined=joined,
                lead_in=head,
                lead_text=body[head].text if head >= 0 else "",
                provision=provision,
                penalty=provision and in_sanctions(sentence.context),
            )
        )
    return out


_ITEM_RE = re.compile(r"^[（(][一二三四五六七八九十]+[）)]")


def _list_heads(body: Sequence[Sentence]) -> dict[int, int]:
    """An enumerated item's position ("（三）占用、堵塞……的；") -> its list heading's, the
    sentence ending in a colon the items follow ("……有下列行为之一的，处……罚款：")."""
    heads: dict[int, int] = {}
    head = -1
    for position, sentence in enumerate(body):
        if _ITEM_RE.match(sentence.text):
            if head >= 0:
                heads[position] = head
        else:
            head = position if sentence.text.rstrip().endswith(("：", ":")) else -1
    return heads


def _units(
    query_weights: dict[str, float], chunks: Sequence[dict[str, Any]], cues: list[Any]
) -> list[_Unit]:
    out: list[_Unit] = []
    for rank, chunk in enumerate(chunks):
        out.extend(_chunk_units(query_weights, rank, chunk, cues))
    return out


def _add_semantic(units: list[_Unit], probe: str, support: SupportModel) -> list[_Unit]:
    """The best lexical candidates (``MAX_EMBEDDED``) with their embedding evidence."""
    units = sorted(units, key=lambda u: (-(u.lexical + 0.2 * u.chunk_cover), u.rank, u.position))
    units = units[:MAX_EMBEDDED]
    question = support.embed_query(probe)
    vectors = support.embed([u.quote for u in units])
    for unit, vector in zip(units, vectors, strict=True):
        cosine = float(question @ vector)
        unit.semantic = support.rescale(cosine, QUESTION_SEMANTIC_SHIFT, query=True)
        unit.relevance = max(unit.lexical, 0.5 * unit.lexical + 0.5 * unit.semantic)
    return units


def scored_units(
    query: str,
    chunks: Sequence[dict[str, Any]],
    *,
    previous: str = "",
    support: SupportModel | None = None,
    carried: str = "",
) -> tuple[dict[str, float], str, str, list[_Unit]]:
    """The question's weights, the follow-up's previous question ("" when none), the
    question as asked (with that previous question) and every candidate sentence with its
    lexical, semantic and relevance evidence (see :func:`pick_sentences`). ``carried``:
    the other parts of a multi-part question; their words join at half weight."""
    follow = previous if previous and is_follow_up(query) else ""
    weights = query_terms(query, follow)
    for word, weight in terms(carried).items() if carried else ():
        weights.setdefault(word, 0.5 * weight)
    if not weights:
        return weights, follow, query, []
    asked = query + " " + follow if follow else query
    units = _units(weights, chunks, answer_cues(asked))
    if not units:
        return weights, follow, query, []
    if support is not None and support.embedder is not None:
        units = _add_semantic(units, (follow + " " + query + " " + carried).strip(), support)
    else:
        for unit in units:
            unit.relevance = unit.lexical
    if follow:  # a follow-up: how much of what the new question itself asks
        own = dict(terms(_new_part(query, follow)))
        for unit in units:
            unit.fresh = _weighted_cover(own, unit.quote, unit.sentence.context)
    return weights, follow, asked, units


_FOLLOW_UP_LEAD_RE = re.compile(r"^(?:那么|那要是|那如果|那|还有|另外|再问)")


def _new_part(query: str, previous: str) -> str:
    """What a follow-up asks itself: ``query`` without the previous question the
    retrieval query carries in front, and without its leading "那" / "还有"."""
    text = query.strip()
    if previous and previous.strip() in text:
        text = text.replace(previous.strip(), " ", 1).strip()
    return _FOLLOW_UP_LEAD_RE.sub("", text)


def _words_found(weights: dict[str, float], text: str) -> int:
    """How many of the question's words (or their :data:`SYNONYMS`) ``text`` holds."""
    low = text.lower()
    return sum(1 for word in weights if _found(word, low) >= 1.0)


def strong_evidence(unit: _Unit, weights: dict[str, float], semantic: bool) -> bool:
    """Whether a sentence of a chunk scored below the retrieval's threshold may answer:
    at least ``WEAK_MIN_WORDS`` of the question's words in the sentence itself, and its
    meaning close to the question's (embedding evidence ``WEAK_SEMANTIC``) or lexical
    evidence ``LEXICAL_ALONE`` (half the question's weight: the small embedder may not
    place a colloquial question at all); or one of the question's words and embedding
    evidence ``WEAK_SEMANTIC_ALONE``."""
    found = _words_found(weights, unit.quote)
    if semantic and found >= 1 and unit.semantic >= WEAK_SEMANTIC_ALONE:
        return True
    if found < WEAK_MIN_WORDS:
        return False
    if semantic and unit.semantic >= WEAK_SEMANTIC:
        return True
    return unit.lexical >= LEXICAL_ALONE


@dataclass(frozen=True)
class Asked:
    """What one question (or one part of a multi-part question) asks, for the picking
    rules of :func:`pick_sentences`.

    ``weights``: content words -> weight; ``text``: the question as asked (a follow-up
    with its previous question); ``types``: the answer types it asks for
    (:func:`gcite.verify.asks.question_types`; a part asking none takes those of the
    other parts); ``strict``: value patterns an answer must hold (phone numbers,
    prices, clock times, passwords); ``how_to``: a "how do I" question (answered by
    steps); ``counted``: a count of a named thing ("几个点"); ``deadline``: asks for a
    deadline ("多久之内"); ``places``: place names it names; ``min_cover``: how much of it
    a chunk must cover; ``semantic``: embedding evidence is there; ``min_relevance``;
    ``steps_cue``: a "what to do" question no answer cue covers ("咋整"): a sentence saying
    to do something counts as the kind of answer asked.
    """

    weights: dict[str, float]
    text: str
    types: tuple[str, ...]
    strict: tuple[re.Pattern[str], ...]
    how_to: bool
    counted: re.Pattern[str] | None
    deadline: bool
    places: frozenset[str]
    min_cover: float
    semantic: bool
    min_relevance: float
    steps_cue: bool = False
    sanction: bool = True


def asked_of(
    text: str,
    weights: dict[str, float],
    *,
    semantic: bool,
    min_relevance: float = MIN_RELEVANCE,
    carried: str = "",
) -> Asked:
    """The :class:`Asked` of a question ``text`` with content ``weights``."""
    types = question_types(text) or (question_types(carried) if carried else ())
    # a short question must be covered more: its few words are all it says
    extra = SHORT_EXTRA_COVER if len(weights) <= 5 else 0.0
    return Asked(
        weights=weights,
        text=text,
        types=types,
        strict=tuple(strict_cues(text)),
        how_to=bool(_HOW_TO_RE.search(text)),
        counted=_counted(text),
        deadline=bool(_DEADLINE_Q_RE.search(text)),
        places=frozenset(_PLACE_RE.findall(text)),
        min_cover=MIN_CHUNK_COVER + extra,
        semantic=semantic,
        min_relevance=min_relevance,
        steps_cue="procedure" in types and not answer_cues(text),
        sanction=asks_sanction(text),
    )


def _unit_score(unit: _Unit, asked: Asked) -> float:
    """A sentence's score: relevance plus the answer-cue, count and follow-up bonuses
    (a "how do I" question: half relevance, half steps)."""
    # a "what to do" question ("咋整", "怎么办"): a sentence saying to do something
    # is the kind of answer asked, as a cue is
    cued = unit.cued or (asked.steps_cue and gives("procedure", unit.quote))
    # an enumerated item whose list heading states the value asked looks like an answer
    cued = cued or _by_heading(unit, asked)
    if asked.how_to:
        score = 0.5 * unit.relevance + (0.5 if cued else 0.0)
    else:
        score = unit.relevance + (CUE_BONUS if cued else 0.0)
    if asked.counted is not None and asked.counted.search(unit.quote):
        score += CUE_BONUS
    return score + FOLLOW_UP_BONUS * unit.fresh


@dataclass(frozen=True)
class _Narrowing:
    """Filters that apply when some candidate passes them: only a sentence counting the
    thing asked ("几个点"), stating a deadline ("多久之内"), of the document named in 《》."""

    counts: bool
    deadlines: bool
    named: bool


def _narrowing(units: Sequence[_Unit], asked: Asked) -> _Narrowing:
    counted = asked.counted
    return _Narrowing(
        counts=counted is not None and any(counted.search(u.quote) for u in units),
        deadlines=asked.deadline
        and any(_DEADLINE_RE.search(u.quote) for u in units if u.relevance >= asked.min_relevance),
        named=any(names_document(asked.text, u.title) for u in units),
    )


def gives_answer(unit: _Unit, asked: Asked) -> bool:
    """Whether a sentence holds the kind of value the question asks for: a value of
    each strict pattern, and of one strict answer type (:mod:`gcite.verify.asks`) - a
    sum of money for "多少钱", a duration for "多久", a phone number for "打哪个电话"."""
    if _gives_in(unit.quote, asked):
        return True
    # an enumerated item whose list heading states the value ("有下列行为之一的，处……罚款：")
    return _by_heading(unit, asked)


def _by_heading(unit: _Unit, asked: Asked) -> bool:
    """Whether an enumerated item gives the strict type asked only with its list heading."""
    if not unit.lead_text or not set(strict_types(asked.types)) - {"procedure"}:
        return False
    return not _gives_in(unit.quote, asked) and _gives_in(unit.lead_text + unit.quote, asked)


def _gives_in(text: str, asked: Asked) -> bool:
    if asked.strict and not any(p.search(text) for p in asked.strict):
        return False
    if not units_agree(asked.text, text):
        return False  # a duration or count in another unit than the one asked
    # a "what to do" answer may open with the situation; its steps follow (checked on
    # the whole answer by the second dimension)
    return gives_any(tuple(t for t in asked.types if t != "procedure"), text)


def _may_lead(unit: _Unit, asked: Asked, narrow: _Narrowing) -> bool:
    """Whether a sentence may be the answer's first sentence."""
    if not gives_answer(unit, asked):
        return False
    # a sentence holding the strict type of value asked needs less relevance
    strictly_typed = bool(set(strict_types(asked.types)) - {"procedure"})
    typed = strictly_typed and not unit.weak
    floor = TYPED_RELEVANCE_SHARE * asked.min_relevance if typed else asked.min_relevance
    if unit.relevance < floor:
        return False
    if narrow.counts and asked.counted is not None and not asked.counted.search(unit.quote):
        return False
    if narrow.deadlines and not _DEADLINE_RE.search(unit.quote):
        return False
    if not unit.weak:
        return True
    # a weak sentence giving the strict type of value asked, close in meaning or of the
    # retrieval's first chunk and holding a share of the question's words
    typed_evidence = _weak_typed(unit, asked)
    if typed_evidence and asked.semantic and unit.semantic >= WEAK_TYPED_SEMANTIC:
        return True
    if typed_evidence and unit.rank == 0 and _first_typed_evidence(unit, asked.semantic):
        return True
    return strong_evidence(unit, asked.weights, asked.semantic)


def _weak_typed(unit: _Unit, asked: Asked) -> bool:
    """Whether the type of answer a weak sentence gives is evidence for it: the question
    asks a strict type other than a procedure, and other than "who" when the sentence is a
    law's article - a provision names the party it binds ("业主应当……", "生产经营单位
    不得……"), so a party named there says nothing of the question."""
    kinds = set(strict_types(asked.types)) - {"procedure"}
    if unit.provision:
        kinds.discard("who")
    return bool(kinds)


def _first_typed_evidence(unit: _Unit, semantic: bool) -> bool:
    """Whether a weak sentence of the retrieval's first chunk giving the strict type
    asked holds enough of the question: lexical evidence ``FIRST_TYPED_LEXICAL``, and
    (with an embedder) when under ``FIRST_TYPED_LEXICAL_ALONE``, some closeness in
    meaning (``MIN_SEMANTIC``)."""
    if unit.lexical < FIRST_TYPED_LEXICAL:
        return False
    return (
        unit.lexical >= FIRST_TYPED_LEXICAL_ALONE or not semantic or unit.semantic >= MIN_SEMANTIC
    )


def _vouch_for_rules(units: Sequence[_Unit], asked: Asked) -> None:
    """For a question about a rule: a sentence of a law below the retrieval's threshold is
    no longer weak when a penalty provision of the same law scored above it holds the
    question's words only where the sentence holds them too (:func:`_restates`). The
    provision sanctions that rule in the rule's words (the reason it scored high); it does
    not answer (:func:`_by_chunk`), the rule it restates does. The law's other sentences
    stay weak."""
    if asked.sanction:
        return
    penalties = [u for u in units if not u.weak and u.penalty]
    for unit in units:
        if not unit.weak or unit.penalty:
            continue
        if any(p.title == unit.title and _restates(unit, p, asked.weights) for p in penalties):
            unit.weak = False


def _restates(rule: _Unit, penalty: _Unit, weights: dict[str, float]) -> bool:
    """Whether ``rule`` holds every one of the question's words (or their synonyms) that
    ``penalty`` holds, and ``penalty`` holds at least one."""
    held = [word for word in weights if _found(word, penalty.quote.lower()) >= 1.0]
    low = rule.quote.lower()
    return bool(held) and all(_found(word, low) >= 1.0 for word in held)


def _by_chunk(units: Sequence[_Unit], asked: Asked, narrow: _Narrowing) -> dict[str, list[_Unit]]:
    """The candidates per chunk, without another place's regulation and (when the
    question names its document) other documents."""
    out: dict[str, list[_Unit]] = {}
    for unit in units:
        if asked.places and (_title_places(unit.title) - asked.places):
            continue  # another city's or province's regulation does not answer
        if narrow.named and not names_document(asked.text, unit.title):
            continue  # the question names its document
        if not asked.sanction and unit.penalty:
            continue  # a penalty provision answers what happens, not the rule asked
        out.setdefault(unit.chunk_id, []).append(unit)
    return out


def _chunk_score(best: _Unit, asked: Asked) -> float:
    """A chunk's score: its best sentence's, plus its coverage, its title's, first rank,
    knowledge base and local-regulation preferences."""
    return (
        best.score
        + 0.15 * best.chunk_cover
        + 0.1 * best.title_cover
        + (FIRST_RANK_BONUS if best.rank == 0 else 0.0)
        + (KB_PREFERENCE if best.source == "rag" else 0.0)
        + (LOCAL_PREFERENCE if asked.places & _title_places(best.title) else 0.0)
    )


_Ranked = list[tuple[float, str, _Unit]]


def _chunk_order(ranked: tuple[float, str, _Unit]) -> tuple[float, int]:
    """The sort key of a ranked chunk: its score plus ``SEMANTIC_PREFERENCE`` of its lead
    sentence's embedding evidence (an order only: the shares a second chunk is compared
    by stay those of the scores), then the retrieval's rank."""
    score, _, best = ranked
    return -(score + SEMANTIC_PREFERENCE * best.semantic), best.rank


def _min_cover(leads: Sequence[_Unit], asked: Asked) -> float:
    """How much of the question a chunk must cover: ``asked.min_cover``, at most
    ``FIRST_TYPED_COVER`` (a saved web page: ``FIRST_WEB_TYPED_COVER``) for the
    retrieval's first chunk when its lead sentence gives
    the strict type of value asked, or (above the threshold) one of its possible leads
    is close in meaning to the question (embedding evidence ``WEAK_SEMANTIC_ALONE``)."""
    lead = leads[0]
    if lead.rank != 0:
        return asked.min_cover
    strictly_typed = bool(set(strict_types(asked.types)) - {"procedure"})
    close = not lead.weak and max(u.semantic for u in leads) >= WEAK_SEMANTIC_ALONE
    if close or (strictly_typed and gives_answer(lead, asked)):
        first = FIRST_TYPED_COVER if lead.source == "rag" else FIRST_WEB_TYPED_COVER
        return min(asked.min_cover, first)
    return asked.min_cover


def _counts_asked(unit: _Unit, asked: Asked) -> bool:
    """Whether ``unit`` counts the thing a "几个 / 多少个" question counts ("共 6 个点位")."""
    return asked.counted is not None and bool(asked.counted.search(unit.quote))


def _rank_chunks(
    by_chunk: dict[str, list[_Unit]], asked: Asked, narrow: _Narrowing
) -> tuple[_Ranked, _Ranked]:
    """The chunks that may answer, best first: (above the retrieval's threshold, below
    it - "weak", used only when no other can) as ``(score, chunk id, lead sentence)``.
    A chunk whose sentences are all unrelated in meaning to the question (embedding
    evidence under ``MIN_SEMANTIC``) and hold under ``LEXICAL_ALONE`` of its words is
    left out, unless it is the retrieval's first chunk (:func:`_retrieval_first`)."""
    ranked: _Ranked = []
    ranked_weak: _Ranked = []
    for chunk_id, members in by_chunk.items():
        leads = [u for u in members if _may_lead(u, asked, narrow)]
        if not leads or leads[0].chunk_cover < _min_cover(leads, asked):
            continue
        first = _retrieval_first(leads[0], asked)
        unrelated = asked.semantic and max(u.semantic for u in members) < MIN_SEMANTIC
        unrelated = unrelated and not first
        if unrelated and max(u.lexical for u in members) < LEXICAL_ALONE:
            continue  # words in common, meaning unrelated
        best = max(leads, key=lambda u: (u.score, u.relevance, -u.position))
        (ranked_weak if best.weak else ranked).append((_chunk_score(best, asked), chunk_id, best))
    ranked.sort(key=_chunk_order)
    ranked_weak.sort(key=_chunk_order)
    return ranked, ranked_weak


def _retrieval_first(lead: _Unit, asked: Asked) -> bool:
    """Whether ``lead``'s chunk is the knowledge retrieval's first, above the threshold or,
    below it, with a lead that counts the thing a "几个" question counts: its ranking
    vouches for the chunk's meaning. A saved web page first in the list (the relevance
    gate passed no knowledge-base chunk on) is not: no ranking against the knowledge base
    vouches for it, and a page on another subject sharing a few of the question's words
    ("吃" in a page on meeting-room etiquette) would answer an off-topic question."""
    if lead.rank != 0 or lead.source == "web":
        return False
    return not lead.weak or _counts_asked(lead, asked)


def _steps(best: _Unit, members: Sequence[_Unit], limit: int) -> list[_Unit]:
    """The sentences after ``best`` in its paragraph or list (a procedure's next steps),
    up to ``limit``, as long as each stays on the question (``STEP_FLOOR`` of its
    relevance) or says what to do (an action: "立即撤离", "拨打", "不要…")."""
    at = {u.position: u for u in members}
    out: list[_Unit] = []
    position = best.position + 1
    while len(out) < limit and position in at and at[position].joined:
        unit = at[position]
        on_topic = unit.relevance >= STEP_FLOOR * best.relevance
        if not (on_topic or unit.cued or _STEP_RE.search(unit.quote)):
            break
        out.append(unit)
        position += 1
    return out


def _counts(asked: Asked, unit: _Unit) -> set[str]:
    """The counts of the thing a "几个 / 多少个" question asks about in a sentence."""
    if asked.counted is None:
        return set()
    return {"".join(m.split()) for m in asked.counted.findall(unit.quote)}


def _same_chunk(best: _Unit, members: Sequence[_Unit], asked: Asked, room: int) -> list[_Unit]:
    """Other sentences of the lead's chunk that score ``SAME_CHUNK_SHARE`` of it
    (``HOW_TO_SHARE`` for a "how do I" question, which first gets its steps), without
    those stating another count of what a "几个" question counts (a sub-total)."""
    chosen = _steps(best, members, room) if asked.how_to else []
    share = HOW_TO_SHARE if asked.how_to else SAME_CHUNK_SHARE
    counts = _counts(asked, best)
    for unit in sorted(members, key=lambda u: (-u.score, u.position)):
        if len(chosen) >= room:
            break
        if unit is best or unit in chosen:
            continue
        if counts and _counts(asked, unit) - counts:
            continue  # another count of the thing asked: a sub-total, not the answer
        if unit.score >= share * best.score and unit.relevance >= asked.min_relevance:
            chosen.append(unit)
    return chosen


def _place(unit: _Unit) -> str:
    """The place whose regulation a sentence's document is ("" for a national one)."""
    return document_place(unit.title)


def _title_places(title: str) -> frozenset[str]:
    """The places a document's ``title`` is of: the place its regulation is of
    (:func:`document_place`) and the provinces and large cities it names."""
    place = document_place(title)
    return frozenset(_PLACE_RE.findall(title)) | ({place} if place else frozenset())


def _named_places(units: Sequence[_Unit], asked: Asked) -> Asked:
    """``asked`` with its places widened by those of the retrieved documents it names
    (:func:`places_named` over their :func:`document_place`): "苏州" in a question about
    a knowledge base holding 苏州's regulation names 苏州."""
    named = places_named(asked.text, {_place(unit) for unit in units})
    return replace(asked, places=asked.places | named) if named - asked.places else asked


def _retrieval_jurisdiction(ranked: _Ranked) -> _Ranked:
    """``ranked`` with its first two chunks swapped when they are of different
    jurisdictions, near-tied (the second scores ``OTHER_CHUNK_SHARE`` of the first) and
    the retrieval ranked the second higher: the retrieval weighs the places a question
    names (:mod:`gcite.knowledge.jurisdiction`), the sentence scores do not."""
    if len(ranked) < 2:
        return ranked
    (first_score, _, first), (second_score, _, second) = ranked[0], ranked[1]
    if (
        first.source == second.source == "rag"
        and second.rank < first.rank
        and second_score >= OTHER_CHUNK_SHARE * first_score
        and _place(first) != _place(second)
    ):
        return [ranked[1], ranked[0], *ranked[2:]]
    return ranked


def _national_first(ranked: _Ranked, asked: Asked) -> _Ranked:
    """For a question naming no place, ``ranked`` with the national chunks first unless a
    place's regulation leads them by ``NATIONAL_MARGIN`` or more: a question that names no
    place asks for the rule that holds everywhere (:mod:`gcite.knowledge.jurisdiction`),
    and a city's regulation restating it in more of the question's words is not it. A
    question names a place it names by pattern or the place of a ranked regulation.
    National: a knowledge-base chunk (:func:`_national`)."""
    if asked.places or not ranked or not _place(ranked[0][2]):
        return ranked
    if places_named(asked.text, {_place(unit) for _, _, unit in ranked}):
        return ranked
    national = [score for score, _, unit in ranked if _national(unit)]
    if not national or ranked[0][0] >= max(national) + NATIONAL_MARGIN:
        return ranked
    return sorted(ranked, key=lambda r: not _national(r[2]))


def _national(unit: _Unit) -> bool:
    """Whether ``unit`` is of a knowledge-base document naming no place (a web page
    naming none is no rule that holds everywhere)."""
    return unit.source == "rag" and not _place(unit)


def _second_chunk(ranked: _Ranked, best: _Unit, top_score: float, asked: Asked) -> list[_Unit]:
    """The best sentence of a second chunk above the threshold that scores
    ``OTHER_CHUNK_SHARE`` of the first (``OTHER_SOURCE_SHARE`` for the other source type),
    when both are of the same jurisdiction (:mod:`gcite.knowledge.jurisdiction`) and - two
    knowledge-base chunks - it holds some of the question's words the first sentence does
    not, or the sanction a question asks about beside its rule (:func:`_adds_to`): a
    second citation is for what the first leaves out, not
    for the same rule restated (a State Council regulation beside its law, a neighbouring
    article)."""
    if len(ranked) < 2:
        return []
    score, _, second = ranked[1]
    both_kb = second.source == best.source == "rag"
    if both_kb and _place(second) != _place(best):
        return []  # one rule for one question: not a national law and a city's beside it
    if both_kb and not _adds_to(second, best, asked):
        return []  # the same rule again (another law's, a neighbouring article): one answers
    share = OTHER_SOURCE_SHARE if second.source != best.source else OTHER_CHUNK_SHARE
    return [second] if score >= share * top_score else []


def _adds_to(second: _Unit, first: _Unit, asked: Asked) -> bool:
    """Whether ``second`` adds to ``first`` what ``asked`` asks: one of the question's
    words (or their synonyms) ``first`` does not hold, or - a question about a sanction -
    a penalty provision beside the rule it sanctions."""
    if asked.sanction and second.penalty and not first.penalty:
        return True
    low, first_low = second.quote.lower(), first.quote.lower()
    return any(_found(w, low) >= 1.0 and _found(w, first_low) < 1.0 for w in asked.weights)


def _distinct(units: Sequence[_Unit], limit: int) -> list[_Unit]:
    """``units`` without repeats (a quote inside another), at most ``limit``, in chunk
    order then sentence order."""
    picks: list[_Unit] = []
    seen: list[str] = []
    for unit in units[:limit]:
        norm = "".join(unit.quote.split())
        if any(norm in s or s in norm for s in seen):
            continue
        seen.append(norm)
        picks.append(unit)
    return sorted(picks, key=lambda u: (u.rank, u.position))


def choose_units(units: Sequence[_Unit], asked: Asked, max_sentences: int) -> list[_Unit]:
    """The sentences that answer ``asked`` among scored ``units`` (see
    :func:`pick_sentences`), in chunk order then sentence order; [] to refuse."""
    for unit in units:
        unit.score = _unit_score(unit, asked)
    narrow = _narrowing(units, asked)
    _vouch_for_rules(units, asked)
    asked = _named_places(units, asked)
    by_chunk = _by_chunk(units, asked, narrow)
    ranked, ranked_weak = _rank_chunks(by_chunk, asked, narrow)
    if not ranked and not ranked_weak:
        return []
    ranked = _retrieval_jurisdiction(ranked)
    ranked = _national_first(ranked, asked)
    top_score, chunk_id, best = ranked[0] if ranked else ranked_weak[0]
    limit = max(max_sentences, STEP_SENTENCES) if asked.how_to else max_sentences
    chosen = [best, *_same_chunk(best, by_chunk[chunk_id], asked, limit - 2 + asked.how_to)]
    chosen += _second_chunk(ranked, best, top_score, asked)
    return _with_headings(chosen, by_chunk, asked, limit)


def _with_headings(
    chosen: Sequence[_Unit], by_chunk: dict[str, list[_Unit]], asked: Asked, limit: int
) -> list[_Unit]:
    """``chosen`` as :func:`_distinct` gives it, each item that gives the value asked only
    with its list heading preceded by that heading: at most ``limit`` sentences, headings
    counted (the first chosen and its heading always), and a heading never without its
    item - an item whose heading does not fit, or that repeats a quote, is left out."""
    picks: list[_Unit] = []
    for unit in chosen:
        group = [*_headings_of(unit, by_chunk, asked), unit]
        kept = _distinct(picks + group, len(picks) + len(group))
        if not any(u is unit for u in kept) or (picks and len(kept) > limit):
            continue
        picks = kept
    return picks


def _headings_of(unit: _Unit, by_chunk: dict[str, list[_Unit]], asked: Asked) -> list[_Unit]:
    """The list heading of ``unit`` when it gives the value asked only with it ([] else)."""
    if not _by_heading(unit, asked):
        return []
    return [u for u in by_chunk[unit.chunk_id] if u.position == unit.lead_in]


def pick_sentences(
    query: str,
    chunks: Sequence[dict[str, Any]],
    *,
    previous: str = "",
    support: SupportModel | None = None,
    max_sentences: int = 3,
    min_relevance: float = MIN_RELEVANCE,
    carried: str = "",
) -> list[Pick]:
    """The sentences that answer ``query``, in chunk order then sentence order.

    Every body sentence of every chunk (headings are context) gets ``lexical`` - the
    share of the question's IDF weight it holds (context words count half, misspelt
    words a quarter) - and, with an embedder in ``support``, ``semantic`` - the
    rescaled embedding similarity to the question; ``relevance`` is the larger of
    ``lexical`` and their mean (lexical alone without an embedder). A sentence's score
    is its relevance plus ``CUE_BONUS`` when it holds the kind of answer asked for (a
    count, a time, a place, a phone number; steps weigh half for a "how do I"
    question), and for a follow-up ``FOLLOW_UP_BONUS`` of how much of the new
    question's own words it holds. A chunk scores its best sentence's score plus ``0.15`` of
    its own coverage of the question, ``0.1`` of its title's, ``FIRST_RANK_BONUS`` for the
    retrieval's first rank, ``KB_PREFERENCE`` for the knowledge base and
    ``LOCAL_PREFERENCE`` for the regulation of a place the question names; chunks are
    ordered by that score plus ``SEMANTIC_PREFERENCE`` of the sentence's embedding
    evidence. The question is answered from the best chunk only when its
    best sentence reaches ``min_relevance``, the chunk covers at least ``MIN_CHUNK_COVER``
    of the question, the sentence's semantic evidence reaches ``MIN_SEMANTIC`` (with an
    embedder), and the sentence holds the type of answer asked for (:func:`gives_answer`: a
    sum of money for "多少钱", a duration for "多久", a phone number for "电话多少", a place for
    "在哪"...; a count of the thing asked, a deadline when some sentence states one).
    Another place's regulation never answers, nor - when the question names a document
    in 《》 that was retrieved - another document, nor a law's penalty provision (its
    法律责任 chapter) a question that asks about no sanction (:mod:`gcite.verify.sanctions`),
    though such a provision scored above the threshold vouches for the weak sentences of
    its law that hold the question's words it holds;
    for a question naming no place a national chunk leads a place's regulation unless
    that scores ``NATIONAL_MARGIN`` more.
    A chunk the retrieval scored below its threshold (``below_threshold``, see
    ``WEAK_MARGIN``) answers only when no other chunk can and its sentence has
    :func:`strong_evidence`. Picked: the best sentence; for a "how do I" question the
    steps after it in its paragraph or list (up to ``STEP_SENTENCES`` in all); the
    chunk's sentences scoring ``SAME_CHUNK_SHARE`` of it; and the best sentence of a
    second chunk above the threshold scoring ``OTHER_CHUNK_SHARE`` of the first chunk
    (of the knowledge base: holding words of the question the first sentence lacks);
    at most ``max_sentences``, duplicates dropped. ``carried``: the other parts of a
    multi-part question (their words at half weight, their answer types when this part
    asks none). Empty: answer "根据现有资料无法确定".
    """
    weights, _, text, units = scored_units(
        query, chunks, previous=previous, support=support, carried=carried
    )
    if not units:
        return []
    semantic = support is not None and support.embedder is not None
    asked = asked_of(text, weights, semantic=semantic, min_relevance=min_relevance, carried=carried)
    return [
        Pick(u.chunk_id, u.rank, u.position, round(u.score, 4), u.quote, round(u.relevance, 4))
        for u in choose_units(units, asked, max_sentences)
    ]


def _answering(
    part: str, picks: list[Pick], chunks: Sequence[dict[str, Any]], *, carried: str = ""
) -> list[Pick]:
    """``picks`` when they answer ``part`` by the verifier's second dimension
    (:func:`gcite.verify.asks.check_part`: the answer type asked, and
    ``MIN_WORD_COVER`` of the part's content words - a word found by one of its
    :data:`~gcite.verify.asks.SYNONYMS` as the picking rules find it - the cited
    documents' titles counting half), else [] (refuse); the sentence of a
    knowledge-base chunk ranked above the picked ones when it answers ``part`` better
    (:func:`gcite.verify.asks.better_answer`: the type asked, more of its words)."""
    if not picks:
        return picks
    ids = {p.chunk_id for p in picks}
    titles = " ".join(
        str(c.get("document_title") or "") for c in chunks if str(c.get("id") or "") in ids
    )
    text = "".join(p.sentence for p in picks)
    check = check_part(part, text, carried=carried, context=titles)
    if not check.answered:
        return []
    # a better-ranked knowledge-base chunk says it in more of the question's words:
    # its sentence is the answer
    better = better_answer(part, [check], ids, chunks, carried=carried)
    if better is None:
        return picks
    rank = next(k for k, c in enumerate(chunks) if str(c.get("id") or "").strip() == better.id)
    return [Pick(better.id, rank, better.position, 0.0, better.text)]


def _checked_picks(
    query: str, part: str, chunks: Sequence[dict[str, Any]], check_carried: str, **pick: Any
) -> list[Pick]:
    """:func:`pick_sentences` for ``query`` kept when they answer ``part`` (see
    :func:`_answering`, ``check_carried`` the carried subject); when they do not, the
    picked chunks are set aside (their ranks kept) and the next candidates are checked
    once the same way; [] to refuse."""
    picks = pick_sentences(query, chunks, **pick)
    answered = _answering(part, picks, chunks, carried=check_carried)
    if answered or not picks:
        return answered
    rejected = {p.chunk_id for p in picks}
    rest = [
        {**c, "content": None} if str(c.get("id") or "").strip() in rejected else c for c in chunks
    ]
    again = pick_sentences(query, rest, **pick)
    return _answering(part, again, rest, carried=check_carried)


@dataclass(frozen=True)
class PartAnswer:
    """One part of a question and the sentences that answer it: ``picks`` the new ones,
    ``answered`` False when none does (a sentence of an earlier part may answer it too:
    then ``picks`` is empty and ``answered`` True)."""

    part: str
    picks: list[Pick]
    answered: bool = True


def answer_parts(
    query: str,
    chunks: Sequence[dict[str, Any]],
    *,
    previous: str = "",
    support: SupportModel | None = None,
    max_sentences: int = 3,
) -> list[PartAnswer]:
    """``query`` cut into the questions it asks (:func:`gcite.verify.asks.question_parts`;
    a follow-up's own words only), each answered by :func:`pick_sentences` with the other
    parts carried; a sentence already used by an earlier part is not repeated.

    The chunks are read in simplified characters (:func:`simplified_chunks`: a document
    written in traditional ones is matched as the question, which the query
    normalisation wrote in simplified ones), and the sentences quoted in the document's
    own characters (:func:`as_written`)."""
    simple, written = simplified_chunks(chunks)
    parts = _answer_parts(
        query,
        simple,
        previous=previous,
        support=support,
        max_sentences=max_sentences,
    )
    if not written:
        return parts
    return [
        replace(part, picks=[as_written(pick, simple, written) for pick in part.picks])
        for part in parts
    ]


def simplified_chunks(
    chunks: Sequence[dict[str, Any]],
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """``chunks`` with their ``content`` and ``document_title`` in simplified characters
    (:func:`gcite.knowledge.sparse.simplified`), and the original ``content`` of those
    that changed, by chunk id. A chunk whose simplified content differs in length from
    its own (OpenCC converts character for character, so none does in practice) is kept
    as written: its quotes could not be mapped back."""
    out: list[dict[str, Any]] = []
    written: dict[str, str] = {}
    for chunk in chunks:
        content, title = chunk.get("content"), chunk.get("document_title")
        if not isinstance(content, str):
            out.append(chunk)
            continue
        simple = simplified(content)
        if simple == content or len(simple) != len(content):
            out.append(chunk)
            continue
        written[str(chunk.get("id") or "").strip()] = content
        renamed = simplified(title) if isinstance(title, str) else title
        out.append({**chunk, "content": simple, "document_title": renamed})
    return out, written


def as_written(pick: Pick, simple: Sequence[dict[str, Any]], written: dict[str, str]) -> Pick:
    """``pick`` (a sentence of a chunk of ``simple``) in its document's own characters:
    the same span of the original content (``written``, by chunk id)."""
    original = written.get(pick.chunk_id)
    if original is None:
        return pick
    content = next(
        (str(c.get("content")) for c in simple if str(c.get("id") or "").strip() == pick.chunk_id),
        "",
    )
    at = content.find(pick.sentence)
    if at < 0:
        return pick
    return replace(pick, sentence=original[at : at + len(pick.sentence)])


def _answer_parts(
    query: str,
    chunks: Sequence[dict[str, Any]],
    *,
    previous: str,
    support: SupportModel | None,
    max_sentences: int,
) -> list[PartAnswer]:
    """:func:`answer_parts` on chunks already read in simplified characters."""
    own = _new_part(query, previous) if previous and previous.strip() in query else query
    parts = question_parts(own)
    if len(parts) <= 1:
        picks = _checked_picks(
            query,
            own,
            chunks,
            previous,
            previous=previous,
            support=support,
            max_sentences=max_sentences,
        )
        return [PartAnswer(query, picks, bool(picks))]
    out: list[PartAnswer] = []
    used: set[tuple[str, int]] = set()
    for part in parts:
        carried = " ".join(p for p in parts if p is not part)
        picks = _checked_picks(
            part,
            part,
            chunks,
            f"{previous} {carried}".strip(),
            previous=previous,
            support=support,
            max_sentences=max_sentences,
            carried=carried,
        )
        fresh = [p for p in picks if (p.chunk_id, p.position) not in used]
        used.update((p.chunk_id, p.position) for p in picks)
        out.append(PartAnswer(part, fresh, bool(picks)))
    return out


def compose_parts(parts: Sequence[PartAnswer]) -> str:
    """The answer to a question of one or more parts: each answered part's sentences
    (:func:`compose_answer`), and "“part”：根据现有资料无法确定。" for a part none answers;
    exactly "根据现有资料无法确定" when no part is answered."""
    if not any(p.answered for p in parts):
        return NO_ANSWER
    if len(parts) == 1:
        return compose_answer(parts[0].picks)
    out: list[str] = []
    for part in parts:
        if part.picks:
            out.append(compose_answer(part.picks))
        elif not part.answered:
            out.append(f"“{part.part.strip(_END_PUNCT + '，, ')}”：{NO_ANSWER}。")
    return "".join(out)


def compose_answer(picks: Sequence[Pick]) -> str:
    """Join the picked sentences, each with ``[C:id]`` before its final punctuation."""
    if not picks:
        return NO_ANSWER
    parts: list[str] = []
    for index, pick in enumerate(picks):
        body = pick.sentence.rstrip(_END_PUNCT).rstrip()
        end = pick.sentence[len(body) :].strip()[:1] or "。"
        if end in ";；":
            end = "。"
        if body.endswith(("：", ":")):  # a list heading quoted before its item
            last = index == len(picks) - 1  # ... or with nothing after it: a sentence
            body, end = body[:-1].rstrip(), "。" if last else "："
        parts.append(f"{body}[C:{pick.chunk_id}]{end}")
    return "".join(parts)


def previous_question(messages: Sequence[dict[str, str]]) -> str:
    """The user's question before the last one in chat ``messages`` ("" when none), in
    simplified characters as the retrieval query holds it
    (:func:`gcite.knowledge.vocabulary.simplified`)."""
    users = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    return simplified(users[-2]) if len(users) >= 2 else ""


class ExtractiveBackend(BackendLifecycle):
    """Offline backend: :func:`pick_sentences` + :func:`compose_answer`, streamed in deltas.

    ``support``: the support model (with the bundled embedder for semantic evidence;
    None: lexical only). ``delta_chars``: characters per delta (markers may be cut across
    deltas, as real models do). ``name`` is ``"extractive"``.
    """

    name = "extractive"
    #: The chatflow gives this backend the knowledge-base chunks down to this much below
    #: the retrieval's ``score_threshold`` (marked ``below_threshold``); see ``WEAK_MARGIN``.
    weak_margin = WEAK_MARGIN

    def __init__(
        self,
        *,
        support: SupportModel | None = None,
        delta_chars: int = 6,
        max_sentences: int = 3,
    ) -> None:
        self.support = support
        self.delta_chars = max(1, delta_chars)
        self.max_sentences = max_sentences

    def warm_up(self) -> None:
        """Load jieba's dictionary and IDF table (and the embedder) now, not at the first
        question."""
        terms("预热巡更")
        if self.support is not None and self.support.embedder is not None:
            self.support.embed(["预热"])
            self.support.embed_query("预热")

    def answer(self, query: str, chunks: Sequence[dict[str, Any]], previous: str = "") -> str:
        """The full answer text (markers included): every part of the question answered
        or refused (:func:`answer_parts`, :func:`compose_parts`)."""
        parts = answer_parts(
            query,
            chunks,
            previous=previous,
            support=self.support,
            max_sentences=self.max_sentences,
        )
        return compose_parts(parts)

    async def stream(
        self,
        messages: Sequence[dict[str, str]],
        *,
        chunks: Sequence[dict[str, Any]],
        query: str,
        usage: Usage | None = None,
    ) -> AsyncIterator[str]:
        """Yield the answer in ``delta_chars``-sized deltas (never raises on bad chunks)."""
        previous = previous_question(messages)
        text = await asyncio.to_thread(self.answer, query, list(chunks), previous)
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
    "MIN_RELEVANCE",
    "Asked",
    "ExtractiveBackend",
    "PartAnswer",
    "Pick",
    "answer_cues",
    "answer_parts",
    "as_written",
    "asked_of",
    "choose_units",
    "compose_answer",
    "compose_parts",
    "gives_answer",
    "is_follow_up",
    "pick_sentences",
    "previous_question",
    "query_terms",
    "simplified_chunks",
]
