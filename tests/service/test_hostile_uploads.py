"""Fuzz-style: 200+ generated hostile office files uploaded through the Knowledge API of a
real server on loopback (``create-by-file``): never a 5xx, each refusal a typed 413/415/
422 (in Dify's error shape on a connection that stays usable when refused at once, in the
batch's ``error`` status when the indexer refuses it), the service healthy, and nothing of
a refused file listed, retrievable or left in ``uploads/``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from service_streams import LiveServer, run_service

from gcite.config import ApiKey, Settings
from gcite.knowledge import ingest_paths
from gcite.knowledge.limits import MIB
from gcite.testing.indexing import indexed_async, status_url
from knowledge.embed_standin import EmbeddingStandin
from knowledge.hostile import generate

pytestmark = pytest.mark.asyncio(loop_scope="session")

ADMIN = {"Authorization": "Bearer admin-secret"}
DATASET = "fuzz"
# hang guard per request: the conversion's own deadline (convert_timeout_s) is enforced by
# the server, which answers 413 when it passes
HANG_GUARD_S = 300.0


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("hostile-api")
    docs = base / "docs"
    docs.mkdir()
    (docs / "seed.md").write_text("# 种子\n\n种子文档。\n", encoding="utf-8")
    with EmbeddingStandin() as embeddings:
        settings = Settings.from_keys(
            data_dir=base / "data",
            database_url=f"sqlite:///{base / 'chat.sqlite3'}",
            dataset=DATASET,
            embed_backend="openai",
            embed_base_url=embeddings.base_url,
            embed_model="standin",
            embed_api_key="x",
            admin_keys=[ApiKey("admin-secret", name="ops")],
            convert_max_cells=100_000,
            convert_max_unzipped_bytes=32 * MIB,
            convert_timeout_s=60.0,
            convert_cpu_s=60.0,
        )
        assert ingest_paths([docs], settings=settings, dataset=DATASET).ok
        with run_service(settings) as server:
            yield server


def _status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(field)


async def test_hostile_uploads_are_refused_by_type_and_leave_nothing(live: LiveServer) -> None:
    statuses: dict[str, int] = {}
    # the serving process's peak from here on (VmHWM reset): conversions run in children
    # bounded by setrlimit, so the server itself stays within 512 MiB of its idle size
    Path("/proc/self/clear_refs").write_text("5", encoding="ascii")
    idle = _status_bytes("VmRSS")
    async with httpx.AsyncClient(timeout=HANG_GUARD_S) as client:
        url = f"{live.base_url}/v1/datasets/{DATASET}/document/create-by-file"
        for name, data in generate(seed=34):
            response = await client.post(
                url, files={"file": (name, data)}, data={"data": "{}"}, headers=ADMIN
            )
            assert response.status_code < 500, (name, response.text)
            if response.status_code != 200:  # refused before it was accepted
                statuses[name] = response.status_code
                body = response.json()
                assert set(body) == {"code", "message", "status"}
                assert body["status"] == response.status_code in {413, 415, 422}, (name, body)
                assert "Traceback" not in body["message"] and "\n" not in body["message"]
                # the keep-alive connection stays usable after a refusal
                assert response.headers.get("connection", "").lower() != "close"
                continue
            # accepted at once; the indexer converts it and reports a refusal in its batch
            batch = response.json()["batch"]
            item = await indexed_async(
                client, status_url(live.base_url, DATASET, batch), headers=ADMIN
            )
            statuses[name] = 200
            if item["indexing_status"] == "error":
                statuses[name] = item["gcite_error"]["status"]
                assert statuses[name] in {413, 415, 422}, (name, item)
                assert "Traceback" not in item["error"] and "\n" not in item["error"]
        assert len(statuses) >= 200
        assert _status_bytes("VmHWM") - idle < 512 * MIB
        health = await client.get(live.base_url + "/health")
        assert health.status_code == 200
        listed: set[str] = set()
        page = 1
        while True:
            answer = await client.get(
                f"{live.base_url}/v1/datasets/{DATASET}/documents",
                params={"page": page, "limit": 100},
                headers=ADMIN,
            )
            listed |= {d["name"] for d in answer.json()["data"]}
            if not answer.json()["has_more"]:
                break
            page += 1
    refused = {name for name, status in statuses.items() if status != 200}
    accepted = set(statuses) - refused
    assert len(refused) >= 150 and statuses["bomb.docx"] == 413
    assert statuses["laughs.docx"] == statuses["laughs.xlsx"] == 422
    assert listed == accepted | {"seed.md"}
    uploads = Path(live.settings.data_dir) / "uploads"
    kept = {p.name for p in uploads.rglob("*") if p.is_file()}
    assert kept == accepted | {f"{name}.meta.json" for name in accepted}
