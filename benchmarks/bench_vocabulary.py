"""CPU and memory of building a store's query vocabulary: every document's, and a role set's.

Run on demand, not in the test suite::

    .venv/bin/python benchmarks/bench_vocabulary.py DATA_DIR [DATA_DIR ...]
        [--roles "" --roles 物业经理 ...] [--rounds 5] [--out FILE]

``DATA_DIR``: a data dir ``gcite ingest`` wrote (Qdrant Edge), e.g. the law corpus
(``gcite ingest ../shared/corpus/laws --manifest ../shared/corpus/laws.meta.json`` into a
fresh ``GCITE_DATA_DIR``) or the sample handbook. For each data dir and each round, a new
store (a new handle: nothing cached) builds the vocabulary of every document
(``vocabulary(roles=None)``, what ingestion builds and writes the pinyin keys file from),
then the vocabulary of each role set (``--roles``: comma-separated roles, ``""`` for a
caller without roles; default: no roles, and each role the documents name alone) - each
with the keys file as ``gcite ingest`` left it (``warm``) and, once per round, without it
(``cold``: every word keyed by ``pypinyin``; the file is put back after). CPU is
``time.thread_time`` of the building thread, after one untimed build loaded jieba and
``pypinyin``. Memory: ``tracemalloc``'s size of what one vocabulary keeps (built, its
lookups not yet filled). Reported: the median per build, the documents and words each
vocabulary holds; the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from bench_scale import loadavg


def role_sets(data_dir: Path) -> list[list[str]]:
    """No roles, then each role a document of ``data_dir`` names, alone."""
    catalog = json.loads((data_dir / "catalog.json").read_text("utf-8"))
    names: set[str] = set()
    for entry in catalog["datasets"].values():
        for info in entry["documents"].values():
            roles = (info.get("doc_metadata") or {}).get("access_roles") or []
            names.update(r for r in roles if isinstance(r, str))
    return [[], *([r] for r in sorted(names))]


def build(data_dir: Path, roles: list[str] | None) -> tuple[float, Any]:
    """Thread CPU seconds of a new store's ``vocabulary(roles)``, and the vocabulary."""
    from gcite.config import Settings
    from gcite.knowledge import open_store

    settings = Settings.from_keys(data_dir=data_dir)
    with open_store(settings) as store:
        started = time.thread_time()
        vocabulary = store.vocabulary(roles)
        return time.thread_time() - started, vocabulary


def kept_bytes(data_dir: Path, roles: list[str] | None) -> int:
    """What one built vocabulary of ``roles`` keeps (tracemalloc, keys file read)."""
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    _, vocabulary = build(data_dir, roles)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    size = sum(s.size_diff for s in after.compare_to(before, "filename"))
    del vocabulary
    return size


def measure(data_dir: Path, sets: list[list[str] | None], rounds: int) -> dict[str, Any]:
    from gcite.knowledge.sounds import SOUNDS_NAME

    sounds = data_dir / SOUNDS_NAME
    spare = data_dir / (SOUNDS_NAME + ".bench")
    build(data_dir, None)  # jieba, pypinyin, the keys file (written when missing)
    shutil.copy2(sounds, spare)
    rows: dict[str, dict[str, Any]] = {}
    try:
        for _ in range(rounds):
            for roles in sets:
                name = "all" if roles is None else ",".join(roles) or "(none)"
                row = rows.setdefault(name, {"warm": [], "cold": []})
                spent, vocabulary = build(data_dir, roles)
                row["warm"].append(spent)
                row["words"] = len(vocabulary.counts)
                row["short_words"] = sum(len(v) for v in vocabulary.by_sound.values())
                sounds.unlink()
                spent, _ = build(data_dir, roles)
                row["cold"].append(spent)
                shutil.copy2(spare, sounds)
    finally:
        shutil.copy2(spare, sounds)
        spare.unlink()
    out: dict[str, Any] = {}
    for (name, row), roles in zip(rows.items(), sets, strict=True):
        out[name] = {
            "warm_cpu_s": round(statistics.median(row["warm"]), 4),
            "cold_cpu_s": round(statistics.median(row["cold"]), 4),
            "words": row["words"],
            "short_words": row["short_words"],
            "kept_mb": round(kept_bytes(data_dir, roles) / 1e6, 1),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dirs", nargs="+", type=Path)
    parser.add_argument("--roles", action="append", default=None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    report: dict[str, Any] = {"load_before": loadavg()}
    for data_dir in args.data_dirs:
        sets: list[list[str] | None] = [None]
        if args.roles is None:
            sets.extend(role_sets(data_dir))
        else:
            sets.extend([r for r in value.split(",") if r] for value in args.roles)
        report[str(data_dir)] = measure(data_dir, sets, args.rounds)
    report["load_after"] = loadavg()
    text = json.dumps(report, ensure_ascii=False, indent=1)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
