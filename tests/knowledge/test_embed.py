"""The OpenAI-compatible embeddings backend against a real loopback server, and chunking rules."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx
import pytest

from gcite.config import EmbedSettings, Settings
from gcite.errors import ConfigError, StoreError
from gcite.knowledge import ingest_paths, open_store
from gcite.knowledge.chunking import chunk_text, split_sentences
from gcite.knowledge.embed import EmbeddingError, OpenAIEmbedder, make_embedder

from .embed_standin import DIM, EmbeddingStandin


def test_openai_endpoint_end_to_end(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("电梯每十五日至少进行一次维护保养。", encoding="utf-8")
    (docs / "b.txt").write_text("地下停车场禁止存放易燃易爆物品。", encoding="utf-8")
    with EmbeddingStandin() as server:
        settings = Settings.from_keys(
            data_dir=tmp_path / "data",
            embed_backend="openai",
            embed_base_url=server.base_url,
            embed_model="bigram-64",
            embed_api_key="sk-test",
        )
        report = ingest_paths([docs], settings=settings, dataset="d")
        assert report.added == 2 and not report.failed
        assert all(r["model"] == "bigram-64" for r in server.requests)
        with open_store(settings) as store:
            assert store.search("电梯维护保养", top_k=1)[0]["title"] == "a.txt"
            assert store.catalog.embedder == "openai:bigram-64" and store.catalog.dim == DIM
            server.mode = "500"
            with pytest.raises(StoreError, match="HTTP 500"):
                store.search("停车场")
        # another model on the same store is refused even for searching
        other = settings.with_keys(embed_model="other")
        with open_store(other) as store, pytest.raises(StoreError, match="openai:bigram-64"):
            store.search("停车场")


@pytest.mark.parametrize(
    ("mode", "message"), [("garbage", "格式无效"), ("short", "数量与输入不符"), ("500", "HTTP 500")]
)
def test_openai_endpoint_failures_are_clear(mode: str, message: str) -> None:
    with EmbeddingStandin() as server:
        embedder = OpenAIEmbedder(server.base_url, "m")
        server.mode = mode
        with pytest.raises(EmbeddingError, match=message):
            embedder.embed_documents(["一", "二"])


def test_openai_endpoint_timeout_and_refused() -> None:
    with EmbeddingStandin() as server:
        embedder = OpenAIEmbedder(server.base_url, "m", timeout_s=0.3)
        server.mode = "slow"
        with pytest.raises(EmbeddingError, match="请求失败"):
            embedder.embed_query("慢")
    with pytest.raises(EmbeddingError, match="请求失败"):
        OpenAIEmbedder("http://127.0.0.1:9/v1", "m", timeout_s=1)
    assert issubclass(EmbeddingError, StoreError)
    assert httpx  # the backend speaks plain HTTP through httpx


def test_embedder_configuration_errors() -> None:
    with pytest.raises(ConfigError, match="embed_base_url"):
        make_embedder(Settings.from_keys(embed_backend="openai"))
    with pytest.raises(ConfigError, match=r"embed_backend.*word2vec"):
        Settings.from_keys(embed_backend="word2vec")  # refused when read
    settings = Settings()
    unchecked = dataclasses.replace(settings, embed=EmbedSettings(backend="word2vec"))
    with pytest.raises(ConfigError, match="未知的嵌入后端"):
        make_embedder(unchecked)


# --------------------------------------------------------------------------- chunking


def test_articles_stay_whole_and_headings_stay_with_text() -> None:
    text = (
        "# 条例\n\n## 第一章 总则\n\n第一条 甲。\n\n第二条 乙。\n第二款内容。"
        "\n\n## 第二章 管理\n\n第三条 丙。"
    )
    chunks = chunk_text(text, chunk_size=100, chunk_overlap=10)
    assert [c.text for c in chunks] == [
        "条例 > 第一章 总则\n第一条 甲。\n第二条 乙。\n第二款内容。",
        "条例 > 第二章 管理\n第三条 丙。",
    ]
    assert chunks[0].articles == ["第一条", "第二条"] and chunks[1].position == 2


def test_long_articles_are_cut_at_sentence_ends_with_overlap() -> None:
    sentences = [f"第{i}句内容比较长一些。" for i in range(30)]
    text = "第十条 " + "".join(sentences)
    chunks = chunk_text(text, chunk_size=60, chunk_overlap=15)
    assert len(chunks) > 3
    for chunk in chunks:
        assert len(chunk.text) <= 60
        assert chunk.text.endswith("。")
        assert chunk.articles == ["第十条"]
    # the next piece starts with the previous piece's last sentence (overlap)
    last = split_sentences(chunks[0].text)[-1]
    assert chunks[1].text.startswith(last)


def test_an_article_that_fits_is_never_split_across_chunks() -> None:
    articles = [f"第{n}条 " + "规定内容。" * 8 for n in "一二三四五六"]
    chunks = chunk_text("\n".join(articles), chunk_size=100, chunk_overlap=20)
    for article in articles:
        assert sum(article in c.text for c in chunks) == 1


def test_chunk_settings_are_validated() -> None:
    with pytest.raises(ValueError):
        chunk_text("x", chunk_size=0)
    with pytest.raises(ValueError):
        chunk_text("x", chunk_size=10, chunk_overlap=10)
    assert chunk_text("   \n\n", chunk_size=10, chunk_overlap=0) == []
    giant = "无标点" * 1000
    assert all(len(c.text) <= 50 for c in chunk_text(giant, chunk_size=50, chunk_overlap=5))


def test_query_batcher_returns_every_caller_its_own_row_while_queries_keep_coming() -> None:
    """Concurrent query embeddings are batched, each caller gets the row of its own text,
    and none waits on the others' stream: a leader embeds one batch and passes the lead on
    (a leader that kept embedding while queries kept arriving held its caller for as long
    as the stream lasted)."""
    import threading
    import time

    from gcite.knowledge.embed import _QueryBatcher

    batches: list[int] = []
    calls = threading.local()  # the call under way in each caller thread
    led: dict[tuple[int, int], int] = {}  # (caller, call) -> batches it embedded

    def embed(texts: list[str]) -> list[str]:
        batches.append(len(texts))
        key = (getattr(calls, "n", -1), getattr(calls, "i", 0))
        led[key] = led.get(key, 0) + 1
        time.sleep(0.002)  # a forward pass
        return [t.upper() for t in texts]

    batcher = _QueryBatcher(embed)
    stop = time.monotonic() + 1.5  # how long queries keep coming; nothing is timed
    wrong: list[str] = []

    def caller(n: int) -> None:
        calls.n, calls.i = n, 0
        while time.monotonic() < stop:
            text = f"q{n}-{calls.i}"
            if batcher(text) != text.upper():
                wrong.append(text)
            calls.i += 1

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)  # a hang guard
    assert not wrong and not any(t.is_alive() for t in threads)
    # each call embeds at most one batch (its own query's) and then returns: a leader
    # that kept the lead would embed batch after batch for as long as queries came
    assert max(led.values()) == 1, max(led.values())
    assert max(batches) > 1  # queries were batched
    assert batcher("alone") == "ALONE"

    def failing(texts: list[str]) -> list[str]:
        raise RuntimeError("model failed")

    broken = _QueryBatcher(failing)
    with pytest.raises(RuntimeError, match="model failed"):
        broken("x")
    assert batcher("again") == "AGAIN"
