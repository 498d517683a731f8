"""The query vocabulary's pinyin keys, kept on disk between runs of a process.

:func:`gcite.knowledge.vocabulary.build_vocabulary` keys every short word of the documents
by its toneless pinyin (``pypinyin``), most of the CPU of building a vocabulary and the
largest share of a service's start-up warm-up. The keys depend on the word and on the
``pypinyin`` release only, so they are written once per state of the knowledge base and
read back by the next process: :class:`SoundKeys` is the file ``<data_dir>/
vocabulary-sounds.json``::

    {"format": 1, "state": "<digest of the documents and the pypinyin release>",
     "keys": {"巡更": "xun geng", ...}}

``state`` is :func:`sounds_state` of the catalog's documents (ids and content hashes, see
:func:`gcite.knowledge.store.vocabulary_key`): a file of another state, another format, a
file that is not this JSON, larger than :data:`MAX_BYTES` or unreadable is ignored and the
keys are computed again. Written atomically (a temporary file in the same folder, then a
rename; several processes on one data dir may write it, the last rename wins): an
interrupted write leaves the old file or the new one. A file that cannot be written is
skipped (the next start computes the keys again).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger("gcite.knowledge")

SOUNDS_NAME = "vocabulary-sounds.json"
SOUNDS_FORMAT = 1
MAX_BYTES = 256 * 1024 * 1024
"""A larger file is not read (the keys are computed instead)."""


def sounds_state(documents: Any) -> str:
    """The state the keys of a vocabulary are kept for: a digest of ``documents`` (a
    JSON-able value naming the catalog's documents and their content, e.g. the first
    element of :func:`gcite.knowledge.store.vocabulary_key`) and of the ``pypinyin``
    release."""
    text = json.dumps([_pypinyin_release(), documents], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
    """The pinyin keys file ``path`` for the vocabulary state ``state``
    (:func:`sounds_state`)."""

    def __init__(self, path: Path, state: str) -> None:
        self.path = path
        self.state = state

    def read(self) -> dict[str, str]:
        """word -> pinyin key as written for this state; empty when the file is absent,
        of another state or format, larger than :data:`MAX_BYTES`, unreadable or not
        this JSON."""
        try:
            if self.path.stat().st_size > MAX_BYTES:
                return {}
            raw = json.loads(self.path.read_bytes())
        except (OSError, ValueError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            return {}
        if (
            not isinstance(raw, dict)
            or raw.get("format") != SOUNDS_FORMAT
            or raw.get("state") != self.state
            or not isinstance(raw.get("keys"), dict)
        ):
            return {}
        keys = raw["keys"]
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in keys.items()):
            return {}
        return keys

    def write(self, keys: Mapping[str, str]) -> None:
        """Keep ``keys`` (word -> pinyin key) for this state, atomically; nothing when the
        folder is missing or not writable (logged at debug level)."""
        data = {"format": SOUNDS_FORMAT, "state": self.state, "keys": dict(keys)}
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        try:
            fd, tmp = tempfile.mkstemp(
                prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent
            )
        except OSError as exc:
            log.debug("vocabulary sounds not kept in %s: %s", self.path, exc)
            return
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.debug("vocabulary sounds not kept in %s: %s", self.path, exc)
            with contextlib.suppress(OSError):
                os.unlink(tmp)


__all__ = ["MAX_BYTES", "SOUNDS_FORMAT", "SOUNDS_NAME", "SoundKeys", "sounds_state"]
