"""Shared by the verifier and answerer benchmarks: the law corpus, chunked and indexed.

Reads ``../shared/corpus`` (``GCITE_SHARED_DIR``); never copies it. The corpus is
ingested into a cache directory (``GCITE_BENCH_DATA``, default
``~/.cache/gcite/bench-laws-<embed backend>``); ingestion is idempotent.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("GCITE_SHARED_DIR", REPO.parent / "shared"))
CORPUS = SHARED / "corpus"
DATASET = "楼宇法规库"


@dataclass(frozen=True)
class LawChunk:
    """One chunk of the corpus as the store holds it (``content`` = chunk text)."""

    doc: str
    position: int
    content: str
    articles: tuple[str, ...]


def require_corpus() -> None:
    """Exit with a clear message when the shared corpus is absent."""
    if not (CORPUS / "laws").is_dir() or not (CORPUS / "laws-qa.dev.jsonl").is_file():
        sys.exit(f"corpus not found under {CORPUS} (set GCITE_SHARED_DIR)")


def questions() -> list[dict[str, Any]]:
    """The rows of ``laws-qa.dev.jsonl``."""
    lines = (CORPUS / "laws-qa.dev.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def gold_of(row: dict[str, Any]) -> set[tuple[str, str]]:
    """``{(doc, article)}`` of the gold and alternative gold articles."""
    return {(g["doc"], g["article"]) for g in row.get("gold", []) + row.get("alt_gold", [])}


def law_chunks() -> list[LawChunk]:
    """Every chunk of the corpus, chunked exactly as ingestion does."""
    from gcite.config import Settings
    from gcite.knowledge.chunking import chunk_text
    from gcite.knowledge.convert import convert_file

    settings = Settings()
    out: list[LawChunk] = []
    for path in sorted((CORPUS / "laws").glob("*.md")):
        converted = convert_file(path)
        for chunk in chunk_text(
            converted.text,
            chunk_size=settings.knowledge.chunk_size,
            chunk_overlap=settings.knowledge.chunk_overlap,
        ):
            out.append(LawChunk(path.name, chunk.position, chunk.text, tuple(chunk.articles)))
    return out


def open_law_store() -> Any:
    """The ingested corpus (ingests into the cache directory on first use)."""
    from gcite.config import Settings
    from gcite.knowledge import ingest_paths, open_store

    default = Path.home() / ".cache" / "gcite" / f"bench-laws-{Settings().embed.backend}"
    data_dir = Path(os.environ.get("GCITE_BENCH_DATA", default))
    settings = Settings.from_keys(data_dir=data_dir, dataset=DATASET)
    ingest_paths(
        [CORPUS / "laws"],
        settings=settings,
        dataset=DATASET,
        manifest=CORPUS / "laws.meta.json",
    )
    return open_store(settings), settings
