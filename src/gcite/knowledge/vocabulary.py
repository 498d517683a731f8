"""Query normalisation: a user's wording mapped to the knowledge base's own.

A question typed on a phone uses other words than the documents: a short form
("柴发" for 柴油发电机), a homophone typo from pinyin input ("巡梗" for 巡更), an everyday
word for the documents' term. Retrieval scores words the documents contain, so the
query is rewritten towards them before it is searched (:meth:`Vocabulary.normalise`):

1. **synonyms** - an operator-extensible table (:func:`parse_synonyms`; the shipped
   ``knowledge/data/synonyms.txt`` plus the file of ``synonyms_file``): a query word of
   a group that the documents do not use is replaced by the group's word they use most;
2. **defined short forms** - a document defining one ("不间断电源（UPS）") maps the short
   form to the long one, which is added after it; a definition inside a sentence
   ("二号机房配有不间断电源（UPS）") defines the words after its last verb or function word
   (:func:`long_form`);
3. **short forms** - a query word the documents do not use, formed as Chinese
   abbreviations are from a longer word of theirs (each character the first of one of
   its parts: "柴发" of 柴油|发电机, "消控室" of 消防|控制|室), is replaced by it when that
   word is unambiguous (a common dictionary word such as 要是 is never a short form, and a
   function word such as 是 never a part);
4. **homophone typos** - 2-4 characters of whole words of the query (jieba's cut; no
   function word such as 在 or 的 among them) that are neither a word of the documents
   nor a dictionary word, but sound (toneless pinyin, ``pypinyin``) like a dictionary
   word the documents use (or a word holding one), are replaced by that word
   ("巡梗" -> 巡更, "会意室" -> 会议室).
   A term of the documents that jieba's dictionary does not know is not a target: a
   rare real word of the user sounding like it would be replaced too.

A question typed in traditional characters ("報修電話是多少") is first written in simplified
ones (:func:`simplified`, OpenCC's ``t2s`` conversion): the documents, the synonyms and the
answer types are written in simplified Chinese, and so is the rest of this normalisation.

The vocabulary comes from the documents themselves, at ingest: :func:`document_vocabulary`
gives a document's words and defined short forms, kept with the document's catalog entry
(``catalog.json`` or the pgvector catalog table), and :func:`build_vocabulary` joins them
for a store (:class:`gcite.knowledge.store.HybridStore` builds one per catalog state and
set of documents a caller's roles may see: a question is never rewritten with the words
of a document hidden from its caller; :class:`gcite.testing.MemoryStore` likewise). Pure
functions over the one tokeniser
(:mod:`gcite.knowledge.sparse`); no module state.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any

from gcite.errors import ConfigError
from gcite.knowledge.sparse import NON_CONTENT, jieba_module, simplified, word_tags, words

#: Key of a document's vocabulary in its catalog entry.
CATALOG_KEY = "vocabulary"
RULES = 2
"""The version of the rules :func:`document_vocabulary` reads a document with (2: the long
form of a short form defined mid-sentence is the name, not the words before it). An
unchanged document whose entry was read with other rules gets a new entry at the next
ingest (read from its file, nothing re-embedded)."""
MIN_WORD = 2
MAX_WORD = 8
MAX_SHORT_FORM = 4
MAX_CANDIDATES = 3
"""A short form matching more corpus words than this is ambiguous and left alone."""
COMMON_WORD = 100
"""A query word this frequent in jieba's dictionary (要是, 伤人) is never a short form."""
MAX_SYNONYM_LINES = 10_000
MAX_SYNONYM_BYTES = 1_000_000

_CJK_RUN = re.compile(r"[\u3400-\u9fff]+")
_CJK_WORD = re.compile(r"^[\u3400-\u9fff]+$")
# "不间断电源（UPS）", "消防控制室(消控室)": a long form and its short form in brackets
_DEFINED = re.compile(
    r"([\u3400-\u9fff]{3,12})[（(]\s*([A-Za-z][A-Za-z0-9-]{1,9}|[\u3400-\u9fff]{2,4})\s*[)）]"
)
# a number or an ordinal (十章, 第三) is never what a typo stands for
_NUMERALS = frozenset("零一二三四五六七八九十百千万两第")
_SPLIT = re.compile(r"[\s,，、;；]+")
# jieba's tags of the words a long form never runs across: a preposition, conjunction or
# particle (为, 和, 的); a verb ("v": 配有) only with words on both sides (see long_form)
_FUNCTION_TAGS = ("p", "c", "u")
_VERB_TAG = "v"
MIN_LONG_FORM = 3


