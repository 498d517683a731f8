"""Jurisdiction: a place's own regulations ranked for questions about that place.

A knowledge base of laws often holds national laws beside the regulations of a province
or city on the same subject ("中华人民共和国消防法" and "北京市消防条例"). Both use the
same words, so relevance alone ranks them by accidents of wording. Chinese law names a
local regulation after its place, at the start of its title (北京市…条例, 广东省…条例,
新疆维吾尔自治区…条例); a national law or State Council regulation names none. Hence:

* a question that names **no** place asks for the rule that holds everywhere: a local
  regulation's chunks lose :data:`UNASKED_PLACE` of relevance logit (they still rank,
  and still answer when nothing national does);
* a question that names a place the knowledge base has regulations for asks for those:
  another place's regulations lose :data:`OTHER_PLACE`, national ones
  :data:`NATIONAL_BESIDE_PLACE` (the place's own rule is the more specific one).

A document's place (:func:`document_place`) is the place word the title of a regulation
(a title naming a kind of local legislation, :data:`KINDS`) starts with: a
word of jieba's dictionary tagged as a place name (``ns``) ending in an administrative
unit (省, 市, 自治区, 自治州, 特别行政区, 经济特区; see :data:`UNITS`) whose name
without the unit has at least two characters ("城市" is no place); when only the name is
tagged, the unit must not begin a word with what follows it ("中国市场" names no city).
A question names a place when it contains that name without its unit ("北京" for 北京市;
for an autonomous region or prefecture without the people it is named for: "新疆" for
新疆维吾尔自治区).
Nothing here is a list of places: they come from the documents' titles. A knowledge
base whose titles name no place (a staff handbook), or whose documents are all of one
place, is ranked exactly as before.

The shift is applied to the calibrated relevance (:mod:`gcite.knowledge.relevance`) on
its logit scale, so a score stays 0-1 and a first-ranked chunk of a near-certain match
stays above the threshold; a chunk is never shifted under :data:`KEPT_LEVEL` (the
background level the relevance gate compares the best chunk with). Pure functions over
the one tokeniser's dictionary (:func:`gcite.knowledge.sparse.word_tags`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gcite.knowledge.sparse import word_tags
from gcite.knowledge.stores.base import Hit

#: Administrative units a local regulation's place word ends in (longest first).
UNITS = ("特别行政区", "经济特区", "自治区", "自治州", "省", "市")
#: The names of the kinds of local legislation (地方性法规 and 政府规章: 条例, 规定,
#: 办法, 规则, 细则, 决定): a title naming none is no regulation ("北京市某大厦消防应急预案").
KINDS = ("条例", "规定", "办法", "规则", "细则", "决定")
AUTONOMOUS = ("自治区", "自治州")
"""The units of places named after a place and a people (新疆维吾尔自治区)."""
MIN_NAME = 2
"""A place's name without its unit has at least this many characters."""
MAX_PLACE = 12
"""A place word is at most this many characters (the title's first ones are tried)."""
UNASKED_PLACE = 2.0
"""Logit lost by a local regulation's chunk for a question that names no place it has."""
OTHER_PLACE = 3.0
"""Logit lost by another place's regulation when the question names a place."""
NATIONAL_BESIDE_PLACE = 0.5
"""Logit lost by a national document's chunk when the question names a place whose own
regulations the knowledge base holds."""
KEPT_LEVEL = 0.2
"""A chunk's score is never lowered under this level (nor under its own score when lower):
a chunk scoring that little is the background of the ranked list, the level any chunk
reaches for the question, which the relevance gate (:mod:`gcite.chatflow.gate`) compares
the best chunk with; shifting it down would make an off-topic best chunk stand out."""
PLACE_TAG = "ns"


def _unit_stripped(word: str) -> str:
    for unit in UNITS:
        if word.endswith(unit):
            return word[: -len(unit)]
    return ""


def document_place(title: str, tags: Mapping[str, str] | None = None) -> str:
    """The place ``title`` starts with, as its name without the unit ("北京" of
    "北京市消防条例"), or "" for a title naming none ("中华人民共和国消防法", "物业管理条例")
    and for a title that names no kind of regulation (:data:`KINDS`: "北京市某大厦员工手册").

    ``tags``: word -> part-of-speech tag (jieba's dictionary when None). The place word is
    the longest prefix of at most :data:`MAX_PLACE` characters ending in a :data:`UNITS`
    unit whose name has :data:`MIN_NAME` characters or more, the word tagged ``ns``, or its
    name when the unit does not begin a dictionary word with the characters after it."""
    table = word_tags() if tags is None else tags
    text = title.strip()
    if not any(kind in text for kind in KINDS):
        return ""
    head = text[:MAX_PLACE]
    for end in range(len(head), MIN_NAME, -1):
        word = head[:end]
        name = _unit_stripped(word)
        if len(name) < MIN_NAME:
            continue
        if table.get(word) == PLACE_TAG or (
            table.get(name) == PLACE_TAG and not _unit_begins_word(text, end, name, table)
        ):
            return _short_name(name, word, table)
    return ""


