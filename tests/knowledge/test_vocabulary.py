"""Query normalisation: a user's wording mapped to the documents' own words."""

from __future__ import annotations

from pathlib import Path

import pytest

from gcite.config import Settings
from gcite.errors import ConfigError
from gcite.knowledge.sparse import simplified
from gcite.knowledge.vocabulary import (
    Vocabulary,
    VocabularyBuilder,
    build_vocabulary,
    document_vocabulary,
    parse_synonyms,
    read_synonyms,
    shipped_synonyms,
)

DOC = (
    "夜间巡更每 1 小时一次，巡更点共 24 个。消防控制室 24 小时有人值守。"
    "柴油发电机每月试运行一次。不间断电源（UPS）每季度放电测试。"
    "会议室须提前预订，报修电话 8008。电梯每十五日保养一次。"
)


@pytest.fixture(scope="module")
def vocabulary() -> Vocabulary:
    return build_vocabulary([document_vocabulary(DOC)], shipped_synonyms())


def test_a_document_gives_its_words_compounds_and_defined_short_forms() -> None:
    entry = document_vocabulary(DOC)
    words = set(entry["words"].split())
    assert {"巡更", "消防控制室", "会议室", "报修"} <= words
    assert "柴油发电机" in words  # a compound of two content words is one word
    assert entry["short"] == {"ups": "不间断电源"}
    builder = VocabularyBuilder()
    for piece in (DOC[:40], DOC[40:]):
        builder.add(piece)
    assert {"巡更", "报修"} <= set(builder.entry()["words"].split())


def test_homophone_typos_become_the_documents_words(vocabulary: Vocabulary) -> None:
    assert vocabulary.normalise("巡梗点一共多少个") == "巡更点一共多少个"
    assert vocabulary.normalise("报休电话多少") == "报修电话多少"
    assert vocabulary.normalise("会意室最多提前几天订") == "会议室最多提前几天订"


def test_short_forms_become_the_documents_long_forms(vocabulary: Vocabulary) -> None:
    assert vocabulary.normalise("柴发多久试一次") == "柴油发电机多久试一次"
    assert vocabulary.normalise("消控室在哪") == "消防控制室在哪"
    # a short form the documents define is kept, its long form added
    assert vocabulary.normalise("ups多久测一次") == "ups多久测一次 不间断电源"


def test_a_definition_inside_a_sentence_defines_the_words_after_its_verb() -> None:
    text = "二号机房配有不间断电源（UPS）。\n三号机房配有柴油发电机（DG）。\n"
    vocabulary = build_vocabulary([document_vocabulary(text)])
    assert vocabulary.normalise("UPS多久测试一次？") == "UPS多久测试一次？ 不间断电源"
    assert vocabulary.normalise("DG在哪") == "DG在哪 柴油发电机"


def test_a_definition_that_is_a_whole_name_stays_whole() -> None:
    text = "不间断电源（UPS）每季度放电测试。\n消防控制室（消控室）24 小时值守。\n"
    assert document_vocabulary(text)["short"] == {"ups": "不间断电源", "消控室": "消防控制室"}
    # a verb inside a name, before a single word, is part of it
    assert document_vocabulary("视频监控系统（CCTV）")["short"] == {"cctv": "视频监控系统"}


def test_a_chinese_short_form_defines_the_shortest_name_holding_it() -> None:
    entry = document_vocabulary("本单位设置消防控制室（消控室），高低压配电室（配电室）。")
    assert entry["short"] == {"消控室": "消防控制室", "配电室": "高低压配电室"}


def test_a_verb_before_a_single_word_is_just_outside_the_rule() -> None:
    # the verb's object is one word: the definition is read whole, as before
    entry = document_vocabulary("二号机房配有发电机（DG）。二号机房的发电机组（GS）。")
    assert entry["short"] == {"dg": "二号机房配有发电机", "gs": "发电机组"}
    # a number in brackets is no short form
    assert document_vocabulary("本条例第七十八条第二款第（十二）项")["short"] == {}


def test_synonyms_map_to_the_word_the_documents_use(vocabulary: Vocabulary) -> None:
    assert vocabulary.normalise("升降机多久保养") == "电梯多久保养"


def test_words_the_documents_use_and_real_words_stay(vocabulary: Vocabulary) -> None:
    for query in ("夜间巡更多久一次", "公司的股票期权什么时候归属", "今天天气怎么样"):
        assert vocabulary.normalise(query) == query
    assert build_vocabulary([]).normalise("巡梗点") == "巡梗点"  # nothing known: unchanged


