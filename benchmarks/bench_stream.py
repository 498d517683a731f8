"""Citation stream parser throughput, Python (issue 3, item 6), plus the JavaScript figures.

A seeded ~100,000-character answer (Chinese prose with markers in the grammar's
variants) is cut into realistic deltas of 2-6 characters — the same generator and
seed as ``benchmarks/bench_stream_js.mjs`` (mulberry32 ported bit for bit), so both
languages parse the identical answer. For the first 1k, 10k and 100k characters it
measures, in the same run:

- ``parser``: ``gcite.stream.CitationParser`` — ``feed()`` every delta, then ``close()``;
- ``naive``: the baseline — append the delta and re-scan the WHOLE accumulated answer
  with the marker regex at every delta (``len(MARKER_RE.sub("", acc))``).

Times are CPU time of this process (``time.process_time``), not wall time: on a shared
machine (load far above ``nproc``) wall time mostly measures waiting for a core, and
long runs are preempted more often than short ones, which would fake non-linear growth.
The JavaScript script measures wall time (``process.hrtime``).

The naive baseline is quadratic; at 100k it is run once and stopped after
``--naive-cap`` seconds (default 20). When capped, its total time is extrapolated
from the work done (sum of scanned lengths), and the figures say so.

Then, when ``benchmarks/bench_stream_js.mjs`` exists and ``node`` is on PATH, it runs
that script and includes its JSON object.

Run: ``.venv/bin/python benchmarks/bench_stream.py [--naive-cap S] [--json]``.
Prints a Markdown section (or one JSON object with ``--json``). Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gcite.stream import MARKER_RE, CitationParser

REPO = Path(__file__).resolve().parent.parent
SIZES = (1_000, 10_000, 100_000)
SEED = 20261129
CLOCK = time.process_time  # CPU seconds of this process
_M = 0xFFFFFFFF

SENTENCES = [
    "根据《中华人民共和国民法典》的规定，民事主体从事民事活动，应当遵循诚信原则",
    "巡更人员需要先在终端登录，登录后系统会根据预设路线生成待检点",
    "劳动合同期限三个月以上不满一年的，试用期不得超过一个月",
    "用人单位自用工之日起即与劳动者建立劳动关系",
    "当事人对自己提出的主张，有责任提供证据",
    "The model cites each sentence with the chunk it used",
]
MARKERS = ["[C:1]", "[C:2]", "【C：3】", "[c: 4]", "[C:5,6]", "[C:7, C:8]", "［C:９］", "[C:10]"]


def rng(seed: int) -> Callable[[], float]:
    """mulberry32, identical to the JavaScript benchmark's generator."""
    state = seed & _M

    def rand() -> float:
        nonlocal state
        state = (state + 0x6D2B79F5) & _M
        t = state
        t = ((t ^ (t >> 15)) * (t | 1)) & _M
        t = (t ^ ((t + (((t ^ (t >> 7)) * (t | 61)) & _M)) & _M)) & _M
        return ((t ^ (t >> 14)) & _M) / 4294967296

    return rand


def build_answer(rand: Callable[[], float], size: int) -> str:
    parts: list[str] = []
    length = 0
    while length < size:
        piece = SENTENCES[int(rand() * len(SENTENCES))]
        if rand() < 0.7:
            piece += MARKERS[int(rand() * len(MARKERS))]
        piece += "。\n" if rand() < 0.15 else "。"
        parts.append(piece)
        length += len(piece)
    return "".join(parts)[:size]


def cut(rand: Callable[[], float], text: str) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(text):
        n = 2 + int(rand() * 5)
        out.append(text[i : i + n])
        i += n
    return out


def run_parser(deltas: list[str]) -> int:
    parser = CitationParser(None)
    visible = 0
    for delta in deltas:
        for seg in parser.feed(delta):
            if "text" in seg:
                visible += len(seg["text"])
    for seg in parser.close():
        if "text" in seg:
            visible += len(seg["text"])
    return visible


def run_naive(deltas: list[str], cap: float | None = None) -> tuple[int, int]:
    """Returns (visible length, deltas processed before the cap)."""
    acc = ""
    visible = 0
    start = CLOCK()
    for k, delta in enumerate(deltas):
        acc += delta
        visible = len(MARKER_RE.sub("", acc))  # re-scan everything so far
        if cap is not None and CLOCK() - start > cap:
            return visible, k + 1
    return visible, len(deltas)


def timed(fn: Callable[[], Any], runs: int) -> tuple[list[float], Any]:
    times: list[float] = []
    out: Any = None
    for _ in range(runs):
        t0 = CLOCK()
        out = fn()
        times.append(CLOCK() - t0)
    return times, out


