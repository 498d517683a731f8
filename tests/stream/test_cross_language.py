"""Differential check: the JavaScript client agrees with the Python parser on random answers.

Random answers (markers in every version-2 variant: ranges, escapes, tabs and no-break
spaces, invalid ids; code fences and spans, also in list items and block quotes; leading
reasoning blocks; split and lone surrogates; markers around the ``max_hold`` boundary)
are cut into random deltas; the Python parser's
output becomes a vectors file (citation-markers.md §7) that ``clients/js/bin/vectors.mjs``
must pass the three ways. Skips when ``node`` or the JS client is absent.
"""

from __future__ import annotations

import itertools
import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from gcite.stream.vectors import run_parser

REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / "clients" / "js" / "bin" / "vectors.mjs"

PIECES = [
    "[C:1]", "[C:2]", "【C：3】", "［c: ４］", "[C:1,2]", "[C:3, C:9]", "[C:0]", "[C:12345]",
    "[C:1，3、5]", "[C:07]", "[[C:1]]", "[C:", "[", "】", "]", "【", "C", ":", "1", "，", " ",
    "\u3000", "[注]", "[7]", "巡更人员", "。", "ab", "\n", "`", "``", "\n```\n", "\n~~~\n",
    "```", "~~~", "\n````\n", "x[C:10]y", "(C:1)", "[C:1,]",
    "[C:1-3]", "[C:2–4]", "[C:1～2]", "[C:8~10]", "[C:1-20]", "[C:5-3]", "[C:1, C:4-5]", "-",
    "～", "\\[C:1\\]", "\\[C:2]", "[C:3\\]", "\\", "\\[", "\\]", "[C:\t1]", "[C:\u00a02]",
    "[C:3\u202f]", "\t", "<think>", "</think>", "</thinking>", "<thi", "<", "\n- ```\n",
    "\n> ```\n", "\n1. ```\n", "\n   ```\n", "\n> - ~~~\n", "\n- ", "\n> ", "\n12) ",
    "\r\n", "\ud83d", "\ude00", "😀", "[C:9999]", "[C:9995-9999]",
]  # fmt: skip
STARTS = ["", "", "", "<think>", "<thinking>", "  \n<think>", "<thi", " <"]


def random_answer(rng: random.Random) -> str:
    parts = [rng.choice(STARTS)]
    for _ in range(rng.randint(0, 30)):
        if rng.random() < 0.08:  # a marker close to the 64-character hold limit
            escape = rng.choice(["", "\\"])
            spaces = rng.choice([" ", "\t", "\u00a0"]) * rng.randint(54, 62)
            parts.append(escape + "[C:" + spaces + str(rng.randint(1, 10)) + escape + "]")
        else:
            parts.append(rng.choice(PIECES))
    return "".join(parts)


def random_cut(rng: random.Random, text: str) -> list[str]:
    cuts = sorted(rng.sample(range(len(text) + 1), k=min(len(text) + 1, rng.randint(0, 10))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def test_js_client_agrees_with_python_on_random_answers(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not RUNNER.is_file():
        pytest.skip("node or clients/js/bin/vectors.mjs not available")
    rng = random.Random(20261130)
    cases = []
    for k in range(400):
        known = rng.choice([None, [str(i) for i in range(1, 11)], ["1", "2", "3"]])
        deltas = random_cut(rng, random_answer(rng))
        cases.append(
            {"name": f"random-{k}", "known_ids": known, "deltas": deltas,
             "expect": run_parser(known, deltas)}
        )  # fmt: skip
    path = tmp_path / "random-vectors.json"
    # ASCII JSON: lone surrogates travel as \\uXXXX escapes, as from a model API
    path.write_text(json.dumps({"version": 2, "cases": cases}), "utf-8")
    proc = subprocess.run([node, str(RUNNER), str(path)], capture_output=True, text=True)
    assert proc.stdout.splitlines()[-1:] == ["400 passed, 0 failed"], proc.stdout[:3000]
    assert proc.returncode == 0
