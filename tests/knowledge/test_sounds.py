"""The query vocabulary's pinyin keys kept on disk (knowledge/sounds.py): written by the
store that builds a vocabulary, read back by the next one (no word keyed again), written
again when a change of the documents changes the words, ignored when damaged. Real
stores on Qdrant Edge, real ingestion, real pypinyin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gcite import files as files_module
from gcite.config import Settings
from gcite.knowledge import ingest_paths, open_store
from gcite.knowledge import vocabulary as vocabulary_module
from gcite.knowledge.manage import delete_document
from gcite.knowledge.sounds import SOUNDS_NAME, SoundKeys

PATROL = "# 巡更\n\n夜间巡更每 1 小时一次，巡更点共 24 个。报修电话 8008。"
ROOMS = "# 会议室\n\n会议室须提前预订。茶水间每日清洁。"


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The words pypinyin is asked to key (the real function, recorded)."""
    seen: list[str] = []
    real = vocabulary_module._pinyin_key

    def spy(word: str) -> str:
        seen.append(word)
        return real(word)

    monkeypatch.setattr(vocabulary_module, "_pinyin_key", spy)
    return seen


def _kb(tmp_path: Path, *names: str) -> tuple[Settings, Path]:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    texts = {"patrol.md": PATROL, "rooms.md": ROOMS}
    for name in names:
        (docs / name).write_text(texts[name], encoding="utf-8")
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    ingest_paths([docs], settings=settings, dataset="d")
    return settings, docs


def _normalised(settings: Settings, query: str) -> str:
    """``query`` normalised by a new store (a new process's) on ``settings``."""
    with open_store(settings) as store:
        return store.normalise_query(query)


def _built(settings: Settings, query: str, keyed: list[str]) -> tuple[str, list[str]]:
    """``query`` normalised by a new store on ``settings``, and the words keyed while the
    store built its vocabulary (``keyed``: the :func:`keyed` fixture)."""
    with open_store(settings) as store:
        keyed.clear()
        store.vocabulary()
        built = list(keyed)
        return store.normalise_query(query), built


def _file_keys(settings: Settings) -> dict[str, str]:
    raw = json.loads((settings.data_dir / SOUNDS_NAME).read_text(encoding="utf-8"))
    keys: dict[str, str] = raw["keys"]
    return keys


def test_the_keys_are_written_by_ingestion_then_read_back_instead_of_computed(
    tmp_path: Path, keyed: list[str]
) -> None:
    settings, _ = _kb(tmp_path, "patrol.md")
    written = set(keyed)  # ingestion built the vocabulary of what it changed
    keys = _file_keys(settings)
    assert keys["巡更"] == "xun geng"
    assert set(keys) == written  # every word keyed by the build, none else
    made = (settings.data_dir / SOUNDS_NAME).stat().st_mtime_ns
    # a new store (a new process's): the same vocabulary, no word of it keyed
    normalised, built = _built(settings, "巡梗点一共多少个", keyed)
    assert normalised == "巡更点一共多少个"
    assert built == []
    assert (settings.data_dir / SOUNDS_NAME).stat().st_mtime_ns == made  # not rewritten
    # without the file, the store keys the same words and writes it again
    (settings.data_dir / SOUNDS_NAME).unlink()
    normalised, built = _built(settings, "巡梗点一共多少个", keyed)
    assert normalised == "巡更点一共多少个"
    assert set(built) == written
    assert _file_keys(settings) == keys


def test_a_change_of_the_documents_keys_only_the_new_words_and_rewrites_the_file(
    tmp_path: Path, keyed: list[str]
) -> None:
    settings, docs = _kb(tmp_path, "patrol.md")
    before = _file_keys(settings)
    keyed.clear()
    (docs / "rooms.md").write_text(ROOMS, encoding="utf-8")
    ingest_paths([docs], settings=settings, dataset="d")
    after = _file_keys(settings)
    assert "会议室" in after and "会议室" not in before
    assert set(before) <= set(after)
    # the words kept are not keyed again, only the new ones
    assert set(keyed) == set(after) - set(before)
    normalised, built = _built(settings, "会意室怎么订", keyed)
    assert normalised == "会议室怎么订"
    assert built == []
    # a document gone: its words leave the file at the next vocabulary
    with open_store(settings) as store:
        delete_document(store, "d", "rooms.md")
        assert store.normalise_query("报休电话多少") == "报修电话多少"
    assert set(_file_keys(settings)) == set(before)


