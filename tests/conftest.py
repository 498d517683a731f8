"""Shared fixtures: where ../shared lives, and skipping cleanly when the corpus is absent."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.pg import pgvector_url, postgres_url

# the session fixtures (throwaway PostgreSQL servers), defined once here
__all__ = ["pgvector_url", "postgres_url"]

REPO = Path(__file__).resolve().parent.parent


def _shared() -> Path:
    return Path(os.environ.get("GCITE_SHARED_DIR", REPO.parent / "shared")).resolve()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The project's shared folder (seeds, spec, vectors, corpus), usually ``../shared``."""
    path = _shared()
    if not path.is_dir():
        pytest.skip(f"shared folder not found at {path} (set GCITE_SHARED_DIR)")
    return path


@pytest.fixture(scope="session")
def corpus_dir(shared_dir: Path) -> Path:
    """``../shared/corpus`` (laws/, laws.meta.json, laws-qa.dev.jsonl); skips when absent."""
    path = shared_dir / "corpus"
    if not (path / "laws").is_dir():
        pytest.skip(f"test corpus not found at {path}: corpus tests skipped")
    return path


# --------------------------------------------------------------------------- knowledge base


@dataclass
class LawStore:
    """The law corpus ingested once per session (``law_store`` fixture).

    ``settings``: :class:`gcite.config.Settings` whose ``data_dir`` holds the
    ingested store (pass it to ``open_store`` / ``create_app``); ``store``: an
    open :class:`gcite.knowledge.KnowledgeStore` on it (do not close it);
    ``dataset``: the dataset name (the manifest's ``dataset_name``, 楼宇法规库);
    ``corpus_dir``: ``../shared/corpus``. Treat it as read-only: tests that
    ingest or delete must build their own store in ``tmp_path``.
    """

    settings: Any
    store: Any
    dataset: str
    corpus_dir: Path


LAW_EMBEDDER = "use"


def _law_cache_key(corpus: Path, embed_backend: str) -> str:
    digest = hashlib.sha256(embed_backend.encode())
    files = [*sorted((corpus / "laws").rglob("*")), corpus / "laws.meta.json"]
    files += sorted((REPO / "src" / "gcite" / "knowledge").glob("*.py"))
    for file in files:
        if file.is_file():
            digest.update(file.name.encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


@pytest.fixture(scope="session")
def law_store(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LawStore]:
    """The whole law corpus with laws.meta.json in a tmp data dir (see :class:`LawStore`).

    Ingesting embeds every chunk, so the finished data dir is cached under
    ``.venv/gcite-test-cache/<hash of corpus + knowledge code + embedder>`` and
    copied into the session's tmp dir on later runs.
    """
    from gcite.config import Settings
    from gcite.knowledge import ingest_paths, open_store
    from gcite.knowledge.convert import load_manifest

    manifest = corpus_dir / "laws.meta.json"
    dataset = load_manifest(manifest).dataset_name or "楼宇法规库"
    # The offline embedder chosen by measured recall and ingest cost (docs/knowledge-base.md).
    base = Settings.from_keys(embed_backend=LAW_EMBEDDER)
    cache_root = REPO / ".venv" / "gcite-test-cache"
    cached = cache_root / f"law-{_law_cache_key(corpus_dir, base.embed.backend)}"
    data_dir = tmp_path_factory.mktemp("law-store") / "data"
    if not (cached / "catalog.json").is_file():
        build = tmp_path_factory.mktemp("law-build") / "data"
        report = ingest_paths(
            [corpus_dir / "laws"],
            settings=Settings.from_keys(
                data_dir=build, dataset=dataset, embed_backend=LAW_EMBEDDER
            ),
            dataset=dataset,
            manifest=manifest,
        )
        assert not report.failed, report.failed
        if (REPO / ".venv").is_dir():
            tmp = cache_root / f".tmp-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(build, tmp)
            try:
                os.replace(tmp, cached)
            except OSError:  # another session filled the cache first
                shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(build, data_dir)
    else:
        shutil.copytree(cached, data_dir)
    settings = Settings.from_keys(data_dir=data_dir, dataset=dataset, embed_backend=LAW_EMBEDDER)
    store = open_store(settings)
    try:
        yield LawStore(settings=settings, store=store, dataset=dataset, corpus_dir=corpus_dir)
    finally:
        store.close()


# --------------------------------------------------------------------------- store owners


@pytest.fixture(scope="session", autouse=True)
def _one_store_owner_per_process() -> Iterator[None]:
    """One :class:`gcite.knowledge.store.StoreHandles` for every store a test opens without
    naming an owner, as a real process has one (``gcite serve`` / ``demo`` / ``ask`` create
    theirs and pass it on). Without it a session fixture's open store (``law_store``) and an
    app a test builds on the same data would be two owners, and Qdrant Edge refuses the
    second. Tests of several owners construct ``StoreHandles`` themselves."""
    from gcite.knowledge import store
    from gcite.service import resources

    shared = store.StoreHandles()
    patch = pytest.MonkeyPatch()
    for module in (store, resources):
        patch.setattr(module, "StoreHandles", lambda: shared)
    try:
        yield
    finally:
        patch.undo()
