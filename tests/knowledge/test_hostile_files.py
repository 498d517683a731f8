"""Fuzz-style: 200+ generated hostile office files (zip bombs, declared-size lies, deep
nesting, huge tables, broken XML, billion laughs, XXE, truncated archives and PDFs)
through the converter and the real ``gcite ingest`` command.

No crash, no traceback, every refusal one typed error (413 a named limit, 415, 422), the
converting process bounded by ``setrlimit`` (memory, CPU) and a wall-clock deadline
enforced by the parent, and nothing of a refused file in the knowledge base. Embeddings
come from the local stand-in server (hashed vectors) so the run stays short.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gcite.knowledge.limits import MIB

from .embed_standin import EmbeddingStandin
from .hostile import generate

LIMITS = {
    "convert_max_cells": 100_000,
    "convert_max_unzipped_bytes": 32 * MIB,
    "convert_timeout_s": 60.0,
    "convert_cpu_s": 60.0,
    "convert_memory_mb": 512,
}


_LAUNCH = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)  # this command's peak (and its reaped children's)
with open(sys.argv[1], "w") as peak:
    peak.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""
"""Runs a command and writes its peak resident memory (KiB) to the file in argv[1]."""


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    for name, data in generate():
        (folder / name).write_bytes(data)
    return folder


@pytest.fixture(scope="module")
def embeddings() -> Iterator[EmbeddingStandin]:
    with EmbeddingStandin() as server:
        yield server


def test_gcite_ingest_refuses_hostile_files_by_type_and_keeps_nothing_of_them(
    tmp_path: Path, hostile_dir: Path, embeddings: EmbeddingStandin
) -> None:
    names = {path.name for path in hostile_dir.iterdir()}
    assert len(names) >= 200
    (hostile_dir / "good.md").write_text("# 正常\n\n正常文档的正文。\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}
    env.update({f"GCITE_{k.upper()}": str(v) for k, v in LIMITS.items()})
    env.update(
        {
            "GCITE_DATA_DIR": str(tmp_path / "data"),
            "GCITE_EMBED_BACKEND": "openai",
            "GCITE_EMBED_BASE_URL": embeddings.base_url,
            "GCITE_EMBED_MODEL": "standin",
            "GCITE_EMBED_API_KEY": "x",
        }
    )
    gcite = Path(sys.executable).parent / "gcite"
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    peak = tmp_path / "peak.txt"
    command = [str(gcite), "ingest", str(hostile_dir), "--dataset", "fuzz"]
    try:
        with out.open("w") as stdout, err.open("w") as stderr:
            # started by a small launcher: a process started straight from this test run
            # reports the run's own peak memory as its peak (Linux keeps the high-water mark
            # of the memory it replaced at exec), which would hide the command's
            proc = subprocess.Popen(
                [sys.executable, "-c", _LAUNCH, str(peak), *command],
                env=env,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
            )
            # a hang guard only: each document's deadline is enforced by the converter
            guard = threading.Timer(900, lambda: os.killpg(proc.pid, signal.SIGKILL))
            guard.start()
            try:
                proc.wait()
            finally:
                guard.cancel()
    finally:
        (hostile_dir / "good.md").unlink()
    max_rss_kib = int(peak.read_text("utf-8"))
    done = subprocess.CompletedProcess(
        proc.args, proc.returncode, out.read_text("utf-8"), err.read_text("utf-8")
    )
    assert done.returncode == 1, done.stderr  # some files failed: exit 1, the rest ingested
    assert "Traceback" not in done.stderr + done.stdout
    reasons: dict[str, str] = {}
    for line in done.stderr.splitlines():
        assert line.startswith(("失败: ", "跳过: ")), line  # one line per refused file
        if line.startswith("失败: "):
            path, reason = line.removeprefix("失败: ").split(": ", 1)
            reasons[Path(path).name] = reason
    catalog = json.loads((tmp_path / "data" / "catalog.json").read_text(encoding="utf-8"))
    stored = {d["name"] for d in catalog["datasets"]["fuzz"]["documents"].values()}
    assert "good.md" in stored and not stored & set(reasons)  # nothing refused is stored
    assert stored | set(reasons) == names | {"good.md"}  # every file: stored or refused
    assert len(reasons) >= 150
    # declared-size lies are read by their real cells; bombs and huge tables hit a named cap
    for name in ("far.xlsx", "lie0.xlsx", "scatter0.xlsx"):
        assert name in stored
    assert "convert_max_unzipped_bytes" in reasons["bomb.docx"]
    bombs = [r for name, r in reasons.items() if name.startswith("bomb")]
    assert len(bombs) == 11 and all("convert_max_unzipped_bytes" in r for r in bombs)
    tables = [r for name, r in reasons.items() if name.startswith("table")]
    assert len(tables) >= 2 and all("convert_max_cells" in r for r in tables)
    assert "文件无法解析" in reasons["laughs.docx"] and "文件无法解析" in reasons["laughs.xlsx"]
    # the ingest command parsed nothing itself (each file in a child under setrlimit): the
    # whole command, its converters included, stayed small
    assert max_rss_kib * 1024 < 1024 * MIB
