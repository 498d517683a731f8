"""The KnowledgeStore contract: one suite every store implementation passes (haystack style).

Subclass :class:`KnowledgeStoreContract` in a pytest module and provide two fixtures:

- ``store``: an open store holding the contract corpus (:func:`gcite.testing.corpus.write_mixed`
  ingested with :data:`~gcite.testing.corpus.MANIFEST` as dataset :data:`DATASET`);
- ``reopen``: a function opening another store on the same knowledge base, sharing
  ``store``'s handle (for :class:`~gcite.knowledge.store.HybridStore`: through the same
  :class:`~gcite.knowledge.store.StoreHandles`).

Nothing here knows which index runs underneath. Needs pytest (the ``testing`` extra).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest

from gcite.errors import FilterError, StoreError
from gcite.knowledge import KnowledgeStore
from gcite.testing.corpus import DATASET

RESTRICTED = {"电梯维保规程": "运维工程师", "园区消防巡查制度": "安保主管"}


def _normaliser(store: Any) -> Callable[..., str]:
    """The store's ``normalise_query`` (a store without one normalises only inside its
    searches: the test is skipped)."""
    normalise = getattr(store, "normalise_query", None)
    if normalise is None:
        pytest.skip("the store has no normalise_query")
    return cast("Callable[..., str]", normalise)


def _titles(items: list[dict[str, Any]]) -> set[str]:
    return {i["metadata"]["doc_metadata"].get("document_title") for i in items}


class KnowledgeStoreContract:
    """Behaviour of :class:`gcite.knowledge.KnowledgeStore`, whatever the backend."""

    def test_satisfies_the_protocol(self, store: Any) -> None:
        assert isinstance(store, KnowledgeStore)

    def test_result_items_have_dify_shape_ranked_by_score(self, store: Any) -> None:
        items = store.search("电梯维保记录", roles=None, top_k=3)
        assert 1 <= len(items) <= 3
        assert [i["metadata"]["position"] for i in items] == list(range(1, len(items) + 1))
        scores = [i["metadata"]["score"] for i in items]
        assert scores == sorted(scores, reverse=True)
        assert all(0.0 <= s <= 1.0 for s in scores)
        top = items[0]
        assert top["metadata"]["_source"] == "knowledge"
        assert top["metadata"]["dataset_name"] == DATASET
        assert top["title"] == top["metadata"]["document_name"]
        assert "电梯" in top["content"]
        assert set(top) == {"metadata", "title", "files", "content"}

    def test_top_k_and_threshold(self, store: Any) -> None:
        assert len(store.search("管理", roles=None, top_k=1)) == 1
        high = store.search("管理", roles=None, top_k=10, score_threshold=0.99)
        assert all(i["metadata"]["score"] >= 0.99 for i in high)

    def test_a_homophone_typo_finds_what_the_word_finds(self, store: Any) -> None:
        # 维宝 (a pinyin-input slip for 维保, a word of the documents) is searched as 维保
        right = store.search("维保记录由谁签字", roles=None, top_k=1)
        typo = store.search("维宝记录由谁签字", roles=None, top_k=1)
        assert right and typo and typo[0]["content"] == right[0]["content"]
        assert typo[0]["metadata"]["score"] == right[0]["metadata"]["score"]

    @pytest.mark.parametrize(
        ("query", "restricted"),
        [
            ("防火巡察", "防火巡查"),  # a homophone typo of a word of 园区消防巡查制度 only
            ("巡记保存几年", "巡查记录保存几年"),  # a short form of one of its words
        ],
    )
    def test_a_restricted_documents_words_rewrite_only_its_readers_questions(
        self, store: Any, query: str, restricted: str
    ) -> None:
        """The query vocabulary a question is normalised with holds the words of the
        documents the caller may see (the search's role rule), no others."""
        normalise = _normaliser(store)
        assert normalise(query, roles=["安保主管"]) == restricted
        assert normalise(query, roles=["安保主管", "运维工程师"]) == restricted
        assert normalise(query, roles=None) == restricted  # internal callers: every word
        assert normalise(query, roles=[]) == query
        assert normalise(query, roles=["运维工程师"]) == query

    def test_a_public_documents_words_rewrite_every_question(self, store: Any) -> None:
        normalise = _normaliser(store)
        for roles in (None, [], ["运维工程师"], ["没有这个角色"]):
            assert normalise("水相多久清洗", roles=roles) == "水箱多久清洗"

    def test_a_search_normalises_with_the_callers_documents_only(self, store: Any) -> None:
        """A search scores the question in the wording of the documents the caller may
        see: a short form of a restricted document's word is expanded for its readers
        (the public hits score as for the long form) and for no one else (they score as
        for the question asked)."""

        def scores(query: str, roles: list[str]) -> list[tuple[str, float]]:
            items = store.search(query, roles=roles, top_k=5)
            return [(i["content"], i["metadata"]["score"]) for i in items]

        short, long = "巡记 停车场", "巡查记录 停车场"
        assert scores(short, ["安保主管"]) == scores(long, ["安保主管"])
        without = scores(short, [])
        assert without  # the public parking rules
        assert without != scores(long, [])

    def test_blank_query_finds_nothing(self, store: Any) -> None:
        assert store.search("   ", roles=None) == []

    @pytest.mark.parametrize(
        ("roles", "visible"),
        [
            ([], set()),
            (["运维工程师"], {"电梯维保规程"}),
            (["安保主管", "运维工程师"], {"电梯维保规程", "园区消防巡查制度"}),
        ],
    )
    def test_roles_hide_restricted_documents(
        self, store: Any, roles: list[str], visible: set[str]
    ) -> None:
        found = _titles(store.search("电梯 巡查 停车 水箱", roles=roles, top_k=50))
        assert found & set(RESTRICTED) == visible
        assert "停车场管理办法" in found  # public documents stay visible

    def test_condition_narrows(self, store: Any) -> None:
        condition = {"name": "year", "comparison_operator": "≥", "value": 2019}
        items = store.search("管理 制度 规程", roles=None, condition=condition, top_k=50)
        assert items
        assert all(int(i["metadata"]["doc_metadata"]["year"]) >= 2019 for i in items)

    def test_malformed_condition_and_roles_raise_filter_error(self, store: Any) -> None:
        with pytest.raises(FilterError):
            store.search("停车", condition={"name": "year", "comparison_operator": "~~"})
        with pytest.raises(FilterError):
            store.search("停车", roles="运维工程师")

    def test_unknown_dataset_raises_store_error(self, store: Any) -> None:
        with pytest.raises(StoreError):
            store.search("停车", dataset="没有这个库")

    def test_datasets(self, store: Any) -> None:
        assert store.datasets() == [DATASET]

    def test_visible_document_ids(self, store: Any) -> None:
        ids = {
            i["metadata"]["doc_metadata"].get("document_title"): i["metadata"]["document_id"]
            for i in store.search("电梯 巡查 停车 水箱", roles=None, top_k=50)
        }
        everything = [*ids.values(), "no-such-document", ""]
        public = {d for t, d in ids.items() if t not in RESTRICTED}
        assert store.visible_document_ids(everything, roles=[]) == public
        assert store.visible_document_ids(everything, roles=["运维工程师"]) == public | {
            ids["电梯维保规程"]
        }
        assert store.visible_document_ids(everything, roles=[], dataset="别的库") == set()

    def test_close_is_idempotent_and_final(self, reopen: Callable[[], Any], store: Any) -> None:
        other = reopen()
        assert other.search("停车", roles=None)
        other.close()
        other.close()
        with pytest.raises(StoreError):
            other.search("停车", roles=None)
        assert store.search("停车", roles=None)  # the shared handle stays open for others


__all__ = ["DATASET", "RESTRICTED", "KnowledgeStoreContract"]
