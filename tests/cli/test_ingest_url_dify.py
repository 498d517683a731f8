"""``gcite ingest --url`` against a Dify server's Knowledge API (a loopback stand-in that
answers as Dify's source does): dataset names resolved to ids, a clear Chinese error
naming what is missing, never a bare ``HTTP 404``, never an empty dataset left behind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from gcite.cli import cli
from gcite.testing import live_service
from support.dify_kb_standin import DifyKnowledgeStandin


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# 水箱\n\n二次供水水箱每半年清洗一次。", encoding="utf-8")
    (folder / "b.md").write_text("# 配电\n\n配电室钥匙由值班电工保管。", encoding="utf-8")
    return folder


def _serve(standin: DifyKnowledgeStandin) -> Iterator[str]:
    with live_service(standin.app, lifespan="off") as url:
        yield url


def _ingest(url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["ingest", *args, "--url", url, "--key", "dataset-key"])
    return result.exit_code, result.output


def test_names_resolve_to_ids_and_files_upload(docs: Path) -> None:
    standin = DifyKnowledgeStandin()
    for url in _serve(standin):
        code, output = _ingest(url, str(docs), "--dataset", "物业库")
        assert code == 0, output
        assert "数据集 物业库: 新增 2，更新 0" in output
        [dataset] = standin.datasets.values()
        assert dataset["name"] == "物业库"
        assert sorted(d["name"] for d in standin.documents[dataset["id"]]) == ["a.md", "b.md"]
        # every dataset path carried the id, never the name
        assert not any("物业库" in r for r in standin.requests if r.startswith("GET /v1/datasets/"))
        again, output = _ingest(url, str(docs), "--dataset", "物业库")
        assert again == 1  # Dify has no update path here: update-by-file is missing
        assert "update-by-file" in output and "HTTP 404" not in output.splitlines()[-1]


def test_a_missing_upload_route_is_named_and_leaves_no_empty_dataset(docs: Path) -> None:
    standin = DifyKnowledgeStandin(with_upload=False)
    for url in _serve(standin):
        code, output = _ingest(url, str(docs), "--dataset", "物业库")
        assert code == 1
        assert "知识库接口缺少 POST /v1/datasets/" in output
        assert "create-by-file" in output and "无法导入" in output
        assert not output.strip().endswith("HTTP 404")
        assert standin.datasets == {}  # the dataset this run created is gone again


def test_documents_with_metadata_are_refused_where_it_is_not_kept(
    docs: Path, tmp_path: Path
) -> None:
    manifest = tmp_path / "m.json"
    manifest.write_text(
        json.dumps({"documents": {"b.md": {"access_roles": ["电工"]}}}, ensure_ascii=False),
        encoding="utf-8",
    )
    standin = DifyKnowledgeStandin()
    for url in _serve(standin):
        code, output = _ingest(url, str(docs), "--dataset", "物业库", "--manifest", str(manifest))
        assert code == 1
        assert "b.md" in output and "access_roles" in output and "doc_metadata" in output
        [dataset_id] = standin.datasets
        # the restricted document did not stay where its roles would not hold
        assert [d["name"] for d in standin.documents[dataset_id]] == ["a.md"]
