"""Cost of the web search sources (issue 5): client overhead and offline search latency.

1. **HTTP client overhead.** Median time of one ``BochaWebSearch.search`` (count
   5, the stand-in returns 10 results) against ``tests/support/web_standin.py``
   on 127.0.0.1, versus the baseline measured in the same run: a bare
   ``httpx.AsyncClient.post(...).json()`` of the same request to the same
   server. The ratio is what our retrying transport, streaming body read with
   size cap, deadline and payload checks cost on top of httpx.
2. **Offline source, bm25 index.** The law corpus (``../shared/corpus/laws``, 16 files, ~650
   KB) served as a folder of saved pages: index build time (median of 3 fresh
   builds) and median query latency over the questions of ``laws-qa.dev.jsonl``,
   versus the baseline of jieba-tokenising the same query (the part of a query
   no index can avoid).
3. **Offline source, hybrid index** (the default) on the bundled sample pages:
   the first search (ingestion and model load) and the median query, versus the
   bm25 index on the same pages and questions.

Run: ``.venv/bin/python benchmarks/bench_web.py [--calls 300]``. Prints a
Markdown block for docs/benchmarks.md. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
SHARED = Path(os.environ.get("GCITE_SHARED_DIR", REPO.parent / "shared")).resolve()
KEY = "bench-key"

from gcite.knowledge.sparse import tokenize  # noqa: E402
from gcite.web import BochaWebSearch  # noqa: E402
from gcite.web.offline import OfflineWebSource, PageIndex  # noqa: E402
from gcite.web.pages import load_pages  # noqa: E402
from support.web_standin import BOCHA_PATH, web_standin  # noqa: E402


def machine() -> str:
    cpus = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    model = ""
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    for line in lscpu.splitlines():
        if line.startswith("Model name:"):
            model = line.split(":", 1)[1].strip()
    return f"{cpus} CPUs, {model or platform.processor()}, Python {platform.python_version()}"


def ms(values: list[float]) -> float:
    return statistics.median(values) * 1000.0


async def client_overhead(calls: int) -> tuple[float, float]:
    with web_standin(api_key=KEY, results=10) as server:
        source = BochaWebSearch(KEY, base_url=server.base_url, timeout_s=5.0)
        body = source.build_body("写字楼消防检查", 5)
        headers = {"Authorization": f"Bearer {KEY}"}
        ours: list[float] = []
        bare: list[float] = []
        async with httpx.AsyncClient(headers=headers, trust_env=False) as client:
            for _ in range(20):  # warm up both connection pools
                await source.search("写字楼消防检查", count=5)
                (await client.post(server.base_url + BOCHA_PATH, json=body)).json()
            for _ in range(calls):  # interleaved, so drift hits both alike
                start = time.perf_counter()
                payload = await source.search("写字楼消防检查", count=5)
                ours.append(time.perf_counter() - start)
                start = time.perf_counter()
                raw = (await client.post(server.base_url + BOCHA_PATH, json=body)).json()
                bare.append(time.perf_counter() - start)
        await source.aclose()
        assert len(payload["data"]["webPages"]["value"]) == 5
        assert len(raw["data"]["webPages"]["value"]) == 10
    return ms(ours), ms(bare)


async def offline(queries: list[str]) -> tuple[float, float, float, int]:
    folder = SHARED / "corpus" / "laws"
    builds = []
    for _ in range(3):
        start = time.perf_counter()
        index = PageIndex(load_pages(folder), passage_chars=600)
        builds.append(time.perf_counter() - start)
    source = OfflineWebSource(folder, timeout_s=60, index="bm25")
    await source.search("消防", count=5)  # build once
    searched: list[float] = []
    tokenized: list[float] = []
    for query in queries:
        start = time.perf_counter()
        await source.search(query, count=5)
        searched.append(time.perf_counter() - start)
        start = time.perf_counter()
        tokenize(query)
        tokenized.append(time.perf_counter() - start)
    await source.aclose()
    return ms(builds), ms(searched), ms(tokenized), len(index._passages)


async def hybrid_vs_bm25(queries: list[str]) -> tuple[float, float, float]:
    """Offline source on the bundled sample pages: hybrid (default) vs bm25, same queries."""
    import tempfile

    from gcite.config import Settings

    folder = REPO / "src" / "gcite" / "sample_data" / "web"
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.from_keys(data_dir=Path(tmp), web_timeout_s=600)
        hybrid = OfflineWebSource(folder, settings=settings, index="hybrid")
        start = time.perf_counter()
        await hybrid.search("消防", count=3)  # ingest + load the model
        first = time.perf_counter() - start
        light = OfflineWebSource(folder, settings=settings, index="bm25")
        await light.search("消防", count=3)
        h: list[float] = []
        b: list[float] = []
        for query in queries:
            start = time.perf_counter()
            await hybrid.search(query, count=3)
            h.append(time.perf_counter() - start)
            start = time.perf_counter()
            await light.search(query, count=3)
            b.append(time.perf_counter() - start)
        await hybrid.aclose()
        await light.aclose()
    return first * 1000.0, ms(h), ms(b)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()

    ours, bare = await client_overhead(args.calls)
    qa = SHARED / "corpus" / "laws-qa.dev.jsonl"
    lines = [json.loads(x) for x in qa.read_text(encoding="utf-8").splitlines() if x.strip()]
    queries = [str(x["question"]) for x in lines]
    build, search, token, passages = await offline(queries)
    first, hybrid, light = await hybrid_vs_bm25(queries)
    load = os.getloadavg()[0]

    print(f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; machine: {machine()}")
    print(f"- command: `.venv/bin/python benchmarks/bench_web.py --calls {args.calls}`")
    print(f"- 1-minute load average at the end: {load:.1f} (the machine is shared)")
    print()
    print("| measurement | median | baseline (same run) | ratio |")
    print("|---|---|---|---|")
    print(
        f"| `BochaWebSearch.search`, loopback stand-in, {args.calls} calls | {ours:.2f} ms "
        f"| bare `httpx` post + `.json()`: {bare:.2f} ms | {ours / bare:.2f}× |"
    )
    print(
        f"| offline query, law corpus ({passages} passages), {len(queries)} questions "
        f"| {search:.2f} ms | jieba tokenising the query: {token:.3f} ms "
        f"| {search / token:.0f}× |"
    )
    print(f"| offline index build (bm25), law corpus | {build:.0f} ms | — | — |")
    print(
        f"| offline query, hybrid index, sample pages, {len(queries)} questions | {hybrid:.2f} ms "
        f"| bm25 index, same pages and questions: {light:.2f} ms | {hybrid / light:.1f}× |"
    )
    print(f"| offline first search, hybrid (ingest + model load) | {first:.0f} ms | — | — |")


if __name__ == "__main__":
    asyncio.run(main())
