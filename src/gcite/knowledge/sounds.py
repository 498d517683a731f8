"""The query vocabulary's pinyin keys, kept on disk between runs of a process.

:func:`gcite.knowledge.vocabulary.build_vocabulary` keys every short word of the documents
by its toneless pinyin (``pypinyin``), most of the CPU of building a vocabulary and the
largest share of a service's start-up warm-up. A word's key depends on the word and on the
``pypinyin`` release only, so the keys of the vocabulary's words are kept in
``<data_dir>/vocabulary-sounds.json`` (:class:`SoundKeys`) and read back by the next
process::

    {"format": 1, "pypinyin": "0.55.0", "keys": {"巡更": "xun geng", ...}}

The store (:meth:`gcite.knowledge.store.HybridStore.vocabulary`) builds a vocabulary per
state of the catalog and set of documents a caller's roles may see: with the keys read,
computing only the words' keys missing there. The file holds the keys of the whole
knowledge base: only the vocabulary of every document (``roles=None``) writes it again,
when its keys differ from what it read (a word added or gone with a change of the
documents); the vocabulary of the documents a role set sees (a part of them) only reads
it, so the file never shrinks to one role set's words. Ingestion builds the vocabulary of
every document once it has changed the documents
(:func:`gcite.knowledge.ingest.ingest_paths`), so the process started after it reads
the keys. A file of another format or ``pypinyin`` release, a file that is not
this JSON (a key or value not a string), larger than :data:`MAX_BYTES` or unreadable is
ignored and the keys are computed again. Written atomically (a temporary file in the same
folder, then a rename; several processes on one data dir may write it, the last rename
wins): an interrupted write leaves the old file or the new one. A file that cannot be
written is skipped (the next start computes the keys again).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

from gcite.files import write_atomically

log = logging.getLogger("gcite.knowledge")

SOUNDS_NAME = "vocabulary-sounds.json"
SOUNDS_FORMAT = 1
MAX_BYTES = 256 * 1024 * 1024
"""A larger file is not read (the keys are computed instead)."""


def _pypinyin_release() -> str:
    """The installed ``pypinyin``'s version, read from its metadata (importing the package
    costs more than reading the keys)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pypinyin")
    except PackageNotFoundError:  # not installed as a distribution: ask the module
        from pypinyin import __version__

        return str(__version__)


class SoundKeys:
    """The pinyin keys file ``path`` (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._release = ""

    @property
    def release(self) -> str:
        """The installed ``pypinyin`` release the keys are computed with."""
        if not self._release:
            self._release = _pypinyin_release()
        return self._release

    def read(self) -> dict[str, str]:
        """word -> pinyin key as written; empty when the file is absent, of another format
        or ``pypinyin`` release, larger than :data:`MAX_BYTES`, unreadable or not this
        JSON."""
        try:
            if self.path.stat().st_size > MAX_BYTES:
                return {}
            raw = json.loads(self.path.read_bytes())
        except (OSError, ValueError, RecursionError):  # ValueError: not JSON, not UTF-8
            return {}
        if (
            not isinstance(raw, dict)
            or raw.get("format") != SOUNDS_FORMAT
            or raw.get("pypinyin") != self.release
            or not isinstance(raw.get("keys"), dict)
        ):
            return {}
        keys: dict[str, str] = raw["keys"]
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in keys.items()):
            return {}
        return keys

    def write(self, keys: Mapping[str, str]) -> None:
        """Keep ``keys`` (word -> pinyin key), replacing the file atomically; nothing when
        the folder is missing or not writable (logged at debug level)."""
        data = {"format": SOUNDS_FORMAT, "pypinyin": self.release, "keys": dict(keys)}
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        try:
            write_atomically(self.path, text)
        except OSError as exc:
            log.debug("vocabulary sounds not kept in %s: %s", self.path, exc)


__all__ = ["MAX_BYTES", "SOUNDS_FORMAT", "SOUNDS_NAME", "SoundKeys"]
