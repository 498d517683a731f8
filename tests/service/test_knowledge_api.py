"""Knowledge-base management through the running service (issue 16 item 8), in the shape
of Dify's Knowledge API: admin keys only; documents change while chats stream, and the
next answer sees the new document."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_streams import LiveServer, body, context_blocks, raw_events, run_service

from gcite.config import ApiKey, Settings
from gcite.knowledge import ingest_paths
from gcite.testing.indexing import indexed_async, status_url
from support.openai_standin import OpenAIStandin, Script

pytestmark = pytest.mark.asyncio(loop_scope="session")

DATASET = "物业手册"
ADMIN = {"Authorization": "Bearer admin-secret"}
GUARD = {"Authorization": "Bearer app-guard"}
NEEDLE = "紫藤花园"
NEW_FACT = f"访客自行车统一停放在{NEEDLE}东侧的自行车棚，夜间二十二点后上锁。"
QUESTION = "访客的自行车停在哪里？"


def _answer(request: dict[str, Any]) -> Script:
    """Cite the block that holds the needle, if the prompt has one."""
    blocks = context_blocks(request)
    found = [i for i, text in blocks.items() if NEEDLE in text]
    if found:
        return Script.text(f"自行车停在{NEEDLE}东侧[C:{found[0]}]。", size=3)
    return Script.text("根据现有资料无法确定。", size=3)


@pytest.fixture(scope="module")
def live(
    tmp_path_factory: pytest.TempPathFactory, llm_standin: OpenAIStandin
) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("kbapi")
    docs = base / "docs"
    docs.mkdir()
    (docs / "visitor.md").write_text(
        "# 访客登记\n\n访客进入大厦须在一层大堂登记并出示身份证件。", encoding="utf-8"
    )
    data = base / "data"
    assert ingest_paths([docs], settings=Settings.from_keys(data_dir=data), dataset=DATASET).ok
    settings = Settings.from_keys(
        data_dir=data,
        database_url=f"sqlite:///{base / 'chat.sqlite3'}",
        dataset=DATASET,
        ping_interval_s=0.2,
        llm_base_url=llm_standin.base_url,
        llm_model="standin",
        app_keys=[ApiKey("app-guard", ("安保主管",)), ApiKey("app-visitor", (), name="v")],
        retrieval_keys=[ApiKey("kb-guard", ("安保主管",))],
        admin_keys=[ApiKey("admin-secret", name="ops")],
        allow_any_key=True,
    )
    with run_service(settings) as server:
        yield server


async def _dataset_id(live: LiveServer, client: httpx.AsyncClient) -> str:
    page = await client.get(live.base_url + "/v1/datasets", headers=ADMIN)
    assert page.status_code == 200, page.text
    return next(d["id"] for d in page.json()["data"] if d["name"] == DATASET)


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer nope"}, 401),
        (GUARD, 403),
        ({"Authorization": "Bearer app-visitor"}, 403),
        ({"Authorization": "Bearer kb-guard"}, 403),
    ],
)
async def test_only_admin_keys_manage(
    live: LiveServer, client: httpx.AsyncClient, headers: dict[str, str], status: int
) -> None:
    for method, path, payload in [
        ("GET", "/v1/datasets", None),
        ("POST", "/v1/datasets", {"name": "x"}),
        ("POST", f"/v1/datasets/{DATASET}/document/create-by-text", {"name": "a", "text": "b"}),
        ("DELETE", f"/v1/datasets/{DATASET}", None),
        ("DELETE", f"/v1/datasets/{DATASET}/documents/visitor.md", None),
    ]:
        response = await client.request(method, live.base_url + path, json=payload, headers=headers)
        assert response.status_code == status, (path, response.text)
        assert response.json()["status"] == status
        assert set(response.json()) == {"code", "message", "status"}
    listed = await client.get(live.base_url + f"/v1/datasets/{DATASET}/documents", headers=ADMIN)
    assert [d["name"] for d in listed.json()["data"]] == ["visitor.md"]


async def test_datasets_in_dify_shape(live: LiveServer, client: httpx.AsyncClient) -> None:
    url = live.base_url + "/v1/datasets"
    created = await client.post(url, json={"name": "临时库"}, headers=ADMIN)
    assert created.status_code == 200, created.text
    new = created.json()
    assert new["name"] == "临时库" and new["document_count"] == 0 and new["id"]
    again = await client.post(url, json={"name": "临时库"}, headers=ADMIN)
    assert again.status_code == 409 and again.json()["code"] == "dataset_name_duplicate"
    bad = await client.post(url, json={"name": ""}, headers=ADMIN)
    assert bad.status_code == 400
    page = (await client.get(url, params={"limit": 1, "page": 1}, headers=ADMIN)).json()
    assert page["total"] == 2 and page["limit"] == 1 and page["has_more"] is True
    one = await client.get(f"{url}/{new['id']}", headers=ADMIN)
    assert one.status_code == 200 and one.json()["name"] == "临时库"
    gone = await client.delete(f"{url}/{new['id']}", headers=ADMIN)
    assert gone.status_code == 204
    missing = await client.get(f"{url}/{new['id']}", headers=ADMIN)
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"


async def test_documents_create_update_status_delete(
    live: LiveServer, client: httpx.AsyncClient
) -> None:
    dataset_id = await _dataset_id(live, client)
    base = f"{live.base_url}/v1/datasets/{dataset_id}"
    made = await client.post(
        base + "/document/create-by-text",
        json={
            "name": "电梯",
            "text": "# 电梯\n\n电梯每十五日维保一次。",
            "indexing_technique": "high_quality",
        },
        headers=ADMIN,
    )
    assert made.status_code == 200, made.text
    doc, batch = made.json()["document"], made.json()["batch"]
    assert doc["name"] == "电梯.md" and doc["indexing_status"] == "waiting"
    entry = await indexed_async(client, f"{base}/documents/{batch}/indexing-status", headers=ADMIN)
    assert entry["id"] == doc["id"] and entry["indexing_status"] == "completed"
    assert entry["completed_segments"] == entry["total_segments"] >= 1
    updated = await client.post(
        f"{base}/documents/{doc['id']}/update-by-text",
        json={"name": "电梯", "text": "# 电梯\n\n电梯每七日维保一次。"},
        headers=ADMIN,
    )
    assert updated.status_code == 200 and updated.json()["document"]["id"] == doc["id"]
    await indexed_async(
        client, f"{base}/documents/{updated.json()['batch']}/indexing-status", headers=ADMIN
    )
    listed = (await client.get(base + "/documents", headers=ADMIN)).json()
    assert sorted(d["name"] for d in listed["data"]) == ["visitor.md", "电梯.md"]
    assert listed["total"] == 2
    one = await client.get(f"{base}/documents/{doc['id']}", headers=ADMIN)
    assert one.json()["name"] == "电梯.md"
    deleted = await client.delete(f"{base}/documents/{doc['id']}", headers=ADMIN)
    assert deleted.status_code == 204
    again = await client.delete(f"{base}/documents/{doc['id']}", headers=ADMIN)
    assert again.status_code == 404 and again.json()["code"] == "not_found"


async def test_upload_with_roles_is_never_public(
    live: LiveServer, client: httpx.AsyncClient
) -> None:
    base = f"{live.base_url}/v1/datasets/{DATASET}"
    secret = "# 金库\n\n金库备用钥匙存放在四号保险柜。".encode()
    data = {"indexing_technique": "high_quality", "doc_metadata": {"access_roles": ["安保主管"]}}
    made = await client.post(
        base + "/document/create-by-file",
        files={"file": ("vault.md", secret, "text/markdown")},
        data={"data": json.dumps(data, ensure_ascii=False)},
        headers=ADMIN,
    )
    assert made.status_code == 200, made.text
    await indexed_async(
        client, f"{base}/documents/{made.json()['batch']}/indexing-status", headers=ADMIN
    )
    retrieval = live.base_url + "/retrieval"
    query = {
        "knowledge_id": DATASET,
        "query": "金库备用钥匙在哪里",
        "retrieval_setting": {"top_k": 5, "score_threshold": 0},
    }
    seen = await client.post(retrieval, json=query, headers={"Authorization": "Bearer kb-guard"})
    assert "金库" in {r["title"] for r in seen.json()["records"]}
    anyone = await client.post(retrieval, json=query, headers={"Authorization": "Bearer anyone"})
    assert anyone.status_code == 200
    assert "金库" not in {r["title"] for r in anyone.json()["records"]}
    # malformed roles or a misspelt role field: 400, nothing stored, nothing widened
    for meta in (
        {"access_roles": {"安保主管": True}},
        {"accessRoles": ["安保主管"]},
        [{"name": "access_roles", "value": [None]}],
    ):
        refused = await client.post(
            base + "/document/create-by-text",
            json={"name": "leak", "text": "# 泄露\n\n金库备用钥匙另有一把。", "doc_metadata": meta},
            headers=ADMIN,
        )
        assert refused.status_code == 400 and "access_roles" in refused.json()["message"]
    listed = (await client.get(base + "/documents", headers=ADMIN)).json()
    assert "leak.md" not in {d["name"] for d in listed["data"]}
    no_file = await client.post(
        base + "/document/create-by-file", data={"data": "{}"}, headers=ADMIN
    )
    assert no_file.status_code == 400
    await client.delete(f"{base}/documents/vault.md", headers=ADMIN)


async def test_update_while_chats_stream_and_the_next_answer_sees_it(
    live: LiveServer, llm: OpenAIStandin, client: httpx.AsyncClient
) -> None:
    url = live.base_url + "/v1/chat-messages"
    before = await raw_events(client, url, body(QUESTION, user="before"), GUARD)
    assert NEEDLE not in json.dumps(before, ensure_ascii=False)

    # three answers streaming while the document is added: each holds after its first
    # delta until the update is in (the stand-in's gate), however slow the machine
    gate = threading.Event()
    llm.push(*[Script.text("访客登记在一层大堂办理。" * 4, size=2, gate=gate)] * 3)
    started = asyncio.Event()

    ended: list[float] = []

    async def chat(user: str) -> list[dict[str, Any]]:
        events = []
        async with client.stream(
            "POST", url, json=body("访客怎么登记？", user=user), headers=GUARD
        ) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
                    if events[-1].get("event") == "message":
                        started.set()
        ended.append(time.monotonic())
        return events

    streams = [asyncio.ensure_future(chat(f"streamer-{i}")) for i in range(3)]
    await asyncio.wait_for(started.wait(), 120)  # a hang guard
    update_sent = time.monotonic()
    created = await client.post(
        f"{live.base_url}/v1/datasets/{DATASET}/document/create-by-text",
        json={"name": "自行车停放", "text": f"# 自行车停放\n\n{NEW_FACT}"},
        headers=ADMIN,
    )
    assert created.status_code == 200, created.text
    batch = created.json()["batch"]
    await indexed_async(client, status_url(live.base_url, DATASET, batch), headers=ADMIN)
    gate.set()
    for finished in await asyncio.gather(*streams):
        done = next(e for e in finished if e["event"] == "workflow_finished")
        assert finished[-1]["event"] == "message_end", finished[-1]  # Dify's terminal order
        assert done["data"]["status"] == "succeeded"
        assert "message_end" in [e["event"] for e in finished]
    assert min(ended) > update_sent, "the streams were not open during the update"
    llm.responder = _answer
    after = await raw_events(client, url, body(QUESTION, user="after"), GUARD)
    end = next(e for e in after if e["event"] == "message_end")
    titles = [r["document_name"] for r in end["metadata"]["retriever_resources"]]
    assert "自行车停放.md" in titles
    answer = "".join(e.get("answer", "") for e in after if e["event"] == "message")
    assert NEEDLE in answer

    # deleting it through the API: the next answer no longer sees it
    removed = await client.delete(
        f"{live.base_url}/v1/datasets/{DATASET}/documents/自行车停放.md", headers=ADMIN
    )
    assert removed.status_code == 204
    gone = await raw_events(client, url, body(QUESTION, user="gone"), GUARD)
    assert NEEDLE not in json.dumps(gone, ensure_ascii=False)


async def test_gcite_ingest_url_uses_the_management_api(
    live: LiveServer, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    from click.testing import CliRunner

    from gcite.cli import cli

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 水箱\n\n二次供水水箱每半年清洗一次。", encoding="utf-8")
    (docs / "b.md").write_text("# 配电\n\n配电室钥匙由值班电工保管。", encoding="utf-8")
    (docs / "c.md").write_text("# 泄露\n\n不应公开。", encoding="utf-8")
    manifest = tmp_path / "m.json"
    manifest.write_text(
        json.dumps(
            {
                "dataset_name": "远程库",
                "documents": {
                    "b.md": {"access_roles": ["电工"]},
                    "c.md": {"access_roles": {"电工": True}},
                },
            },
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    args = ["ingest", str(docs), "--url", live.base_url, "--manifest", str(manifest)]

    def invoke(extra: list[str]) -> Any:
        return CliRunner().invoke(cli, [*args, *extra])

    first = await asyncio.to_thread(invoke, ["--key", "admin-secret"])
    assert first.exit_code == 1, first.output  # c.md refused, the rest uploaded
    assert f"已写入服务: {live.base_url}" in first.output
    assert "数据集 远程库: 新增 2，更新 0" in first.output
    assert "c.md" in first.output and "access_roles" in first.output
    (docs / "c.md").unlink()
    second = await asyncio.to_thread(invoke, ["--key", "admin-secret"])
    assert second.exit_code == 0, second.output
    assert "新增 0，更新 2" in second.output
    refused = await asyncio.to_thread(invoke, ["--key", "app-guard"])
    assert refused.exit_code == 1 and "管理密钥" in refused.output
    missing = await asyncio.to_thread(invoke, [])
    assert missing.exit_code == 1 and "--key" in missing.output
    page = await client.get(f"{live.base_url}/v1/datasets/远程库/documents", headers=ADMIN)
    listed = page.json()
    assert sorted(d["name"] for d in listed["data"]) == ["a.md", "b.md"]