def test_numbers_and_common_words_are_never_targets() -> None:
    vocabulary = build_vocabulary([document_vocabulary("第十章 罚则。要求是必须的。")])
    # 视障 sounds like 十章, an ordinal: a rare real word is not a typo of a number
    assert vocabulary.normalise("有视障访客能进吗") == "有视障访客能进吗"
    # 要是 is a common word, never a short form of 要求是
    assert vocabulary.normalise("要是被查到会怎么罚") == "要是被查到会怎么罚"


def test_malformed_entries_are_skipped() -> None:
    vocabulary = build_vocabulary([{"words": 3}, "x", {"short": {"a": 1}}])  # type: ignore[list-item]
    assert vocabulary.normalise("巡梗") == "巡梗"


def test_the_synonym_table_format(tmp_path: Path) -> None:
    groups = parse_synonyms("# 注释\n电梯 升降机, 直梯\n\n消火栓、消防栓  # 行尾注释\n")
    assert groups == [("电梯", "升降机", "直梯"), ("消火栓", "消防栓")]
    with pytest.raises(ConfigError, match="第 2 行只有一个词"):
        parse_synonyms("电梯 升降机\n电梯\n", source="my.txt")
    table = tmp_path / "synonyms.txt"
    table.write_text("巡更 巡逻\n", encoding="utf-8")
    assert read_synonyms(str(table)) == [("巡更", "巡逻")]
    table.write_bytes(b"\xff\xfe bad")
    with pytest.raises(ConfigError, match="不是 UTF-8"):
        read_synonyms(str(table))
    with pytest.raises(ConfigError, match="无法读取同义词表"):
        read_synonyms(str(tmp_path / "missing.txt"))


def test_the_operators_table_extends_the_shipped_one() -> None:
    vocabulary = build_vocabulary(
        [document_vocabulary(DOC)], [*shipped_synonyms(), *parse_synonyms("巡更 巡逻\n")]
    )
    assert vocabulary.normalise("巡逻多久一次") == "巡更多久一次"


def test_an_older_knowledge_base_gets_its_vocabulary_at_the_next_ingest(tmp_path: Path) -> None:
    from gcite.config import Settings
    from gcite.knowledge import ingest_paths, open_store
    from gcite.knowledge.vocabulary import CATALOG_KEY

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "patrol.md").write_text("# 巡更\n\n" + DOC, encoding="utf-8")
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    assert ingest_paths([docs], settings=settings, dataset="d").added == 1
    with open_store(settings) as store:
        assert store.normalise_query("报休电话多少") == "报修电话多少"
        # as a catalog written before vocabularies were kept
        for entry in store.catalog.datasets.values():
            for info in entry["documents"].values():
                del info[CATALOG_KEY]
        store.save()
        assert store.normalise_query("报休电话多少") == "报休电话多少"
    report = ingest_paths([docs], settings=settings, dataset="d")
    assert report.unchanged == 1 and report.chunks == 0  # nothing re-embedded
    with open_store(settings) as store:
        assert store.normalise_query("报休电话多少") == "报修电话多少"


def test_an_entry_read_with_earlier_rules_is_read_again_at_the_next_ingest(
    tmp_path: Path,
) -> None:
    from gcite.config import Settings
    from gcite.knowledge import ingest_paths, open_store
    from gcite.knowledge.vocabulary import CATALOG_KEY

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "room.md").write_text(
        "# 机房\n\n二号机房配有不间断电源（UPS），每月测试一次。\n", "utf-8"
    )
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    assert ingest_paths([docs], settings=settings, dataset="d").added == 1
    with open_store(settings) as store:
        assert store.normalise_query("UPS多久测试") == "UPS多久测试 不间断电源"
        # as an entry written by the earlier rules (the words before the name kept)
        for entry in store.catalog.datasets.values():
            for info in entry["documents"].values():
                kept = info[CATALOG_KEY]
                info[CATALOG_KEY] = {
                    "words": kept["words"],
                    "short": {"ups": "二号机房配有不间断电源"},
                }
        store.save()
        assert store.normalise_query("UPS多久测试") == "UPS多久测试 二号机房配有不间断电源"
    report = ingest_paths([docs], settings=settings, dataset="d")
    assert report.unchanged == 1 and report.chunks == 0  # nothing re-embedded
    with open_store(settings) as store:
        assert store.normalise_query("UPS多久测试") == "UPS多久测试 不间断电源"