def document_vocabulary(text: str) -> dict[str, Any]:
    """The vocabulary entry of one document: ``{"words": "w1 w2 ...", "short": {short:
    long}}`` - its Chinese words (2-8 characters: jieba's search-mode words and pairs of
    adjacent content words, so a compound such as 柴油发电机 is one word) and the short forms it
    defines in brackets. Pure; bounded by the text's length."""
    found: set[str] = set()
    tokens = words(text, search=False)
    for token in words(text):
        if MIN_WORD <= len(token) <= MAX_WORD and _CJK_WORD.match(token):
            found.add(token)
    for first, second in itertools.pairwise(tokens):
        if min(len(first), len(second)) < MIN_WORD or {first, second} & NON_CONTENT:
            continue
        pair = first + second
        if len(pair) <= MAX_WORD and _CJK_WORD.match(pair):
            found.add(pair)
    short: dict[str, str] = {}
    for match in _DEFINED.finditer(text):
        candidate, short_form = match.group(1), match.group(2)
        if _NUMERALS.issuperset(short_form):
            continue  # "第七十八条第二款第（十二）项": a number, not a short form
        # an acronym, or the long form's characters in order ("消控室" of 消防控制室)
        if short_form.isascii() or _in_order(short_form, candidate):
            short[short_form.lower()] = long_form(candidate, short_form)
    return {"words": " ".join(sorted(found)), "short": short}


MAX_DOCUMENT_WORDS = 50_000
"""At most this many words of one document are kept (a huge document's tail adds few)."""

NORMALISED_KEPT = 256
"""How many queries' normalised text a :class:`Vocabulary` keeps (then it starts over)."""
SOUND_KEYS_KEPT = 4096
"""How many query windows' pinyin keys a :class:`Vocabulary` keeps (then it starts over)."""


class VocabularyBuilder:
    """A document's vocabulary entry built from its text piece by piece (ingestion reads a
    large document in chunks): :meth:`add` each piece, then :meth:`entry`."""

    def __init__(self) -> None:
        self._words: set[str] = set()
        self._short: dict[str, str] = {}

    def add(self, text: str) -> None:
        """Take the words and defined short forms of ``text``."""
        if len(self._words) >= MAX_DOCUMENT_WORDS:
            return
        part = document_vocabulary(text)
        self._words.update(part["words"].split())
        self._short.update(part["short"])

    def entry(self) -> dict[str, Any]:
        """The entry (:func:`document_vocabulary`'s shape) of everything added, marked with
        the :data:`RULES` it was read with."""
        return {"words": " ".join(sorted(self._words)), "short": dict(self._short), "rules": RULES}


def parse_synonyms(text: str, *, source: str = "synonyms") -> list[tuple[str, ...]]:
    """Synonym groups from the table format: UTF-8, one group per line, words separated
    by spaces, commas or 、; ``#`` starts a comment; a group needs two words. Raises
    :class:`ConfigError` (Chinese, naming ``source`` and the line) for a table over
    :data:`MAX_SYNONYM_LINES` lines or a line with a single word."""
    lines = text.splitlines()
    if len(lines) > MAX_SYNONYM_LINES:
        raise ConfigError(f"同义词表 {source} 超过 {MAX_SYNONYM_LINES} 行")
    groups: list[tuple[str, ...]] = []
    for number, line in enumerate(lines, 1):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        group = tuple(dict.fromkeys(w.lower() for w in _SPLIT.split(body) if w))
        if len(group) < 2:
            raise ConfigError(f"同义词表 {source} 第 {number} 行只有一个词：每行至少写两个同义词")
        groups.append(group)
    return groups


@functools.cache
def shipped_synonyms() -> tuple[tuple[str, ...], ...]:
    """The synonym table shipped with gcite (``knowledge/data/synonyms.txt``)."""
    text = files("gcite.knowledge").joinpath("data", "synonyms.txt").read_text("utf-8")
    return tuple(parse_synonyms(text, source="synonyms.txt"))


def read_synonyms(path: str) -> list[tuple[str, ...]]:
    """The groups of the operator's table at ``path`` (:func:`parse_synonyms`); raises
    :class:`ConfigError` when it cannot be read, is over :data:`MAX_SYNONYM_BYTES` or is
    not UTF-8."""
    from pathlib import Path

    file = Path(path).expanduser()
    try:
        if file.stat().st_size > MAX_SYNONYM_BYTES:
            raise ConfigError(f"同义词表 {file} 超过 {MAX_SYNONYM_BYTES} 字节")
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"无法读取同义词表 {file}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"同义词表 {file} 不是 UTF-8 文本") from exc
    return parse_synonyms(text, source=str(file))