def figures(times: list[float], chars: int, deltas: int) -> dict[str, Any]:
    t = statistics.median(times)
    return {
        "runs": len(times),
        "median_s": float(f"{t:.4g}"),
        "chars_per_s": round(chars / t),
        "deltas_per_s": round(deltas / t),
    }


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"nproc": os.cpu_count(), "python": platform.python_version()}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in lscpu.splitlines():
            if line.startswith("Model name:"):
                info["cpu"] = line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        info["cpu"] = platform.processor() or "unknown"
    return info


def bench_python(naive_cap: float) -> dict[str, Any]:
    rand = rng(SEED)
    answer = build_answer(rand, 100_000)
    all_deltas = cut(rand, answer)
    for _ in range(3):  # warm-up
        run_parser(all_deltas)

    def prefix(size: int) -> list[str]:
        out, chars = [], 0
        for delta in all_deltas:
            if chars >= size:
                break
            out.append(delta)
            chars += len(delta)
        return out

    results = []
    for size in SIZES:
        deltas = prefix(size)
        chars = sum(map(len, deltas))
        runs = {1_000: 101, 10_000: 21, 100_000: 7}[size]
        p_times, p_visible = timed(lambda d=deltas: run_parser(d), runs)
        parser = figures(p_times, chars, len(deltas))
        results.append(
            {"chars": chars, "deltas": len(deltas), "parser": parser, "_visible": p_visible,
             "_deltas": deltas}
        )  # fmt: skip
    for row in results:
        deltas = row.pop("_deltas")
        chars, n = row["chars"], row["deltas"]
        if chars < 100_000:
            runs = 21 if chars <= 1_000 else 5
            n_times, (visible, _) = timed(lambda d=deltas: run_naive(d), runs)
            naive = figures(n_times, chars, n)
        else:
            t0 = CLOCK()
            visible, done = run_naive(deltas, naive_cap)
            elapsed = CLOCK() - t0
            if done < n:  # extrapolate by the work: the sum of the scanned lengths
                lengths, acc = [], 0
                for delta in deltas:
                    acc += len(delta)
                    lengths.append(acc)
                elapsed *= sum(lengths) / sum(lengths[:done])
            naive = figures([elapsed], chars, n)
            naive["capped"] = done < n
            naive["deltas_measured"] = done
            visible = row["_visible"] if done < n else visible
        if visible != row.pop("_visible"):
            raise SystemExit(f"parser and baseline disagree on the visible text at {chars}")
        row["naive"] = naive
        row["speedup"] = round(naive["median_s"] / row["parser"]["median_s"], 1)
    return {
        "benchmark": "stream_py",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "delta_chars": [2, 6],
        "clock": "process_time (CPU s)",
        "answer_chars": len(answer),
        "results": results,
    }


def bench_js() -> dict[str, Any] | None:
    script = REPO / "benchmarks" / "bench_stream_js.mjs"
    node = shutil.which("node")
    if not script.exists() or node is None:
        return None
    proc = subprocess.run([node, str(script)], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-500:]}
    parsed: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return parsed


def markdown(py: dict[str, Any], js: dict[str, Any] | None) -> str:
    m = py["machine"]
    lines = [
        f"Measured {py['date']} on {m.get('cpu', 'unknown')}, nproc {m['nproc']}, "
        f"Python {m['python']}" + (f", Node {js['node']}" if js and "node" in js else "") + ".",
        "Command: `.venv/bin/python benchmarks/bench_stream.py` (runs the JS script too).",
        "Python times are CPU seconds of the process; JavaScript times are wall seconds.",
        "",
        "| impl | chars | deltas | parser median s | parser chars/s | parser deltas/s "
        "| naive median s | naive chars/s | speedup vs naive |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, doc in (("Python", py), ("JavaScript", js)):
        if not doc or "results" not in doc:
            continue
        for r in doc["results"]:
            p, n = r["parser"], r["naive"]
            capped = " (capped, extrapolated)" if n.get("capped") else ""
            lines.append(
                f"| {name} | {r['chars']:,} | {r['deltas']:,} | {p['median_s']} | "
                f"{p['chars_per_s']:,} | {p['deltas_per_s']:,} | {n['median_s']}{capped} | "
                f"{n['chars_per_s']:,} | {r['speedup']}× |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--naive-cap", type=float, default=20.0, help="CPU s for the 100k baseline")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--no-js", action="store_true", help="skip the JavaScript benchmark")
    args = ap.parse_args()
    py = bench_python(args.naive_cap)
    js = None if args.no_js else bench_js()
    if args.json:
        print(json.dumps({"python": py, "javascript": js}, ensure_ascii=False))
    else:
        print(markdown(py, js))
        print()
        print(json.dumps({"python": py, "javascript": js}, ensure_ascii=False), file=sys.stderr)


if __name__ == "__main__":
    main()
