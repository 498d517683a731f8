"""The frozen evaluation sets are well formed and their gold is in the documents.

Every gold passage occurs in one of its gold documents, some alternative of every answer
keyword group occurs in them (spaces ignored), and every gold law article is an article
of its law file. Also the sizes and mix the sets promise (``benchmarks/data/frozen``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from gcite.cli.demo import SAMPLE_DIR
from gcite.eval.questions import load_questions
from gcite.eval.scoring import chunk_articles, squeeze

FROZEN = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "frozen"


def _document(name: str) -> str:
    for folder in ("handbook", "web"):
        path = SAMPLE_DIR / folder / name
        if path.is_file():
            return path.read_text("utf-8")
    raise AssertionError(f"no sample document {name}")


def test_handbook_gold_is_in_the_documents() -> None:
    questions = load_questions(FROZEN / "handbook.jsonl")
    assert len(questions) >= 80
    counts = Counter(q.category for q in questions)
    assert counts["close-unanswerable"] >= 20 and counts["off-topic"] >= 10
    for category in ("colloquial", "abbreviation", "typo", "multi-part", "follow-up"):
        assert counts[category] >= 5, category
    for q in questions:
        if not q.answerable:
            assert not (q.gold_docs or q.gold_passages or q.keywords), q.id
            continue
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


def test_law_gold_articles_exist(corpus_dir: Path) -> None:
    questions = load_questions(FROZEN / "laws.jsonl")
    assert len(questions) >= 40
    assert sum(not q.answerable for q in questions) >= 3
    articles: dict[str, set[str]] = {}
    for q in questions:
        assert q.answerable == bool(q.gold_articles), q.id
        assert "第" not in q.question or "条" not in q.question, q.id  # no article numbers
        for gold in q.gold_articles:
            if gold.doc not in articles:
                text = (corpus_dir / "laws" / gold.doc).read_text("utf-8")
                articles[gold.doc] = set(chunk_articles(text))
            assert gold.article in articles[gold.doc], (q.id, gold)