@pytest.mark.parametrize(
    "damage",
    [
        b"\x00\xff not json",
        b'{"format": 1, "pypinyin": "0.55.0", "keys": {"\xe5\xb7',  # cut mid-write
        b"[" * 100_000,  # nested beyond the parser's depth
        b'{"format": 1, "pypinyin": "RELEASE", "keys": {"\xe5\xb7\xa1\xe6\x9b\xb4": 7}}',
        b'{"format": 1, "pypinyin": "0.0.1", "keys": {"\xe5\xb7\xa1\xe6\x9b\xb4": "x y"}}',
        b'{"format": 99, "pypinyin": "RELEASE", "keys": {}}',
        b'["keys"]',
    ],
)
def test_a_damaged_or_foreign_file_is_ignored_and_replaced(
    tmp_path: Path, keyed: list[str], damage: bytes
) -> None:
    settings, _ = _kb(tmp_path, "patrol.md")
    release = SoundKeys(settings.data_dir / SOUNDS_NAME).release
    path = settings.data_dir / SOUNDS_NAME
    path.write_bytes(damage.replace(b"RELEASE", release.encode()))
    normalised, built = _built(settings, "巡梗点一共多少个", keyed)
    assert normalised == "巡更点一共多少个"
    assert "巡更" in built  # computed again
    assert _file_keys(settings)["巡更"] == "xun geng"  # and the file replaced


def test_a_file_of_wrong_keys_for_this_release_is_what_the_store_trusts(
    tmp_path: Path, keyed: list[str]
) -> None:
    """The file is read as written (a well-formed file of the installed release): it is a
    cache of pypinyin's answers, not a second opinion. What the test shows is that the
    keys come from the file: a key changed there changes the match."""
    settings, _ = _kb(tmp_path, "patrol.md")
    assert _normalised(settings, "巡梗点一共多少个") == "巡更点一共多少个"
    keys = _file_keys(settings)
    keys["巡更"] = "something else"
    SoundKeys(settings.data_dir / SOUNDS_NAME).write(keys)
    normalised, built = _built(settings, "巡梗点一共多少个", keyed)
    assert normalised == "巡梗点一共多少个"
    assert built == []


def test_an_interrupted_write_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / SOUNDS_NAME
    keys = SoundKeys(path)
    keys.write({"巡更": "xun geng"})

    def fail(*_args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(files_module.os, "replace", fail)
    keys.write({"巡更": "xun geng", "会议": "hui yi"})
    assert keys.read() == {"巡更": "xun geng"}
    assert [p.name for p in tmp_path.iterdir()] == [SOUNDS_NAME]  # no temporary file left


def test_a_folder_that_cannot_hold_the_file_is_no_error(tmp_path: Path) -> None:
    keys = SoundKeys(tmp_path / "missing" / SOUNDS_NAME)
    keys.write({"巡更": "xun geng"})
    assert keys.read() == {}


def test_a_role_scoped_vocabulary_reads_the_file_and_never_rewrites_it(
    tmp_path: Path, keyed: list[str]
) -> None:
    """The file holds the keys of the whole knowledge base (written by the vocabulary of
    every document): the vocabulary of the documents a role set sees only reads it."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "patrol.md").write_text(
        "---\naccess_roles: [安保主管]\n---\n" + PATROL, encoding="utf-8"
    )
    (docs / "rooms.md").write_text(ROOMS, encoding="utf-8")
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    ingest_paths([docs], settings=settings, dataset="d")
    path = settings.data_dir / SOUNDS_NAME
    whole = _file_keys(settings)
    assert {"巡更", "会议室"} <= set(whole)
    made = path.stat().st_mtime_ns
    with open_store(settings) as store:
        keyed.clear()
        store.vocabulary(roles=[])
        store.vocabulary(roles=["安保主管"])
        assert keyed == []  # every word's key read from the file
        assert store.normalise_query("巡梗点一共多少个", roles=[]) == "巡梗点一共多少个"
        assert store.normalise_query("会意室怎么订", roles=[]) == "会议室怎么订"
        assert store.normalise_query("巡梗点一共多少个", roles=["安保主管"]) == "巡更点一共多少个"
    assert path.stat().st_mtime_ns == made and _file_keys(settings) == whole
    # without the file, a role-scoped build keys its words and leaves the file unwritten
    path.unlink()
    with open_store(settings) as store:
        keyed.clear()
        store.vocabulary(roles=[])
        assert "会议室" in keyed and "巡更" not in keyed
        assert not path.exists()
        store.vocabulary()  # every document's: the file is written again, whole
    assert _file_keys(settings) == whole