def _pinyin_key(word: str) -> str:
    from pypinyin import lazy_pinyin

    return " ".join(lazy_pinyin(word))


def _frequency(word: str) -> int:
    return int(jieba_module().dt.FREQ.get(word, 0) or 0)


def _dictionary_word(word: str) -> bool:
    return _frequency(word) > 0


def _has_word(word: str) -> bool:
    """Whether ``word`` is, or holds, a dictionary word of two or more characters (巡更点:
    巡更; not 十章, a fragment of 第十章)."""
    return any(
        len(part) >= MIN_WORD and _dictionary_word(part) for part in jieba_module().lcut(word)
    )


@dataclass(frozen=True)
class Vocabulary:
    """The words of a knowledge base, indexed for :meth:`normalise`.

    ``counts``: word -> number of documents using it; ``short``: defined short form ->
    long form; ``synonyms``: groups of interchangeable words. Build with
    :func:`build_vocabulary`.
    """

    counts: Mapping[str, int] = field(default_factory=dict)
    short: Mapping[str, str] = field(default_factory=dict)
    synonyms: Sequence[tuple[str, ...]] = ()
    by_sound: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    by_first: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    parts: frozenset[str] = frozenset()
    # normalise()'s results by query: a chat run normalises its question, then the search
    # normalises that text again (most often the same text: a hit); at most NORMALISED_KEPT
    _normalised: dict[str, str] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    # what normalise() derives from a word of the documents alone (jieba's dictionary does
    # not change): its search-mode parts' start positions (:func:`part_starts`), whether
    # its cut holds a function word, whether it holds a dictionary word (:func:`_has_word`);
    # filled as queries need them, at most one entry per word of the documents
    _starts: dict[str, Mapping[str, tuple[int, ...]]] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    _function_word: dict[str, bool] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    _holds_word: dict[str, bool] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    # the pinyin keys of the query windows looked up lately (a question's words recur in
    # others'), at most SOUND_KEYS_KEPT
    _window_keys: dict[str, str] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def known(self, word: str) -> bool:
        """Whether ``word`` occurs in the documents (as a word or inside one)."""
        return word in self.parts

    def normalise(self, query: str) -> str:
        """``query`` with its wording mapped to the documents' (see the module docstring);
        only written in simplified characters when the vocabulary is empty. Pure (its
        results are kept: the last :data:`NORMALISED_KEPT` queries are not normalised
        again)."""
        if not self.counts:
            return simplified(query)
        known = self._normalised.get(query)
        if known is not None:
            return known
        text = self._synonyms(simplified(query))
        text = self._short_forms(text)
        text = self._sounds(text)
        text = self._defined(text)
        if len(self._normalised) >= NORMALISED_KEPT:
            self._normalised.clear()  # atomic: other threads may be normalising too
        self._normalised[query] = text
        return text

    def _best(self, candidates: Iterable[str]) -> str | None:
        ranked = sorted(candidates, key=lambda w: (-self.counts.get(w, 0), w))
        return ranked[0] if ranked else None

    def _synonyms(self, text: str) -> str:
        lowered = text.lower()
        for group in self.synonyms:
            used = [w for w in group if w in self.counts]
            target = self._best(used)
            if target is None:
                continue
            for word in group:
                if word != target and word in lowered and not self.known(word):
                    text = _replace(text, word, target)
                    lowered = text.lower()
        return text

    def _sounds(self, text: str) -> str:
        for run in _CJK_RUN.findall(text):
            fixed = self._fix_run(run)
            if fixed != run:
                text = text.replace(run, fixed, 1)
        return text

    def _fix_run(self, run: str) -> str:
        """``run`` (Chinese characters only) with its typos replaced: windows of whole
        jieba words (2-4 characters, no function word), longest first from the left."""
        tokens = jieba_module().lcut(run)
        out: list[str] = []
        index = 0
        while index < len(tokens):
            size, match = self._typo_at(tokens, index)
            if match is None:
                out.append(tokens[index])
                index += 1
            else:
                out.append(match)
                index += size
        return "".join(out)

    def _typo_at(self, tokens: list[str], index: int) -> tuple[int, str | None]:
        """The number of tokens from ``index`` that form a typo, and the word it stands
        for (``(0, None)``: none)."""
        for count in range(min(MAX_SHORT_FORM, len(tokens) - index), 0, -1):
            parts = tokens[index : index + count]
            window = "".join(parts)
            if not MIN_WORD <= len(window) <= MAX_SHORT_FORM:
                continue
            if any(p in NON_CONTENT for p in parts):
                continue
            match = self._sounds_like(window)
            if match is not None:
                return count, match
        token = tokens[index]
        if len(token) > MIN_WORD and not self.known(token) and not _dictionary_word(token):
            # a word jieba made up around a typo ("巡梗点"): the typo inside it
            for size in range(min(MAX_SHORT_FORM, len(token) - 1), MIN_WORD - 1, -1):
                for offset in range(len(token) - size + 1):
                    match = self._sounds_like(token[offset : offset + size])
                    if match is not None:
                        return 1, token[:offset] + match + token[offset + size :]
        return 0, None

    def _sounds_like(self, window: str) -> str | None:
        """The word of the documents ``window`` is a homophone typo of, or None."""
        if self.known(window) or _dictionary_word(window):
            return None
        targets = [
            w
            for w in self.by_sound.get(self._window_key(window), ())
            if self._has_word(w) and not _NUMERALS.intersection(w)
        ]
        match = self._best(targets)
        return match if match is not None and match != window else None

    def _short_forms(self, text: str) -> str:
        for token in dict.fromkeys(words(text, search=False)):
            if not (MIN_WORD <= len(token) <= MAX_SHORT_FORM and _CJK_WORD.match(token)):
                continue
            if self.known(token) or _frequency(token) >= COMMON_WORD:
                continue
            found = [
                w
                for w in self.by_first.get(token[0], ())
                if len(token) < len(w) <= 3 * len(token)
                and abbreviates_at(token, w, self._part_starts(w))
                and not self._has_function_word(w)
            ]
            if 0 < len(found) <= MAX_CANDIDATES:
                target = self._best(found)
                if target is not None:
                    text = text.replace(token, target)
        return text

    def _window_key(self, window: str) -> str:
        key = self._window_keys.get(window)
        if key is None:
            key = _pinyin_key(window)
            if len(self._window_keys) >= SOUND_KEYS_KEPT:
                self._window_keys.clear()  # atomic: other threads may be normalising too
            self._window_keys[window] = key
        return key

    def _part_starts(self, word: str) -> Mapping[str, tuple[int, ...]]:
        starts = self._starts.get(word)
        if starts is None:
            starts = self._starts[word] = part_starts(word)
        return starts

    def _has_function_word(self, word: str) -> bool:
        found = self._function_word.get(word)
        if found is None:
            found = self._function_word[word] = bool(
                NON_CONTENT.intersection(jieba_module().lcut(word))
            )
        return found

    def _has_word(self, word: str) -> bool:
        found = self._holds_word.get(word)
        if found is None:
            found = self._holds_word[word] = _has_word(word)
        return found

    def _defined(self, text: str) -> str:
        lowered = text.lower()
        extra = [
            long_form
            for short_form, long_form in self.short.items()
            if _mentions(lowered, short_form) and long_form not in text
        ]
        return f"{text} {' '.join(extra)}" if extra else text


