"""``gcite ingest`` and ``gcite search`` through Click, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gcite.cli import cli
from gcite.testing.corpus import MANIFEST, write_mixed


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    base = tmp_path_factory.mktemp("cli")
    write_mixed(base / "docs")
    (base / "manifest.json").write_text(json.dumps(MANIFEST, ensure_ascii=False), encoding="utf-8")
    env = {"GCITE_EMBED_BACKEND": "use", "GCITE_DATA_DIR": str(base / "env-data")}
    result = CliRunner().invoke(
        cli,
        [
            "ingest",
            str(base / "docs"),
            "--manifest",
            str(base / "manifest.json"),
            "--data-dir",
            str(base / "data"),
            "--chunk-size",
            "300",
            "--quiet",
        ],
        env=env,
    )
    # two broken files -> exit 1, but the rest is ingested and reported
    assert result.exit_code == 1, result.output
    assert "数据集 园区制度库: 新增 5" in result.output
    assert "失败: " in result.output and "broken.pdf" in result.output
    assert "Traceback" not in result.output
    return base, env


def test_search_json_returns_kr_items_with_role_filter(kb: tuple[Path, dict[str, str]]) -> None:
    base, env = kb
    args = ["search", "电梯维保记录", "--json", "--data-dir", str(base / "data"), "--top-k", "3"]
    result = CliRunner().invoke(cli, [*args, "--role", "运维工程师"], env=env)
    assert result.exit_code == 0, result.output
    items = json.loads(result.output)
    assert items[0]["title"] == "elevator.txt"
    assert items[0]["metadata"]["dataset_name"] == "园区制度库"
    denied = CliRunner().invoke(cli, [*args, "--role", "安保主管"], env=env)
    assert "elevator.txt" not in {i["title"] for i in json.loads(denied.output)}
    none = CliRunner().invoke(cli, [*args, "--no-roles"], env=env)
    assert "elevator.txt" not in {i["title"] for i in json.loads(none.output)}


def test_search_filter_and_text_output(kb: tuple[Path, dict[str, str]]) -> None:
    base, env = kb
    condition = {
        "logical_operator": "or",
        "conditions": [{"not": {"name": "year", "comparison_operator": "empty"}}],
    }
    result = CliRunner().invoke(
        cli,
        ["search", "管理", "--filter", json.dumps(condition), "--data-dir", str(base / "data")],
        env=env,
    )
    assert result.exit_code == 0, result.output
    assert "停车场管理办法" in result.output or "园区消防巡查制度" in result.output
    assert "电梯" not in result.output


def test_env_data_dir_is_used_and_flag_overrides_it(kb: tuple[Path, dict[str, str]]) -> None:
    base, env = kb
    # GCITE_DATA_DIR points to an empty place: a clear error, not empty results
    result = CliRunner().invoke(cli, ["search", "停车"], env=env)
    assert result.exit_code == 1
    assert result.output.startswith("错误: 知识库数据目录不存在")
    ok = CliRunner().invoke(cli, ["search", "停车", "--data-dir", str(base / "data")], env=env)
    assert ok.exit_code == 0 and "停车场管理办法" in ok.output


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--filter", "{not json"], "--filter 不是有效的 JSON"),
        (["--filter", "[1]"], "--filter 必须是 JSON 对象"),
        (
            ["--filter", '{"name": "year", "comparison_operator": "~", "value": 1}'],
            "未知的比较运算符",
        ),
        (["--dataset", "没有的库"], "没有数据集"),
    ],
)
def test_search_errors_are_one_chinese_line(
    kb: tuple[Path, dict[str, str]], extra: list[str], message: str
) -> None:
    base, env = kb
    result = CliRunner().invoke(
        cli, ["search", "停车", "--data-dir", str(base / "data"), *extra], env=env
    )
    assert result.exit_code == 1
    assert result.output.startswith("错误: ") and message in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_ingest_missing_path_is_reported(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["ingest", str(tmp_path / "nope"), "--dataset", "x", "--data-dir", str(tmp_path / "d")],
        env={"GCITE_EMBED_BACKEND": "use"},
    )
    assert result.exit_code == 1
    assert "路径不存在" in result.output


def test_ingest_shows_a_progress_bar(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 标题\n\n第一条 内容。", encoding="utf-8")
    result = CliRunner().invoke(
        cli,
        ["ingest", str(docs), "--dataset", "x", "--data-dir", str(tmp_path / "d")],
        env={"GCITE_EMBED_BACKEND": "use"},
    )
    assert result.exit_code == 0, result.output
    assert "导入" in result.output and "1/1" in result.output
    assert "新增 1" in result.output


def test_ingest_without_a_dataset_name_uses_default(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 标题\n\n第一条 内容。", encoding="utf-8")
    result = CliRunner().invoke(
        cli,
        ["ingest", str(docs), "--quiet", "--data-dir", str(tmp_path / "d")],
        env={"GCITE_EMBED_BACKEND": "use", "GCITE_DATASET": ""},
    )
    assert result.exit_code == 0, result.output
    assert "数据集 default: 新增 1" in result.output


def test_ingest_says_which_data_dir_it_wrote_to_relative_to_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 标题\n\n第一条 内容。", encoding="utf-8")
    (tmp_path / "etc").mkdir()
    cfg = tmp_path / "etc" / "gcite.toml"
    cfg.write_text("data_dir = 'kb'\nembed_backend = 'use'\n", encoding="utf-8")
    monkeypatch.chdir(docs)
    result = CliRunner().invoke(
        cli, ["ingest", str(docs), "--quiet", "--config", str(cfg)], env={"GCITE_DATASET": ""}
    )
    assert result.exit_code == 0, result.output
    assert f"数据目录: {(tmp_path / 'etc' / 'kb').resolve()}" in result.output
    assert (tmp_path / "etc" / "kb").is_dir() and not (docs / "kb").exists()
