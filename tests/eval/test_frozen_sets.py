"""The frozen evaluation sets are well formed and their gold is in the documents.

Every gold passage occurs in one of its gold documents, some alternative of every answer
keyword group occurs in them (spaces ignored), and every gold law article is an article
of its law file (and, where a set promises it, every law keypoint is a verbatim quote
from its gold law). Also the sizes and mix each set promises in its README
(``benchmarks/data/frozen``, ``benchmarks/data/frozen-2``, ``benchmarks/data/frozen-3``,
``benchmarks/data/frozen-4``, ``benchmarks/data/frozen-5``,
``benchmarks/data/frozen-6``, ``benchmarks/data/frozen-7``,
``benchmarks/data/frozen-8``, ``benchmarks/data/frozen-9``,
``benchmarks/data/frozen-10``, ``benchmarks/data/frozen-11``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from gcite.cli.demo import SAMPLE_DIR
from gcite.eval.questions import EvalQuestion, load_questions
from gcite.eval.scoring import chunk_articles, squeeze

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"


@dataclass(frozen=True)
class FrozenSet:
    """One frozen folder and the minimum sizes its README promises."""

    folder: str
    handbook_total: int
    handbook_answerable: int
    handbook_categories: dict[str, int]
    laws_total: int
    laws_answerable: int
    laws_unanswerable: int
    # Close-vocabulary unanswerable questions must name the document they come close to.
    near_docs_required: bool = False
    laws_categories: dict[str, int] = field(default_factory=dict)
    # Every law keypoint is quoted verbatim from one of its gold laws.
    keypoints_verbatim: bool = False


# the sixth to the eleventh sets promise the same mix (their READMEs)
SAME_MIX = FrozenSet(
    folder="frozen-6",
    handbook_total=105,
    handbook_answerable=72,
    handbook_categories={
        "colloquial": 31,
        "abbreviation": 8,
        "typo": 9,
        "extra-words": 7,
        "multi-part": 8,
        "follow-up": 9,
        "close-unanswerable": 25,
        "off-topic": 8,
    },
    laws_total=50,
    laws_answerable=43,
    laws_unanswerable=7,
    near_docs_required=True,
    laws_categories={"layperson": 15, "colloquial": 22, "multi-part": 6},
    keypoints_verbatim=True,
)


SETS = [
    FrozenSet(
        folder="frozen",
        handbook_total=80,
        handbook_answerable=0,
        handbook_categories={
            "close-unanswerable": 20,
            "off-topic": 10,
            "colloquial": 5,
            "abbreviation": 5,
            "typo": 5,
            "multi-part": 5,
            "follow-up": 5,
        },
        laws_total=40,
        laws_answerable=0,
        laws_unanswerable=3,
    ),
    FrozenSet(
        folder="frozen-2",
        handbook_total=85,
        handbook_answerable=55,
        handbook_categories={
            "colloquial": 25,
            "abbreviation": 6,
            "typo": 6,
            "extra-words": 5,
            "multi-part": 6,
            "follow-up": 6,
            "close-unanswerable": 22,
            "off-topic": 8,
        },
        laws_total=40,
        laws_answerable=34,
        laws_unanswerable=6,
        near_docs_required=True,
        laws_categories={"layperson": 1, "colloquial": 1, "multi-part": 1},
    ),
    FrozenSet(
        folder="frozen-3",
        handbook_total=100,
        handbook_answerable=69,
        handbook_categories={
            "colloquial": 33,
            "abbreviation": 7,
            "typo": 8,
            "extra-words": 6,
            "multi-part": 7,
            "follow-up": 8,
            "close-unanswerable": 24,
            "off-topic": 8,
        },
        laws_total=50,
        laws_answerable=44,
        laws_unanswerable=7,
        near_docs_required=True,
        laws_categories={"layperson": 20, "colloquial": 19, "multi-part": 5},
    ),
    # the fourth and fifth sets: the same mix but for one category, and the fourth without
    # verbatim keypoints
    replace(
        SAME_MIX,
        folder="frozen-4",
        handbook_total=104,
        handbook_categories={**SAME_MIX.handbook_categories, "close-unanswerable": 24},
        keypoints_verbatim=False,
    ),
    replace(
        SAME_MIX,
        folder="frozen-5",
        handbook_total=106,
        handbook_answerable=73,
        handbook_categories={**SAME_MIX.handbook_categories, "colloquial": 32},
    ),
    SAME_MIX,
    replace(SAME_MIX, folder="frozen-7"),
    replace(SAME_MIX, folder="frozen-8"),
    replace(SAME_MIX, folder="frozen-9"),
    replace(SAME_MIX, folder="frozen-10"),
    replace(SAME_MIX, folder="frozen-11"),
]
IDS = [s.folder for s in SETS]


def _document(name: str) -> str:
    for folder in ("handbook", "web"):
        path = SAMPLE_DIR / folder / name
        if path.is_file():
            return path.read_text("utf-8")
    raise AssertionError(f"no sample document {name}")


def _check_unanswerable(q: EvalQuestion, spec: FrozenSet) -> None:
    assert not (q.gold_docs or q.gold_passages or q.keywords), q.id
    near = q.extra.get("near_docs")
    if spec.near_docs_required and q.category == "close-unanswerable":
        assert isinstance(near, list) and near, q.id
    for name in near or []:
        _document(name)  # names a real document


def _check_answerable(q: EvalQuestion) -> None:
    texts = [_document(d) for d in q.gold_docs]
    assert q.gold_passages and q.keywords, q.id
    for passage in q.gold_passages:
        assert any(passage in t for t in texts), (q.id, passage)
    for group in q.keywords:
        assert any(squeeze(k) in squeeze(t) for k in group for t in texts), (q.id, group)
    if q.category == "follow-up":
        assert q.turns and all(t.answer for t in q.turns), q.id
    if q.category == "multi-part":
        assert len(q.keywords) >= 2, q.id


@pytest.mark.parametrize("spec", SETS, ids=IDS)
def test_handbook_gold_is_in_the_documents(spec: FrozenSet) -> None:
    questions = load_questions(DATA / spec.folder / "handbook.jsonl")
    assert len(questions) >= spec.handbook_total
    assert sum(q.answerable for q in questions) >= spec.handbook_answerable
    counts = Counter(q.category for q in questions)
    for category, least in spec.handbook_categories.items():
        assert counts[category] >= least, (category, counts[category])
    for q in questions:
        if q.answerable:
            _check_answerable(q)
        else:
            _check_unanswerable(q, spec)


@pytest.mark.parametrize("spec", SETS, ids=IDS)
def test_law_gold_articles_exist(spec: FrozenSet, corpus_dir: Path) -> None:
    questions = load_questions(DATA / spec.folder / "laws.jsonl")
    assert len(questions) >= spec.laws_total
    assert sum(q.answerable for q in questions) >= spec.laws_answerable
    assert sum(not q.answerable for q in questions) >= spec.laws_unanswerable
    counts = Counter(q.category for q in questions if q.answerable)
    for category, least in spec.laws_categories.items():
        assert counts[category] >= least, (category, counts[category])
    texts: dict[str, str] = {}
    articles: dict[str, set[str]] = {}
    for q in questions:
        assert q.answerable == bool(q.gold_articles), q.id
        assert "第" not in q.question or "条" not in q.question, q.id  # no article numbers
        for gold in q.gold_articles:
            if gold.doc not in articles:
                texts[gold.doc] = (corpus_dir / "laws" / gold.doc).read_text("utf-8")
                articles[gold.doc] = set(chunk_articles(texts[gold.doc]))
            assert gold.article in articles[gold.doc], (q.id, gold)
        if spec.keypoints_verbatim:
            _check_keypoints(q, [texts[g.doc] for g in q.gold_articles])


def _check_keypoints(q: EvalQuestion, laws: list[str]) -> None:
    assert bool(q.keypoints) == q.answerable, q.id
    for point in q.keypoints:
        assert any(squeeze(point) in squeeze(law) for law in laws), (q.id, point)