def test_a_kept_result_is_the_result_normalising_again_gives() -> None:
    """``normalise`` keeps its results (a chat run's question is normalised, then searched
    and normalised again): what it returns from them is what a fresh vocabulary computes,
    and it keeps at most NORMALISED_KEPT of them."""
    from gcite.knowledge import vocabulary as module

    queries = ["巡梗点在哪", "柴发多久试一次", "ups 怎么测试", "会意室怎么订", "电梯保养"]
    queries.append("要是停电呢")
    built = build_vocabulary([document_vocabulary(DOC)], shipped_synonyms())
    first = [built.normalise(q) for q in queries]
    assert first[0] != queries[0]  # the queries are rewritten (not all unchanged)
    again = [built.normalise(q) for q in queries]  # from what it kept
    fresh = build_vocabulary([document_vocabulary(DOC)], shipped_synonyms())
    assert again == first == [fresh.normalise(q) for q in queries]
    assert built == fresh  # what it keeps is no part of the vocabulary's value
    for number in range(module.NORMALISED_KEPT + 10):
        built.normalise(f"巡梗{number}")
    assert len(built._normalised) <= module.NORMALISED_KEPT
    assert built.normalise(queries[1]) == first[1]


def test_what_a_document_word_gives_is_derived_once_per_vocabulary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What normalising derives from a word of the documents alone (its jieba parts, the
    pinyin key of a query window) is computed at its first use and kept: other questions
    that try the same words do not cut them again, and get what a fresh vocabulary
    computes."""
    from gcite.knowledge import vocabulary as module
    from gcite.knowledge.sparse import jieba_module

    jieba = jieba_module()
    cut = jieba.cut_for_search
    keyed = module._pinyin_key
    parts: list[str] = []
    windows: list[str] = []

    def counted_cut(text: str, *args: object, **kwargs: object) -> object:
        parts.append(text)
        return cut(text, *args, **kwargs)

    def counted_key(word: str) -> str:
        windows.append(word)
        return keyed(word)

    queries = [
        "柴发多久试一次",
        "柴发坏了找谁",
        "消控室在几楼",
        "消控室电话",
        "巡梗点在哪",
        "巡梗点几个",
    ]
    fresh = build_vocabulary([document_vocabulary(DOC)], shipped_synonyms())
    expected = [fresh.normalise(q) for q in queries]
    built = build_vocabulary([document_vocabulary(DOC)], shipped_synonyms())
    monkeypatch.setattr(jieba, "cut_for_search", counted_cut)
    monkeypatch.setattr(module, "_pinyin_key", counted_key)
    assert [built.normalise(q) for q in queries] == expected
    assert expected[0].startswith("柴油发电机") and expected[2].startswith("消防控制室")
    assert parts and len(parts) == len(set(parts))  # each long word cut once
    assert windows and len(windows) == len(set(windows))  # each window keyed once
    assert built == fresh


def test_a_replaced_catalog_object_is_never_taken_for_the_cached_one(tmp_path: Path) -> None:
    import copy

    from gcite.config import Settings
    from gcite.knowledge import ingest_paths, open_store
    from gcite.knowledge.vocabulary import CATALOG_KEY

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "patrol.md").write_text("# 巡更\n\n" + DOC, encoding="utf-8")
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    ingest_paths([docs], settings=settings, dataset="d")
    with open_store(settings) as store:
        assert store.normalise_query("报休电话多少") == "报修电话多少"
        handle = store._handle
        # another catalog object at the same revision (as a reload that kept the
        # counter would give), without the documents' vocabularies
        other = copy.deepcopy(handle.catalog)
        for entry in other.datasets.values():
            for info in entry["documents"].values():
                del info[CATALOG_KEY]
        assert other.revision == handle.catalog.revision
        with handle.lock:
            handle.catalog = other
        assert store.normalise_query("报休电话多少") == "报休电话多少"


def test_a_question_in_traditional_characters_is_read_in_simplified_ones(
    vocabulary: Vocabulary,
) -> None:
    assert simplified("報修電話是多少") == "报修电话是多少"
    assert simplified("乾粉滅火器怎麼用") == "干粉灭火器怎么用"
    # simplified text, and text without Chinese, stay as they are
    assert simplified("干部著名的公司") == "干部著名的公司"
    assert simplified("UPS 10:00") == "UPS 10:00"
    # then normalised as the simplified question is
    assert vocabulary.normalise("巡梗點一共多少個") == "巡更点一共多少个"
    assert vocabulary.normalise("消控室在哪") == "消防控制室在哪"
    assert Vocabulary().normalise("會議室") == "会议室"


def _role_kb(tmp_path: Path, documents: dict[str, tuple[str, str]]) -> tuple[Path, Settings]:
    """A knowledge base on Qdrant Edge of ``documents`` (file name -> (roles, text));
    its docs folder and settings."""
    from gcite.knowledge import ingest_paths

    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    for name, (roles, text) in documents.items():
        front = f"---\naccess_roles: [{roles}]\n---\n" if roles else ""
        (docs / name).write_text(front + text, encoding="utf-8")
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    assert ingest_paths([docs], settings=settings, dataset="d").ok
    return docs, settings


def test_role_sets_seeing_the_same_documents_share_one_vocabulary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store keeps one vocabulary per set of visible documents (not per role list), at
    most VOCABULARIES_KEPT of them, and builds them again after a change of the
    documents."""
    from gcite.knowledge import ingest_paths, open_store
    from gcite.knowledge import store as store_module

    docs, settings = _role_kb(
        tmp_path,
        {
            "patrol.md": ("安保主管", "# 巡更\n\n夜间巡更每 1 小时一次。"),
            "rooms.md": ("", "# 会议室\n\n会议室须提前预订。"),
            "power.md": ("运维工程师", "# 配电\n\n机房配备：不间断电源（UPS）。"),
        },
    )
    with open_store(settings) as store:
        nobody = store.vocabulary([])
        assert store.vocabulary(["无关角色"]) is nobody
        assert store.vocabulary(["无关角色", "另一个"]) is nobody
        guard = store.vocabulary(["安保主管"])
        assert guard is not nobody
        assert store.vocabulary([" 安保主管 ", "无关角色"]) is guard
        assert store.normalise_query("UPS在哪", roles=["安保主管"]) == "UPS在哪"
        assert store.normalise_query("UPS在哪", roles=["运维工程师"]) == "UPS在哪 不间断电源"
        # the least recently used goes first
        monkeypatch.setattr(store_module, "VOCABULARIES_KEPT", 2)
        assert store.vocabulary(["安保主管"]) is guard  # used last but one
        store.vocabulary(None)  # a fourth: the two used least recently go
        assert store.vocabulary(["安保主管"]) is guard
        assert store.vocabulary([]) is not nobody  # built again
    # a change of the documents: the vocabularies are built again
    with open_store(settings) as store:
        assert store.normalise_query("报休电话多少", roles=[]) == "报休电话多少"
        (docs / "rooms.md").write_text("# 会议室\n\n会议室须提前预订，报修电话 8008。", "utf-8")
        ingest_paths([docs], settings=settings, dataset="d", handles=store.handles)
        assert store.normalise_query("报休电话多少", roles=[]) == "报修电话多少"
        assert store.normalise_query("报休电话多少", roles=["安保主管"]) == "报修电话多少"


