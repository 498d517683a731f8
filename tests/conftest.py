"""Shared fixtures: where ../shared lives, and skipping cleanly when the corpus is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
