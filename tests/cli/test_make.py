"""`make demo` installs only what the demo needs (issue 16 item 12).

Runs make's dry run (``make -n``) against a venv path that does not exist, so make
prints every command a fresh machine would run, without running them.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _dry_run(target: str, tmp_path: Path) -> str:
    venv = tmp_path / "fresh-venv"
    proc = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.replace(str(venv), "VENV")


def test_make_demo_installs_the_runtime_dependencies_only(tmp_path: Path) -> None:
    commands = _dry_run("demo", tmp_path)
    installs = [line for line in commands.splitlines() if "pip install" in line]
    assert any("-e . " in line or line.endswith("-e .") for line in installs), commands
    assert "[dev]" not in commands
    for tool in ("pytest", "playwright", "mypy", "ruff", "apt-get"):
        assert tool not in commands, tool
    assert "gcite demo --port" in commands


def test_make_test_installs_the_test_tools(tmp_path: Path) -> None:
    commands = _dry_run("test", tmp_path)
    assert "-e '.[dev]'" in commands
    assert "pytest -q" in commands
    assert "apt-get install -y -qq nginx" in commands  # the load-balancer test's nginx
    assert "apt-get download nginx" in commands  # where apt-get cannot install it
