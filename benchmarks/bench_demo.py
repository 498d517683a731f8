"""Benchmark of the offline demo: first run vs later runs, and one answer in the terminal.

Figures (medians; one run of this script measures everything, so ratios compare like
with like):

- ``prepare_demo`` on an empty data dir (ingest the handbook into Qdrant Edge and build
  the offline web index: embedding model load included) vs on an already prepared dir
  (digest of the sample files compared with the stamp: what every later ``gcite demo``
  pays);
- ``gcite demo --once "干粉灭火器怎么用？"`` as a subprocess on a prepared dir: time to the
  first byte of the answer on stdout and to exit; baseline: ``gcite --version`` (Python
  and Click start-up) in the same run.

Run: ``.venv/bin/python benchmarks/bench_demo.py`` (about 3 minutes on 2 cores).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gcite.cli.demo import demo_settings, prepare_demo

FRESH_RUNS = 2
WARM_RUNS = 7
ONCE_RUNS = 3
QUESTION = "干粉灭火器怎么用？"
ENTRY = "import sys; from gcite.cli import main; sys.argv[0] = 'gcite'; main()"


def _fresh(root: Path, n: int) -> float:
    data_dir = root / f"fresh-{n}"
    start = time.perf_counter()
    state = prepare_demo(demo_settings(data_dir))
    elapsed = time.perf_counter() - start
    assert state.ingested
    return elapsed


def _warm(data_dir: Path) -> float:
    start = time.perf_counter()
    state = prepare_demo(demo_settings(data_dir))
    elapsed = time.perf_counter() - start
    assert not state.ingested
    return elapsed


def _subprocess(args: list[str]) -> tuple[float, float]:
    """(seconds to the first stdout byte, seconds to exit)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", ENTRY, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.stdout is not None
    first = proc.stdout.read(1)
    first_at = time.perf_counter() - start
    rest = proc.stdout.read()
    code = proc.wait()
    total = time.perf_counter() - start
    assert code == 0 and first, (code, first + rest)
    return first_at, total


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="gcite-bench-demo-") as tmp:
        root = Path(tmp)
        fresh = [_fresh(root, n) for n in range(FRESH_RUNS)]
        prepared = root / f"fresh-{FRESH_RUNS - 1}"
        warm = [_warm(prepared) for _ in range(WARM_RUNS)]
        # a copy for the subprocess: Qdrant Edge allows one process per shard
        once_dir = root / "once"
        subprocess.run(["cp", "-r", str(prepared), str(once_dir)], check=True)
        version = [_subprocess(["--version"])[1] for _ in range(ONCE_RUNS)]
        once = [
            _subprocess(["demo", "--data-dir", str(once_dir), "--once", QUESTION])
            for _ in range(ONCE_RUNS)
        ]
    fresh_med = statistics.median(fresh)
    warm_med = statistics.median(warm)
    first_med = statistics.median(t for t, _ in once)
    once_med = statistics.median(t for _, t in once)
    version_med = statistics.median(version)
    result = {
        "prepare_fresh_s": round(fresh_med, 2),
        "prepare_warm_ms": round(warm_med * 1000, 2),
        "fresh_vs_warm": round(fresh_med / warm_med),
        "once_first_byte_s": round(first_med, 2),
        "once_total_s": round(once_med, 2),
        "version_s": round(version_med, 3),
        "once_vs_version": round(once_med / version_med, 1),
        "runs": {"fresh": FRESH_RUNS, "warm": WARM_RUNS, "once": ONCE_RUNS},
    }
    print(json.dumps(result, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