def _short_name(name: str, word: str, table: Mapping[str, str]) -> str:
    """The name an autonomous region or prefecture is asked by: its shortest prefix of
    :data:`MIN_NAME` characters or more tagged ``ns``, without the people it is named for
    ("新疆" of 新疆维吾尔自治区, "延边" of 延边朝鲜族自治州); ``name`` for any other place."""
    if not word.endswith(AUTONOMOUS):
        return name
    short = (name[:end] for end in range(MIN_NAME, len(name)))
    return next((s for s in short if table.get(s) == PLACE_TAG), name)


def _unit_begins_word(text: str, end: int, name: str, table: Mapping[str, str]) -> bool:
    """Whether the unit that ends ``text[:end]`` (after ``name``) begins a dictionary word
    with the characters after it: "中国市场" is a market of China, not a city "中国"."""
    start = len(name)
    return any(text[start : end + extra] in table for extra in (1, 2) if end + extra <= len(text))


def hit_title(payload: Mapping[str, Any]) -> str:
    """The title of a hit's document: ``doc_metadata.document_title``, else its file name."""
    meta = payload.get("doc_metadata")
    if isinstance(meta, Mapping):
        title = meta.get("document_title")
        if isinstance(title, str) and title.strip():
            return title
    return str(payload.get("document_name") or "")


def places_named(query: str, places: Iterable[str]) -> frozenset[str]:
    """The places among ``places`` (names without unit) that ``query`` mentions."""
    return frozenset(p for p in places if p and p in query)


def penalty(place: str, named: frozenset[str]) -> float:
    """The logit a chunk of a document for ``place`` ("" = national) loses for a question
    naming ``named`` (see the module docstring)."""
    if not named:
        return UNASKED_PLACE if place else 0.0
    if not place:
        return NATIONAL_BESIDE_PLACE
    return 0.0 if place in named else OTHER_PLACE


def shifted(score: float, loss: float) -> float:
    """``score`` (0-1) with ``loss`` taken off its logit, but not under
    ``min(score, KEPT_LEVEL)``; unchanged when ``loss`` is 0."""
    if loss <= 0:
        return score
    s = min(max(score, 1e-9), 1 - 1e-9)
    z = math.log(s / (1 - s)) - loss
    return min(score, max(KEPT_LEVEL, 1 / (1 + math.exp(-z))))


def localise(hits: Sequence[Hit], query: str, places: Iterable[str]) -> list[Hit]:
    """``hits`` (with payloads) re-scored for the places ``query`` names among ``places``
    (the places of the knowledge base's documents), best first; ties keep their order.
    Without ``places`` the hits come back as they are."""
    known = frozenset(places)
    if not known:
        return list(hits)
    named = places_named(query, known)
    cache: dict[str, str] = {}
    out: list[Hit] = []
    for hit in hits:
        title = hit_title(hit.payload)
        if title not in cache:
            cache[title] = document_place(title)
        loss = penalty(cache[title], named)
        out.append(Hit(shifted(hit.score, loss), hit.payload, hit.id) if loss else hit)
    out.sort(key=lambda h: -h.score)
    return out


def catalog_places(titles: Iterable[str]) -> frozenset[str]:
    """The places of documents with these ``titles`` (:func:`document_place`, "" left out);
    none when the documents are all of one jurisdiction (all national, or all one place's:
    a company handbook titled after its city): there is nothing to prefer then, and
    lowering every chunk's score alike would only make answerable questions refused."""
    found = {document_place(t) for t in titles}
    return frozenset(found - {""}) if len(found) > 1 else frozenset()


__all__ = [
    "KEPT_LEVEL",
    "KINDS",
    "MAX_PLACE",
    "MIN_NAME",
    "NATIONAL_BESIDE_PLACE",
    "OTHER_PLACE",
    "UNASKED_PLACE",
    "UNITS",
    "catalog_places",
    "document_place",
    "hit_title",
    "localise",
    "penalty",
    "places_named",
    "shifted",
]
