"""Eval fixtures: the demo data dir (bundled handbook, ingested once) and a question file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gcite.cli.demo import demo_settings, prepare_demo

#: A small question set over the demo handbook: one of each kind the report shows.
DEMO_QUESTIONS: list[dict[str, Any]] = [
    {
        "id": "readme",
        "question": "夜间巡更要打卡多少个点位？",
        "answerable": True,
        "category": "plain",
        "gold_docs": ["01-patrol.md"],
        "answer_keywords": ["24"],
    },
    {
        "id": "key-visitor",
        "question": "监控中心的备用钥匙放在哪里？",
        "answerable": True,
        "category": "roles",
        "gold_docs": ["07-control-room.md"],
        "answer_keywords": ["第 3 格"],
        "roles": [],
    },
    {
        "id": "key-security",
        "question": "监控中心的备用钥匙放在哪里？",
        "answerable": True,
        "category": "roles",
        "gold_docs": ["07-control-room.md"],
        "answer_keywords": ["第 3 格"],
        "roles": ["安保主管"],
    },
    {
        "id": "follow",
        "question": "那大会议室呢",
        "turns": [{"query": "会议室最多能提前几天订", "answer": "最多可提前 14 天预订。"}],
        "answerable": True,
        "category": "follow-up",
        "gold_docs": ["05-meeting-rooms.md"],
    },
    {
        "id": "canteen",
        "question": "大厦食堂周五的特价菜是什么？",
        "answerable": False,
        "category": "off-topic",
    },
]


@pytest.fixture(scope="session")
def eval_demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir holding the bundled sample data, ingested (USE embedder, Qdrant Edge)."""
    path = tmp_path_factory.mktemp("eval-demo")
    prepare_demo(demo_settings(path))
    return path


@pytest.fixture()
def demo_questions(tmp_path: Path) -> Path:
    """:data:`DEMO_QUESTIONS` as a JSONL file."""
    path = tmp_path / "questions.jsonl"
    lines = [json.dumps(row, ensure_ascii=False) for row in DEMO_QUESTIONS]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_gcite(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the real ``gcite`` console entry point in a subprocess (hang guard only)."""
    code = "import sys; from gcite.cli import main; sys.argv[0] = 'gcite'; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout
    )
