"""Files replaced whole: written beside their target, then renamed over it.

A reader, or a process that crashes mid-write, sees the old file or the new one, never
part of one (``os.replace`` is atomic on one file system). Errors are those of the file
system (``OSError``); the temporary file is removed on any failure.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def replacing(path: Path, *, binary: bool = False) -> Iterator[IO[Any]]:
    """A handle on a temporary file in ``path``'s folder that replaces ``path`` when the
    block ends without an exception (text: UTF-8, ``\\n`` line ends; ``binary``: bytes)."""
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        if binary:
            handle: IO[Any] = os.fdopen(fd, "wb")
        else:
            handle = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        with handle:
            yield handle
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) through :func:`replacing`."""
    with replacing(path) as handle:
        handle.write(text)


__all__ = ["replacing", "write_atomically"]