def part_starts(long: str) -> dict[str, tuple[int, ...]]:
    """The start positions in ``long`` of its parts (jieba's search-mode words, every
    occurrence), by the part's first character: what :func:`abbreviates_at` matches."""
    starts: dict[str, list[int]] = {}
    for part in jieba_module().cut_for_search(long):
        index = long.find(part, 0)
        while index != -1:
            starts.setdefault(part[0], []).append(index)
            index = long.find(part, index + 1)
    return {char: tuple(found) for char, found in starts.items()}


def abbreviates_at(short: str, long: str, starts: Mapping[str, Sequence[int]]) -> bool:
    """Whether ``short`` is formed as Chinese abbreviations are: each character the first
    of a part of ``long`` (jieba's search-mode words: 柴发 of 柴油|发电机, 冷机 of
    冷水|机组), in order; a short form of three or more characters may end with the long
    form's last character (消控室 of 消防|控制|室). ``starts``: :func:`part_starts` of
    ``long``."""
    position = -1
    for number, char in enumerate(short):
        last = number == len(short) - 1 and len(short) >= 3 and long[-1] == char
        options = [i for i in starts.get(char, ()) if i > position]
        if last and not options:
            options = [len(long) - 1] if len(long) - 1 > position else []
        if not options:
            return False
        position = min(options)
    return True


