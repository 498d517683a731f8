"""Measure one ingest's memory in a fresh process (run by ``test_documents.py`` as a script).

``python ingest_memory.py <chars> <embed_base_url> [--whole-file] [--write-batch N]``
prints one JSON line::

    {"chunks", "before", "peak", "retained", "progress", "writes"}

The process first ingests a 50,000-character file into another data directory (a warm-up:
the tokeniser, the HTTP client and Qdrant Edge's first-write allocations are one-off
costs), then opens the measured store, resets the peak RSS (``/proc/self/clear_refs``),
and ingests a generated ``.txt`` file of ``<chars>`` characters with the progress bar on:

* ``before``: RSS just before the measured ingest;
* ``peak``: the peak RSS during it (``VmHWM``);
* ``retained``: RSS afterwards, with the shard still open and freed memory given back
  (``gc.collect()``, ``malloc_trim``): what the store keeps for the new points.
  ``peak - retained`` is then the pipeline's working memory (file text, chunks, vectors
  and points in flight);
* ``progress``: the progress bar's (completed, total, chunks) after every update;
* ``writes``: the number of points of each store write, in order.

``--whole-file`` reproduces the round-1 pipeline for comparison: the text is read whole
and every chunk embedded and written in one batch. ``--write-batch`` overrides
:data:`~gcite.knowledge.ingest.WRITE_BATCH`.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

SENTENCE = "第{n}项：地下车库排水泵每月检查一次浮球开关，发现异常立即报修并记录。"


def write_text(path: Path, chars: int) -> None:
    """About ``chars`` characters of distinct numbered Chinese sentences, one per line."""
    with path.open("w", encoding="utf-8") as fh:
        total = n = 0
        while total < chars:
            line = SENTENCE.format(n=n) + "\n"
            fh.write(line)
            total += len(line)
            n += 1


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def _release() -> None:
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("chars", type=int)
    parser.add_argument("url")
    parser.add_argument("--whole-file", action="store_true")
    parser.add_argument("--write-batch", type=int)
    args = parser.parse_args()

    from rich.progress import Progress

    from gcite.config import Settings
    from gcite.knowledge import ingest, open_store
    from gcite.knowledge.store import HybridStore

    if args.whole_file:
        ingest.TEXT_SUFFIXES = frozenset()  # type: ignore[misc]  # convert_file: read whole
        ingest.EMBED_BATCH = ingest.WRITE_BATCH = 10**9  # type: ignore[misc]
    elif args.write_batch:
        ingest.WRITE_BATCH = args.write_batch  # type: ignore[misc]

    writes: list[int] = []  # points per store write
    add_points = HybridStore.add_points

    def add(self: HybridStore, points: Any) -> None:
        if points:
            writes.append(len(points))
        add_points(self, points)

    HybridStore.add_points = add  # type: ignore[method-assign]

    progress: list[tuple[float, float | None, int]] = []
    update = Progress.update

    def record(self: Any, *args: Any, **kwargs: Any) -> None:
        update(self, *args, **kwargs)
        for task in self.tasks:
            progress.append((task.completed, task.total, int(task.fields.get("chunks", 0))))

    Progress.update = record  # type: ignore[method-assign]

    tmp = Path(tempfile.mkdtemp())

    def settings(name: str) -> Settings:
        return Settings.from_keys(
            data_dir=tmp / name, embed_backend="openai", embed_base_url=args.url, embed_model="m"
        )

    write_text(tmp / "warm.txt", 50_000)
    ingest.ingest_paths([tmp / "warm.txt"], settings=settings("warm"), dataset="d")
    write_text(tmp / "big.txt", args.chars)
    held = open_store(settings("big"), create=True)  # keeps the shard open after the ingest
    _release()
    progress.clear()
    writes.clear()
    Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
    before = _status("VmRSS")
    report = ingest.ingest_paths(
        [tmp / "big.txt"], settings=settings("big"), dataset="d", progress=True
    )
    peak = _status("VmHWM")
    _release()
    retained = _status("VmRSS")
    held.close()
    assert report.ok and report.added == 1, report
    result = {
        "chunks": report.chunks,
        "before": before,
        "peak": peak,
        "retained": retained,
        "progress": progress,
        "writes": writes,
    }
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
