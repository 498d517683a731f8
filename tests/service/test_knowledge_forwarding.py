"""A service with ``knowledge_url`` manages and checks the other service's knowledge base.

Two real services on loopback ports: the first owns a knowledge base, the second has
``knowledge_url`` pointing at it. The second's Knowledge API is forwarded there (nothing
is written in its own data dir); a key the first refuses is a 503 with the reason, not
the caller's mistake; ``/ready`` says 503 while the first cannot be reached.
"""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
from click.testing import CliRunner
from service_streams import run_service

from gcite.cli import cli
from gcite.config import ApiKey, Settings
from gcite.knowledge import ingest_paths

ADMIN = {"Authorization": "Bearer local-admin"}


def _owner(base: Path) -> Settings:
    docs = base / "docs"
    docs.mkdir(parents=True)
    (docs / "a.md").write_text("# 水箱\n\n二次供水水箱每半年清洗一次。", encoding="utf-8")
    assert ingest_paths(
        [docs], settings=Settings.from_keys(data_dir=base / "data"), dataset="手册"
    ).ok
    return Settings.from_keys(
        data_dir=base / "data",
        retrieval_keys=[ApiKey("kb-key", ())],
        admin_keys=[ApiKey("kb-admin")],
    )


def _forwarding(base: Path, url: str, admin_key: str) -> Settings:
    (base / "own").mkdir()
    return Settings.from_keys(
        data_dir=base / "own",
        database_url=f"sqlite:///{base / 'chat.sqlite3'}",
        knowledge_url=url,
        knowledge_key="kb-key",
        knowledge_admin_key=admin_key,
        admin_keys=[ApiKey("local-admin")],
    )


def test_management_is_forwarded_to_the_knowledge_url_service(tmp_path: Path) -> None:
    with run_service(_owner(tmp_path / "owner")) as owner:
        settings = _forwarding(tmp_path, owner.base_url, "kb-admin")
        with run_service(settings) as service, httpx.Client(timeout=120) as http:
            made = http.post(f"{service.base_url}/v1/datasets", json={"name": "新"}, headers=ADMIN)
            assert made.status_code == 200, made.text
            text = {"name": "b", "text": "# 配电\n\n配电室钥匙由值班电工保管。"}
            doc = http.post(
                f"{service.base_url}/v1/datasets/新/document/create-by-text",
                json=text,
                headers=ADMIN,
            )
            assert doc.status_code == 200, doc.text
            there = http.get(
                f"{owner.base_url}/v1/datasets/新/documents",
                headers={"Authorization": "Bearer kb-admin"},
            )
            assert [d["name"] for d in there.json()["data"]] == ["b.md"]
            listed = http.get(f"{service.base_url}/v1/datasets", headers=ADMIN).json()["data"]
            assert {d["name"] for d in listed} == {"手册", "新"}
            ready = http.get(f"{service.base_url}/ready")
            assert ready.json()["checks"]["store"] is True, ready.text
        docs = tmp_path / "upload"
        docs.mkdir()
        (docs / "c.md").write_text("# 水泵\n\n水泵房每周巡检一次。", encoding="utf-8")
        env = {
            "GCITE_KNOWLEDGE_URL": owner.base_url,
            "GCITE_KNOWLEDGE_KEY": "kb-key",
            "GCITE_KNOWLEDGE_ADMIN_KEY": "kb-admin",
        }
        args = ["ingest", str(docs), "--dataset", "新", "--data-dir", str(settings.data_dir)]
        ingested = CliRunner().invoke(cli, args, env=env)
        assert ingested.exit_code == 0, ingested.output
        assert f"已写入服务: {owner.base_url}" in ingested.output and "新增 1" in ingested.output
        there = httpx.get(
            f"{owner.base_url}/v1/datasets/新/documents",
            headers={"Authorization": "Bearer kb-admin"},
            timeout=120,
        )
        assert sorted(d["name"] for d in there.json()["data"]) == ["b.md", "c.md"]
    assert list(settings.data_dir.iterdir()) == []  # nothing written locally


def test_a_refused_key_is_a_503_and_nothing_is_written(tmp_path: Path) -> None:
    with run_service(_owner(tmp_path / "owner")) as owner:
        settings = _forwarding(tmp_path, owner.base_url, "")  # kb-key is no admin key there
        with run_service(settings) as service, httpx.Client(timeout=120) as http:
            made = http.post(f"{service.base_url}/v1/datasets", json={"name": "新"}, headers=ADMIN)
            assert made.status_code == 503, made.text
            assert made.json()["code"] == "store_unavailable"
            assert "管理密钥" in made.json()["message"]
            names = http.get(
                f"{owner.base_url}/v1/datasets", headers={"Authorization": "Bearer kb-admin"}
            ).json()["data"]
            assert [d["name"] for d in names] == ["手册"]
    assert list(settings.data_dir.iterdir()) == []


def test_ready_is_503_while_the_knowledge_service_cannot_be_reached(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    settings = _forwarding(tmp_path, closed, "kb-admin")
    with run_service(settings) as service, httpx.Client(timeout=120) as http:
        ready = http.get(f"{service.base_url}/ready")
        assert ready.status_code == 503, ready.text
        assert ready.json()["checks"]["store"] is False
        listed = http.get(f"{service.base_url}/v1/datasets", headers=ADMIN)
        assert listed.status_code == 503 and "不可用" in listed.json()["message"]