def long_form(candidate: str, short: str) -> str:
    """The long form ``short`` defines in ``candidate``, the Chinese characters before its
    bracket. For a Chinese short form: the shortest suffix starting at a word of jieba's
    cut with the short form's first character that holds its characters in order and more
    ("本单位设置消防控制室" -> 消防控制室 for 消控室). For an acronym: the words after the last
    function word (by jieba's cut: a :data:`NON_CONTENT` word or a preposition, conjunction
    or particle) or the last verb with a word before it and two or more after it
    ("二号机房配有不间断电源" -> 不间断电源; "视频监控系统", "备用电源自动投入装置" stay whole: a
    verb before one word or at the start is part of the name). The candidate whole when no
    such suffix is :data:`MIN_LONG_FORM` characters or more."""
    tokens: list[str] = jieba_module().lcut(candidate)
    if not short.isascii():
        for index in range(len(tokens) - 1, -1, -1):
            suffix = "".join(tokens[index:])
            if len(suffix) > len(short) and suffix[0] == short[0] and _in_order(short, suffix):
                return suffix
        return candidate
    tags = word_tags()
    for index in range(len(tokens) - 2, -1, -1):
        rest = "".join(tokens[index + 1 :])
        if len(rest) >= MIN_LONG_FORM and _ends_before_name(tokens, index, tags):
            return rest
    return candidate


def _ends_before_name(tokens: Sequence[str], index: int, tags: Mapping[str, str]) -> bool:
    """Whether a long form starts after ``tokens[index]``: a function word, or a verb with a
    word before it and two or more after it."""
    token = tokens[index]
    tag = tags.get(token, "")
    if token in NON_CONTENT or tag.startswith(_FUNCTION_TAGS):
        return True
    return tag == _VERB_TAG and 0 < index < len(tokens) - 2


def _in_order(short: str, long: str) -> bool:
    """Whether the characters of ``short`` appear in ``long`` in order."""
    rest = iter(long)
    return all(ch in rest for ch in short)


def _mentions(lowered: str, form: str) -> bool:
    if form.isascii():
        return re.search(rf"(?<![a-z0-9]){re.escape(form)}(?![a-z0-9])", lowered) is not None
    return form in lowered


def _replace(text: str, word: str, target: str) -> str:
    return re.sub(re.escape(word), target, text, flags=re.IGNORECASE)


def build_vocabulary(
    entries: Iterable[Mapping[str, Any]],
    synonyms: Iterable[tuple[str, ...]] = (),
    sounds: Mapping[str, str] | None = None,
) -> Vocabulary:
    """A :class:`Vocabulary` from documents' entries (:func:`document_vocabulary`; an entry
    of another shape is skipped) and synonym groups. ``sounds``: word -> toneless pinyin
    key known already (:func:`sound_keys` of an earlier vocabulary; a word not in it is
    keyed with ``pypinyin``, most of this function's CPU). Pure."""
    known = sounds or {}
    counts: Counter[str] = Counter()
    short: dict[str, str] = {}
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        listed = entry.get("words")
        if isinstance(listed, str):
            counts.update(set(listed.split()))
        defined = entry.get("short")
        if isinstance(defined, Mapping):
            short.update({str(k): str(v) for k, v in defined.items() if isinstance(v, str)})
    if not counts:
        return Vocabulary(short=short, synonyms=tuple(synonyms))
    sound: dict[str, list[str]] = {}
    first: dict[str, list[str]] = {}
    parts: set[str] = set()
    for word in counts:
        if len(word) <= MAX_SHORT_FORM:
            key = known.get(word)
            sound.setdefault(key if key is not None else _pinyin_key(word), []).append(word)
        first.setdefault(word[0], []).append(word)
        for size in range(MIN_WORD, min(len(word), MAX_SHORT_FORM) + 1):
            parts.update(word[i : i + size] for i in range(len(word) - size + 1))
    return Vocabulary(
        counts=dict(counts),
        short=short,
        synonyms=tuple(synonyms),
        by_sound={k: tuple(v) for k, v in sound.items()},
        by_first={k: tuple(v) for k, v in first.items()},
        parts=frozenset(parts),
    )


def sound_keys(vocabulary: Vocabulary) -> dict[str, str]:
    """word -> toneless pinyin key of the words ``vocabulary`` keys by sound (what
    :func:`build_vocabulary` takes as ``sounds``)."""
    return {word: key for key, found in vocabulary.by_sound.items() for word in found}


__all__ = [
    "CATALOG_KEY",
    "MAX_DOCUMENT_WORDS",
    "RULES",
    "Vocabulary",
    "VocabularyBuilder",
    "build_vocabulary",
    "document_vocabulary",
    "parse_synonyms",
    "read_synonyms",
    "shipped_synonyms",
    "simplified",
    "sound_keys",
]
