"""The relevance score (gcite.knowledge.relevance) and the retrieval acceptance figures.

Pure properties (0-1, monotone, query independent) and, on the law corpus, the issue's
acceptance: recall@5 >= 0.85 on the answerable development questions with the default
offline configuration, and no chunk at or above the default threshold for >= 90 % of the
off-topic development questions (benchmarks/data/offtopic.dev.jsonl).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gcite.config import Settings
from gcite.knowledge.relevance import (
    CALIBRATIONS,
    DEFAULT_THRESHOLD,
    LEXICAL_ONLY,
    calibration_for,
    lexical_coverage,
    relevance,
)
from gcite.knowledge.sparse import query_terms, query_vector, query_weights, token_id, tokenize

REPO = Path(__file__).resolve().parents[2]
OFFTOPIC = REPO / "benchmarks" / "data" / "offtopic.dev.jsonl"
USE = CALIBRATIONS["use"]
unit = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)
share = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(unit, unit, share, share)
def test_relevance_is_a_monotone_0_1_score(d1: float, d2: float, l1: float, l2: float) -> None:
    low = relevance(min(d1, d2), min(l1, l2), USE)
    high = relevance(max(d1, d2), max(l1, l2), USE)
    assert 0.0 <= low <= high <= 1.0


def test_relevance_handles_missing_and_nan_evidence() -> None:
    assert relevance(None, 0.0, USE) == relevance(0.0, 0.0, USE)
    assert relevance(float("nan"), float("nan"), USE) == relevance(0.0, 0.0, USE)
    assert relevance(5.0, 7.0, USE) == relevance(1.0, 1.0, USE)  # clamped
    assert not math.isnan(relevance(1.0, 1.0, LEXICAL_ONLY))


def test_unknown_embedders_fall_back_to_lexical_evidence_only() -> None:
    assert calibration_for("use") is USE
    fallback = calibration_for("openai:bge-m3")
    assert fallback is LEXICAL_ONLY and fallback.w_dense == 0.0
    assert relevance(0.99, 0.0, fallback) < DEFAULT_THRESHOLD < relevance(0.0, 0.8, fallback)


def test_settings_default_threshold_is_the_calibrated_boundary() -> None:
    assert Settings().knowledge.score_threshold == DEFAULT_THRESHOLD


def test_lexical_coverage_weighs_query_terms_by_idf() -> None:
    weights = query_weights("消防设施需要多久检测一次")
    chunk = {token_id(t) for t in tokenize("建筑消防设施每年至少进行一次全面检测")}
    filler = {token_id(t) for t in tokenize("我们需要多久")}
    assert lexical_coverage(weights, chunk) > 0.5 > lexical_coverage(weights, filler)
    assert lexical_coverage({}, chunk) == 0.0
    assert lexical_coverage(weights, set()) == 0.0


@pytest.mark.parametrize(
    "text",
    ["消防设施需要多久检测一次", "设备EQ-000123坏了，按GB50016-2014处理", "的了吗", "", "a a b"],
)
def test_query_terms_are_the_query_vector_and_weights(text: str) -> None:
    """One tokenisation gives what query_vector and query_weights give separately."""
    sparse, weights = query_terms(text)
    assert sparse == query_vector(text)
    assert weights == query_weights(text)
    assert list(weights) == list(query_weights(text))  # same order: the same float sums
    assert sorted(weights) == sparse.indices


def test_codes_are_tokens_of_their_own() -> None:
    tokens = tokenize("设备编号EQ-000123，规范GB50016-2014，版本v2.1")
    assert {"eq-000123", "gb50016-2014", "v2.1"} <= set(tokens)
    assert "eq-004306" not in tokens


# --------------------------------------------------------------------------- on the corpus


def _rows(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _article_recall(row: dict[str, Any], items: list[dict[str, Any]]) -> float:
    got = {
        (i["metadata"]["document_name"], a)
        for i in items
        for a in i["metadata"].get("_articles", [])
    }
    gold = [(g["doc"], g["article"]) for g in row["gold"]]
    alts = [(g["doc"], g["article"]) for g in row["alt_gold"]]
    found = sum(g in got for g in gold)
    return (found + min(len(gold) - found, sum(a in got for a in alts))) / len(gold)


@pytest.mark.corpus
def test_dev_questions_recall_at_5_and_off_topic_share(law_store: Any) -> None:
    """The acceptance figures, measured through HybridStore.hits with default settings."""
    store = law_store.store
    rows = _rows(law_store.corpus_dir / "laws-qa.dev.jsonl")
    answerable = [r for r in rows if r["gold"]]
    assert len(answerable) >= 20
    recalls = []
    for row in answerable:
        hits = store.hits(row["question"], top_k=5)
        items = [
            {
                "metadata": {
                    "document_name": h.payload["document_name"],
                    "_articles": h.payload.get("articles", []),
                }
            }
            for h in hits
        ]
        recalls.append(_article_recall(row, items))
    recall_at_5 = sum(recalls) / len(recalls)
    assert recall_at_5 >= 0.85, recall_at_5

    off = _rows(OFFTOPIC)
    assert len(off) >= 30
    threshold = Settings().knowledge.score_threshold
    empty = [r for r in off if not store.search(r["question"], top_k=5, score_threshold=threshold)]
    assert len(empty) / len(off) >= 0.9, [r["question"] for r in off if r not in empty]


@pytest.mark.corpus
def test_scores_mean_the_same_across_queries(law_store: Any) -> None:
    store = law_store.store
    nonsense = store.search("xyzzy", top_k=3, score_threshold=0.0)
    canteen = store.search("大厦食堂周五的特价菜是什么？", top_k=3, score_threshold=0.0)
    real = store.search("建筑消防设施多久做一次全面检测？检测记录怎么处理？", top_k=3)
    assert all(i["metadata"]["score"] < DEFAULT_THRESHOLD for i in nonsense + canteen)
    assert real and real[0]["metadata"]["score"] >= DEFAULT_THRESHOLD
    # the score of a chunk does not depend on what else the query returns
    deeper = store.search("建筑消防设施多久做一次全面检测？检测记录怎么处理？", top_k=20)
    assert deeper[0]["metadata"]["segment_id"] == real[0]["metadata"]["segment_id"]
    assert deeper[0]["metadata"]["score"] == pytest.approx(real[0]["metadata"]["score"])
