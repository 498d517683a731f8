"""The rerank client (Jina / Cohere / Xinference protocol) against a loopback stand-in,
and the store's optional rerank step."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gcite.config import Settings
from gcite.knowledge import ingest_paths, open_store
from gcite.knowledge.rerank import RerankClient, RerankError
from support.rerank_standin import RerankStandin


@pytest.fixture
def standin() -> Iterator[RerankStandin]:
    with RerankStandin() as server:
        yield server


def test_client_speaks_the_rerank_protocol(standin: RerankStandin) -> None:
    client = RerankClient(standin.url, "jina-reranker-v2", "secret", timeout_s=120)  # hang guard
    docs = ["电梯年检", "消防设施每年检测", "访客登记"]
    assert [i for i, _ in client.rerank("消防检测", docs, top_n=2)] == [1, 0]
    sent = standin.requests[-1]
    assert sent == {
        "model": "jina-reranker-v2",
        "query": "消防检测",
        "documents": docs,
        "top_n": 2,
        "return_documents": False,
    }
    assert standin.headers[-1]["Authorization"] == "Bearer secret"
    assert client.rerank("x", [], top_n=3) == []
    client.close()


@pytest.mark.parametrize("mode", ["500", "garbage", "bad-index", "slow"])
def test_client_failures_raise_rerank_error(standin: RerankStandin, mode: str) -> None:
    standin.mode = mode
    client = RerankClient(standin.url, timeout_s=0.5)
    with pytest.raises(RerankError):
        client.rerank("消防", ["a", "b"], top_n=2)
    client.close()


def test_unreachable_endpoint_raises(standin: RerankStandin) -> None:
    client = RerankClient(standin.url.replace("/v1/rerank", "/nope"), timeout_s=120)
    with pytest.raises(RerankError, match="HTTP 404"):
        client.rerank("消防", ["a"], top_n=1)


def test_store_reorders_by_the_reranker_and_falls_back_on_failure(
    standin: RerankStandin, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in {
        "fire.md": "# 消防\n\n消防设施每年至少全面检测一次，检测记录存档备查。",
        "lift.md": "# 电梯\n\n电梯每十五日进行一次清洁、润滑、调整和检查。",
        "visit.md": "# 访客\n\n访客须在前台登记并佩戴访客证。",
    }.items():
        (docs / name).write_text(text, encoding="utf-8")
    base = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    ingest_paths([docs], settings=base, dataset="d")
    with open_store(base) as plain:
        expected = [i["title"] for i in plain.search("消防设施检测", top_k=3, score_threshold=0)]
    assert expected[0] == "fire.md"
    standin.mode = "reverse"
    settings = Settings.from_keys(
        data_dir=base.data_dir, embed_backend="use", rerank_url=standin.url, rerank_model="m"
    )
    with open_store(settings) as store:
        items = store.search("消防设施检测", top_k=3, score_threshold=0)
        assert [i["title"] for i in items] == expected[::-1]  # the reranker's order
        assert [i["metadata"]["score"] for i in items] == [1.0, 0.99, 0.98]
        assert standin.requests[-1]["query"] == "消防设施检测"
        standin.mode = "500"  # a failing reranker: gcite's own order and scores
        assert [i["title"] for i in store.search("消防设施检测", top_k=3, score_threshold=0)] == (
            expected
        )
