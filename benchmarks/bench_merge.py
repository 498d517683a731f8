"""Merge node: time per call against the seed's Appendix A function, 5+5 … 1,000+1,000 chunks.

The baseline is read from the platform design document (../shared/seeds/000_*.txt,
"附录 A") at run time and executed as written, except that its ``MAX_WEB_RESULTS``
(2) is lifted so both sides merge every chunk. Ours is measured twice:
``merge_chunks`` (the library) and ``code_node_outputs`` (merge + Dify limit
fitting, what the exported Code node runs).

Run: ``.venv/bin/python benchmarks/bench_merge.py [--shared DIR] [--repeats N]``.
Prints a Markdown table (median time per call; ratio ours / baseline).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from gcite.merge import code_node_outputs, merge_chunks

REPO = Path(__file__).resolve().parent.parent
SIZES = (5, 50, 200, 1000, 5000)  # chunks per source


def load_seed_node(shared: Path) -> Callable[[Any, Any], dict[str, Any]]:
    """Exec the Appendix A code block of the platform design seed; return its ``main``."""
    seeds = sorted((shared / "seeds").glob("000_*.txt"))
    if not seeds:
        raise SystemExit(f"platform design seed not found under {shared / 'seeds'}")
    text = seeds[0].read_text(encoding="utf-8")
    appendix = text[text.index("附录 A. Chunk编号代码节点源码") :]
    lines = appendix.splitlines()
    start = lines.index("python") + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("文档版本"))
    namespace: dict[str, Any] = {"__name__": "seed_appendix_a"}
    exec(compile("\n".join(lines[start:end]), str(seeds[0]), "exec"), namespace)
    namespace["MAX_WEB_RESULTS"] = 10**9  # merge every web chunk, like ours
    main: Callable[[Any, Any], dict[str, Any]] = namespace["main"]
    return main


def make_inputs(n: int, seed: int = 1) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``n`` Knowledge Retrieval items (Dify 1.x shape) and a Baidu search node output of ``n``."""
    rng = random.Random(seed)
    rag = [
        {
            "metadata": {
                "_source": "knowledge",
                "dataset_id": "ds-1",
                "dataset_name": "测试知识库20260610",
                "document_id": f"doc-{i % 37}",
                "document_name": f"文档{i % 37}.md",
                "segment_id": f"seg-{i}",
                "score": round(rng.random(), 4),
                "segment_position": i % 50,
                "doc_metadata": {
                    "document_title": f"巡更操作指南 第{i % 37}册",
                    "source_file_url": f"oss://kb-raw/2026/06/{i % 37}.pdf",
                },
                "position": i + 1,
            },
            "title": f"文档{i % 37}.md",
            "content": f"巡更人员执行巡检计划时需先进入巡更功能项，第 {i} 段。" * 4,
        }
        for i in range(n)
    ]
    references = [
        {
            "id": i + 1,
            "url": f"https://www.site{i % 23}.example.com/article/{i}",
            "title": f"物业巡检流程标准 {i}",
            "date": "2025-08-12 21:47:05",
            "content": f"物业巡检一般分为日常巡检、专项巡检、应急巡检三类，结果 {i}。" * 4,
            "web_anchor": f"站点{i % 23}",
            "website": f"www.site{i % 23}.example.com",
            "type": "web",
            "authority_score": round(rng.random(), 4),
            "rerank_score": round(rng.random(), 4),
        }
        for i in range(n)
    ]
    return rag, [{"references": references, "request_id": f"bench-{n}"}]


def medians_per_call(
    funcs: list[Callable[[], Any]], repeats: int, budget_s: float = 0.1
) -> list[float]:
    """Median seconds per call of each function; rounds interleave them (fair under load)."""
    calls = []
    for func in funcs:
        func()
        start = time.perf_counter()
        func()
        calls.append(max(1, int(budget_s / max(time.perf_counter() - start, 1e-7))))
    rounds: list[list[float]] = [[] for _ in funcs]
    for _ in range(repeats):
        for func, n, times in zip(funcs, calls, rounds, strict=True):
            start = time.perf_counter()
            for _ in range(n):
                func()
            times.append((time.perf_counter() - start) / n)
    return [statistics.median(times) for times in rounds]


def machine() -> str:
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in subprocess.run(
                ["lscpu"], capture_output=True, text=True, check=False
            ).stdout.splitlines()
            if line.startswith("Model name")
        )
    except StopIteration:
        model = platform.processor() or "unknown CPU"
    return f"{model}, nproc={os.cpu_count()}, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--repeats", type=int, default=11)
    args = parser.parse_args()
    baseline = load_seed_node(args.shared)

    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; machine: {machine()}")
    print()
    print(
        "| chunks (rag+web) | seed Appendix A | merge_chunks | ratio | "
        "code_node_outputs | ratio | merge_chunks per chunk |"
    )
    print("|---|---|---|---|---|---|---|")
    for n in SIZES:
        rag, web = make_inputs(n)
        ours = merge_chunks(rag, web)
        seed = baseline(rag, web)
        assert ours["chunk_count"] == seed["chunk_count"] == 2 * n, (n, ours["chunk_count"])
        t_seed, t_merge, t_node = medians_per_call(
            [
                partial(baseline, rag, web),
                partial(merge_chunks, rag, web),
                partial(code_node_outputs, rag, web),
            ],
            args.repeats,
        )
        print(
            f"| {n}+{n} | {t_seed * 1e6:,.1f} µs | {t_merge * 1e6:,.1f} µs | "
            f"{t_merge / t_seed:.2f}× | {t_node * 1e6:,.1f} µs | {t_node / t_seed:.2f}× | "
            f"{t_merge / (2 * n) * 1e6:.2f} µs |"
        )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
