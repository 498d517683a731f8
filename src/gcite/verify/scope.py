"""Scope: the sentences that may answer a question at all, whatever their words.

The offline answerer (:mod:`gcite.generate.extractive`) never quotes some sentences
however well they match; any answer keeps to the same rules, so the check for a
better-ranked sentence saying the answer in more of the question's words
(:func:`gcite.verify.asks.better_answer`, used by the answerer and by the verifier's
second dimension) looks only at sentences within them:

* a law's penalty provision (its 法律责任 / 罚则 chapter; a chunk of a law's articles,
  not a handbook's chapter 罚则) answers only a question about a sanction
  (:mod:`gcite.verify.sanctions`);
* a question naming a place - the place of a retrieved regulation's title
  (:func:`gcite.knowledge.jurisdiction.document_place`), as the retrieval's jurisdiction
  rule reads it - is not answered by another place's regulation.

Pure functions over the text and the documents' titles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gcite.knowledge.jurisdiction import document_place, places_named
from gcite.verify.sanctions import asks_sanction, in_sanctions
from gcite.verify.text import Sentence

#: Whether a sentence (its document's title, the sentence, whether its chunk is of a law's
#: articles - :func:`gcite.verify.sanctions.law_articles`) may answer at all.
SentenceFilter = Callable[[str, Sentence, bool], bool]


def in_scope(question: str, titles: Iterable[str]) -> SentenceFilter:
    """The sentences that may answer ``question`` (see the module docstring).

    ``titles``: the titles of the documents retrieved for it (their places are the ones
    a question can name). The filter takes a sentence's document title, the sentence (its
    :attr:`~gcite.verify.text.Sentence.context`, the headings it is quoted under) and
    whether its chunk is of a law's articles (:func:`gcite.verify.sanctions.law_articles`:
    a penalty chapter elsewhere is no law's)."""
    sanction = asks_sanction(question)
    named = places_named(question, {document_place(title) for title in titles})

    def admits(title: str, sentence: Sentence, law: bool) -> bool:
        place = document_place(title) if named else ""
        if place and place not in named:
            return False  # another place's regulation
        return sanction or not (law and in_sanctions(sentence.context))

    return admits


__all__ = ["SentenceFilter", "in_scope"]