def test_a_document_whose_roles_the_catalog_did_not_record_rewrites_no_users_question(
    tmp_path: Path,
) -> None:
    """A catalog entry without ``doc_metadata`` (a document ingested before the catalog
    recorded metadata) cannot show whom the document is for: its words join only the
    vocabulary of internal callers (no role filter) until it is ingested again; the next
    ingest records the metadata of the unchanged document (nothing re-embedded)."""
    from gcite.knowledge import ingest_paths, open_store

    docs, settings = _role_kb(
        tmp_path,
        {
            "patrol.md": ("", "# 巡更\n\n" + DOC),
            "room.md": ("财务", "# 机房\n\n机房配有蓄电池。\n"),
        },
    )
    with open_store(settings) as store:
        assert store.normalise_query("报休电话多少", roles=[]) == "报修电话多少"
        for entry in store.catalog.datasets.values():
            for info in entry["documents"].values():
                del info["doc_metadata"]
        store.save()
        assert store.normalise_query("报休电话多少", roles=[]) == "报休电话多少"
        assert store.normalise_query("报休电话多少", roles=None) == "报修电话多少"
    report = ingest_paths([docs], settings=settings, dataset="d")
    assert report.unchanged == 2 and report.chunks == 0
    with open_store(settings) as store:
        assert store.normalise_query("报休电话多少", roles=[]) == "报修电话多少"
        # the restricted document's roles are recorded as its chunks carry them
        assert store.normalise_query("续电池多久测", roles=[]) == "续电池多久测"
        assert store.normalise_query("续电池多久测", roles=["财务"]) == "蓄电池多久测"
