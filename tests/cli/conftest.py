"""CLI fixtures: the demo data dir, ingested once per session (the real knowledge base)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gcite.cli.demo import demo_settings, prepare_demo


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir holding the bundled sample data, ingested (USE embedder, Qdrant Edge)."""
    path = tmp_path_factory.mktemp("demo-data")
    prepare_demo(demo_settings(path))
    return path


def run_gcite(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real ``gcite`` console entry point in a subprocess."""
    code = "import sys; from gcite.cli import main; sys.argv[0] = 'gcite'; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
