"""Run one conversion in a child process with a memory, CPU and wall-clock budget.

Parsers of office files and PDFs are large C and Python libraries whose cost on a
hostile file is not known in advance; so every conversion of such a file runs in a
child process (:func:`run_bounded`) that

* may grow by at most ``ConvertLimits.memory_mb`` MiB of address space above its idle
  size (``RLIMIT_AS``; an allocation beyond it is a ``MemoryError`` in the child),
* may use at most ``ConvertLimits.cpu_s`` CPU seconds (``RLIMIT_CPU``; the kernel
  stops it with ``SIGXCPU``),
* must answer within ``ConvertLimits.timeout_s`` seconds of wall clock (the parent
  kills it with ``SIGKILL`` otherwise).

Children come from the ``forkserver`` start method: a clean single-threaded server
process (the parsers imported once, :data:`PRELOAD`) forks each child, so a child
never inherits the service's threads or locks and starts in milliseconds. Any failure
becomes a :class:`~gcite.knowledge.limits.ConversionError` (413 for a budget, 422
for a parser error); nothing of the child outlives the call.
"""

from __future__ import annotations

import multiprocessing
import resource
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from gcite.knowledge.limits import MIB, ConversionError, ConvertLimits, over_limit

PRELOAD = ["__main__", "gcite.knowledge.convert", "lxml.etree", "openpyxl", "pdfplumber", "bs4"]
"""Modules the fork server imports once, so a child does not import them again."""
_POLL_S = 0.25  # how often the parent looks whether the child died without answering


def _context() -> Any:
    """The ``forkserver`` multiprocessing context (its preload set before its first use)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


@dataclass(frozen=True)
class ChildUsage:
    """What one conversion cost its child: resident memory at start and at its peak
    (bytes) and CPU seconds."""

    idle_rss: int
    peak_rss: int
    cpu_s: float


def _status(field: str) -> int:
    """A size field of ``/proc/self/status`` (``VmSize``, ``VmRSS``) in bytes, 0 if unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _address_space() -> int:
    """This process's current virtual memory size in bytes (``VmSize``), 0 if unknown."""
    return _status("VmSize")


def _limit_self(memory_mb: int, cpu_s: float) -> None:
    """Cap this process's address space (idle size + ``memory_mb``) and CPU seconds."""
    idle = _address_space()
    if idle:
        cap = idle + memory_mb * MIB
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    used = resource.getrusage(resource.RUSAGE_SELF)
    seconds = int(used.ru_utime + used.ru_stime + cpu_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))


def _child(
    conn: Connection, work: Callable[..., Any], args: tuple[Any, ...], limits: ConvertLimits
) -> None:
    """The child's body: limits, the work, and one message back (with its usage)."""
    idle = _status("VmRSS")
    start = resource.getrusage(resource.RUSAGE_SELF)
    try:
        _limit_self(limits.memory_mb, limits.cpu_s)
        message: tuple[str, Any] = ("ok", work(*args))
    except ConversionError as exc:
        message = ("error", (str(exc), exc.status, exc.limit))
    except MemoryError:
        error = over_limit("转换所需内存", "convert_memory_mb", f"{limits.memory_mb} MiB")
        message = ("error", (str(error), error.status, error.limit))
    except RecursionError:
        message = ("error", ("文件结构嵌套过深，无法解析", 422, None))
    except Exception as exc:  # a parser's own error: the file is corrupt or hostile
        text = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]  # one line
        message = ("error", (f"文件无法解析（{text}）", 422, None))
    end = resource.getrusage(resource.RUSAGE_SELF)
    cpu = end.ru_utime + end.ru_stime - start.ru_utime - start.ru_stime
    usage = ChildUsage(idle, end.ru_maxrss * 1024, cpu)
    try:
        conn.send((*message, usage))
    except MemoryError:
        error = over_limit("转换结果", "convert_memory_mb", f"{limits.memory_mb} MiB")
        conn.send(("error", (str(error), error.status, error.limit), usage))
    finally:
        conn.close()


def run_bounded(
    work: Callable[..., Any],
    args: tuple[Any, ...],
    limits: ConvertLimits,
    *,
    clock: Callable[[], float] = time.monotonic,
    on_usage: Callable[[ChildUsage], None] | None = None,
) -> Any:
    """``work(*args)`` in a child process within ``limits``' memory, CPU and time budget.

    ``work`` must be a module-level function and its arguments and result picklable.
    Returns its result; raises :class:`ConversionError`: the child's own, 413 when a
    budget was exceeded (``limit`` = ``convert_memory_mb`` / ``convert_cpu_s`` /
    ``convert_timeout_s``), 422 when the child died otherwise. ``on_usage`` receives the
    child's :class:`ChildUsage` when it answered.
    """
    context = _context()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(sender, work, args, limits), daemon=True)
    deadline = clock() + limits.timeout_s
    process.start()
    sender.close()
    try:
        while True:
            remaining = deadline - clock()
            if remaining <= 0:
                raise over_limit("转换耗时", "convert_timeout_s", f"{limits.timeout_s} 秒")
            if receiver.poll(min(remaining, _POLL_S)):
                try:
                    kind, value, usage = receiver.recv()
                except EOFError:
                    break
                if on_usage is not None:
                    on_usage(usage)
                if kind == "ok":
                    return value
                message, status, limit = value
                raise ConversionError(message, status=status, limit=limit)
            if not process.is_alive() and not receiver.poll(0):
                break
        process.join(5)
        code = process.exitcode
        if code == -signal.SIGXCPU or code == -signal.SIGKILL:
            raise over_limit("转换 CPU 时间", "convert_cpu_s", f"{limits.cpu_s} 秒")
        raise ConversionError(f"文件无法解析（转换进程异常退出，代码 {code}）", status=422)
    finally:
        receiver.close()
        if process.is_alive():
            process.kill()
        process.join()
        process.close()


__all__ = ["PRELOAD", "ChildUsage", "run_bounded"]
