"""Jurisdiction: a place's regulations ranked for questions about that place, national
laws for questions naming none (pure rules, then on a real store)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gcite.config import Settings
from gcite.knowledge import ingest_paths, open_store
from gcite.knowledge.jurisdiction import (
    KEPT_LEVEL,
    MAX_PLACE,
    NATIONAL_BESIDE_PLACE,
    OTHER_PLACE,
    UNASKED_PLACE,
    catalog_places,
    document_place,
    hit_title,
    localise,
    penalty,
    places_named,
    shifted,
)
from gcite.knowledge.stores.base import Hit
from support.pg import fresh_database


def test_a_local_regulation_names_its_place_first() -> None:
    assert document_place("北京市消防条例") == "北京"
    assert document_place("广东省安全生产条例（2023年修订）") == "广东"
    # an autonomous region is asked by its place's name, without the people's
    assert document_place("新疆维吾尔自治区消防条例") == "新疆"
    assert document_place("广西壮族自治区消防条例") == "广西"
    assert document_place("延边朝鲜族自治州消防条例") == "延边"
    inner = document_place("内蒙古自治区消防条例")
    assert places_named("内蒙古的商场", {inner}) == places_named("内蒙的商场", {inner}) == {inner}
    assert document_place("深圳市物业管理条例") == "深圳"
    # national laws and regulations name no place
    assert document_place("中华人民共和国消防法（2021年修正）") == ""
    assert document_place("物业管理条例") == ""
    # a word ending in 市 whose name has one character, or no place word at all
    assert document_place("城市房地产管理法") == ""
    assert document_place("门市部值班制度") == ""
    assert document_place("") == ""


def test_the_place_name_needs_two_characters_and_a_place_tag() -> None:
    tags = {"甲乙市": "ns", "丙市": "ns", "丁戊省": "n"}
    assert document_place("甲乙市供暖条例", tags) == "甲乙"  # two characters: a place
    assert document_place("丙市供暖条例", tags) == ""  # one character: none
    assert document_place("丁戊省供暖条例", tags) == ""  # not tagged as a place name


def test_the_place_word_is_looked_for_in_the_titles_first_characters() -> None:
    inside = "子" * (MAX_PLACE - 1) + "市"
    outside = "子" * MAX_PLACE + "市"
    tags = {inside: "ns", outside: "ns"}
    assert document_place(inside + "条例", tags) == inside[:-1]
    assert document_place(outside + "条例", tags) == ""


def test_a_hits_title_is_its_document_title_else_its_file_name() -> None:
    assert hit_title({"doc_metadata": {"document_title": "上海市消防条例"}}) == "上海市消防条例"
    assert hit_title({"doc_metadata": {"document_title": " "}, "document_name": "a.md"}) == "a.md"
    assert hit_title({"document_name": "北京市消防条例.md"}) == "北京市消防条例.md"
    assert catalog_places(["北京市消防条例", "消防法", "上海市消防条例"]) == {"北京", "上海"}


def test_which_places_a_question_names() -> None:
    places = {"北京", "上海"}
    assert places_named("北京的写字楼停车场要配灭火器吗", places) == {"北京"}
    assert places_named("写字楼停车场要配灭火器吗", places) == frozenset()
    assert places_named("广州的写字楼", places) == frozenset()  # no regulations of it


def test_penalties_by_place() -> None:
    none: frozenset[str] = frozenset()
    assert penalty("", none) == 0.0
    assert penalty("北京", none) == UNASKED_PLACE
    assert penalty("北京", frozenset({"北京"})) == 0.0
    assert penalty("上海", frozenset({"北京"})) == OTHER_PLACE
    assert penalty("", frozenset({"北京"})) == NATIONAL_BESIDE_PLACE


def test_the_shift_is_on_the_logit_and_keeps_the_background() -> None:
    assert shifted(0.7, 0.0) == 0.7
    assert shifted(0.8, 2.0) == pytest.approx(1 / (1 + math.exp(-(math.log(4) - 2.0))))
    assert shifted(0.99, 2.0) == pytest.approx(1 / (1 + math.exp(-(math.log(99) - 2.0))))
    assert shifted(0.99, 2.0) > 0.9  # a near-certain match stays above the threshold
    # never under KEPT_LEVEL: just above it the score falls to the level, under it stays
    assert shifted(KEPT_LEVEL + 0.01, 3.0) == KEPT_LEVEL
    assert shifted(KEPT_LEVEL - 0.01, 3.0) == KEPT_LEVEL - 0.01
    assert shifted(0.0, 3.0) == 0.0


def _hit(title: str, score: float) -> Hit:
    return Hit(score, {"doc_metadata": {"document_title": title}}, title)


def test_localise_ranks_national_laws_for_questions_naming_no_place() -> None:
    hits = [_hit("北京市供暖条例", 0.95), _hit("供暖管理办法", 0.9), _hit("上海市供暖条例", 0.8)]
    ranked = localise(hits, "暖气不热找谁", {"北京", "上海"})
    assert [h.id for h in ranked] == ["供暖管理办法", "北京市供暖条例", "上海市供暖条例"]
    assert ranked[0].score == 0.9  # national: untouched
    assert ranked[1].score == pytest.approx(shifted(0.95, UNASKED_PLACE))


def test_localise_ranks_the_named_places_regulation_first() -> None:
    hits = [_hit("上海市供暖条例", 0.95), _hit("供暖管理办法", 0.9), _hit("北京市供暖条例", 0.85)]
    ranked = localise(hits, "北京暖气不热找谁", {"北京", "上海"})
    assert [h.id for h in ranked] == ["北京市供暖条例", "供暖管理办法", "上海市供暖条例"]
    assert ranked[0].score == 0.85


def test_localise_leaves_a_knowledge_base_without_places_alone() -> None:
    hits = [_hit("供暖管理办法", 0.5), _hit("员工手册", 0.7)]
    assert localise(hits, "北京暖气不热找谁", set()) == hits


ARTICLE = (
    "第十条 供暖单位应当在供暖期开始前完成设施检修，供暖期内室温不得低于十八摄氏度。\n\n"
    "第十一条 用户发现室温不达标的，可以向供暖单位报修，供暖单位应当在二十四小时内处理。\n"
)


def test_a_store_ranks_by_jurisdiction(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("供暖管理办法", "北京市供暖条例", "上海市供暖条例"):
        (docs / f"{name}.md").write_text(f"# {name}\n\n{ARTICLE}", encoding="utf-8")
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    assert ingest_paths([docs], settings=settings, dataset="供暖").ok
    with open_store(settings) as store:
        assert store.places() == {"北京", "上海"}

        def first(query: str) -> str:
            items = store.search(query, top_k=3)
            return str(items[0]["metadata"]["document_name"])

        query = "暖气室温不达标报修后多久处理"
        assert first(query) == "供暖管理办法.md"
        assert first("北京" + query) == "北京市供暖条例.md"
        assert first("上海" + query) == "上海市供暖条例.md"


def test_a_unit_that_begins_a_word_is_no_place() -> None:
    # "中国" is a place name, but "中国市场..." is about a market, not a city "中国"
    assert document_place("中国市场监督管理总局令") == ""
    assert document_place("美国市场调研报告") == ""
    tags = {"甲乙": "ns", "市场": "n"}
    assert document_place("甲乙市场管理办法", tags) == ""
    assert document_place("甲乙市供暖条例", tags) == "甲乙"


def test_documents_of_one_jurisdiction_have_nothing_to_prefer() -> None:
    assert catalog_places(["北京市某大厦安保手册"]) == frozenset()
    assert catalog_places(["北京市物业管理条例", "北京市消防条例"]) == frozenset()
    assert catalog_places(["消防法", "物业管理条例"]) == frozenset()
    assert catalog_places(["北京市消防条例", "消防法"]) == {"北京"}


@pytest.fixture(params=["edge", "pgvector"])
def store_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """Settings of an empty knowledge base on Qdrant Edge, or on pgvector (a database of
    its own on the test server)."""
    if request.param == "edge":
        return Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    url = fresh_database(request.getfixturevalue("pgvector_url"))
    return Settings.from_keys(
        data_dir=tmp_path / "data",
        embed_backend="use",
        store="pgvector",
        knowledge_database_url=url,
    )


def test_the_places_are_read_from_the_titles_the_chunks_carry(
    tmp_path: Path, store_settings: Settings
) -> None:
    # file names that name no place; the titles are the documents' first headings
    docs = tmp_path / "docs"
    docs.mkdir()
    for number, name in enumerate(("供暖管理办法", "北京市供暖条例", "上海市供暖条例")):
        (docs / f"doc{number}.md").write_text(f"# {name}\n\n{ARTICLE}", encoding="utf-8")
    settings = store_settings
    assert ingest_paths([docs], settings=settings, dataset="供暖").ok
    with open_store(settings) as store:
        assert store.places() == {"北京", "上海"}
        items = store.search("上海暖气室温不达标报修后多久处理", top_k=3)
        assert items[0]["metadata"]["doc_metadata"]["document_title"] == "上海市供暖条例"


HANDBOOK = "夜间巡更每两小时一次，共打卡二十四个点位，漏打卡须在交班前补登记。\n"


def _handbook_scores(tmp_path: Path, title: str) -> list[float]:
    docs = tmp_path / title
    docs.mkdir()
    (docs / "handbook.md").write_text(f"# {title}\n\n{HANDBOOK}", encoding="utf-8")
    settings = Settings.from_keys(data_dir=tmp_path / f"data-{title}", embed_backend="use")
    assert ingest_paths([docs], settings=settings, dataset="手册").ok
    with open_store(settings) as store:
        return [float(i["metadata"]["score"]) for i in store.search("夜班几个小时巡一次", top_k=3)]


def test_a_handbook_titled_after_its_city_scores_as_any_handbook(tmp_path: Path) -> None:
    # the title is embedded with the chunk: the scores differ a little, never by a
    # jurisdiction's shift (a question that names no place, one place in the knowledge base)
    (plain,) = _handbook_scores(tmp_path, "某大厦安保手册")
    (city,) = _handbook_scores(tmp_path, "北京市某大厦安保手册")
    assert plain > 0.5 and city == pytest.approx(plain, abs=0.1)


def test_a_title_naming_no_kind_of_regulation_names_no_place() -> None:
    assert document_place("北京市某大厦消防应急预案") == ""
    assert document_place("北京市某物业服务有限公司员工手册") == ""
    assert document_place("上海市住宅物业管理规定") == "上海"
    assert document_place("北京市消防条例.md") == "北京"


FIRE = "发现火情应当立即拨打消防控制室电话并按下最近的手动报警按钮，然后组织人员疏散。\n"


def _patrol_score(tmp_path: Path, title: str) -> float:
    """The best score for a patrol question in a handbook of two documents, the patrol
    rules titled ``title``."""
    docs = tmp_path / title
    docs.mkdir()
    (docs / "patrol.md").write_text(f"# {title}\n\n{HANDBOOK}", encoding="utf-8")
    (docs / "fire.md").write_text(f"# 消防应急预案\n\n{FIRE}", encoding="utf-8")
    settings = Settings.from_keys(data_dir=tmp_path / f"data-{title}", embed_backend="use")
    assert ingest_paths([docs], settings=settings, dataset="手册").ok
    with open_store(settings) as store:
        items = store.search("夜班几个小时巡一次", top_k=3)
    assert items[0]["metadata"]["doc_metadata"]["document_title"] == title
    return float(items[0]["metadata"]["score"])


def test_rules_titled_after_their_city_are_no_local_regulation(tmp_path: Path) -> None:
    # the title is embedded with the chunk: the scores differ a little, never by a
    # jurisdiction's shift (the other document names no place)
    plain = _patrol_score(tmp_path, "某大厦巡更规范")
    city = _patrol_score(tmp_path, "北京市某大厦巡更规范")
    assert plain > 0.5 and city == pytest.approx(plain, abs=0.1)


def test_a_question_naming_an_autonomous_region_names_its_regulation() -> None:
    hits = [_hit("消防管理办法", 0.9), _hit("新疆维吾尔自治区消防条例", 0.85)]
    places = catalog_places(h.payload["doc_metadata"]["document_title"] for h in hits)
    ranked = localise(hits, "新疆的商场要配几个灭火器", places)
    assert ranked[0].id == "新疆维吾尔自治区消防条例" and ranked[0].score == 0.85


def test_titles_a_caller_cannot_see_do_not_steer_the_ranking(tmp_path: Path) -> None:
    """The places a search prefers or lowers are those of the titles of the documents the
    caller may see: a restricted regulation's place changes no one else's scores."""

    def ingested(name: str, documents: dict[str, str]) -> Settings:
        docs = tmp_path / name
        docs.mkdir()
        for title, roles in documents.items():
            front = f"---\naccess_roles: [{roles}]\n---\n" if roles else ""
            (docs / f"{title}.md").write_text(f"{front}# {title}\n\n{ARTICLE}", encoding="utf-8")
        settings = Settings.from_keys(data_dir=tmp_path / f"data-{name}", embed_backend="use")
        assert ingest_paths([docs], settings=settings, dataset="供暖").ok
        return settings

    public = {"供暖管理办法": "", "北京市供暖条例": ""}
    with_restricted = ingested("restricted", {**public, "上海市供暖条例": "上海办事处"})
    only_public = ingested("public", public)
    query = "上海暖气室温不达标报修后多久处理"

    def scores(settings: Settings, roles: list[str]) -> list[tuple[str, float]]:
        with open_store(settings) as store:
            items = store.search(query, roles=roles, top_k=5)
        return [(i["metadata"]["document_name"], i["metadata"]["score"]) for i in items]

    with open_store(with_restricted) as store:
        assert store.places(None) == {"北京", "上海"}
        assert store.places(["上海办事处"]) == {"北京", "上海"}
        assert store.places([]) == {"北京"}
        assert store.places(["别的角色"]) == {"北京"}
    assert scores(with_restricted, []) == scores(only_public, [])
    assert scores(with_restricted, ["上海办事处"])[0][0] == "上海市供暖条例.md"
