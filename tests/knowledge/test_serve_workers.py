"""``gcite serve --workers N``: a knowledge process and N chat workers, real processes.

The corpus of the store contract (:mod:`gcite.testing.corpus`) is ingested into a temp data dir;
``gcite serve --workers 2`` runs offline (extractive backend) on a free port. Every worker
answers from the knowledge process's ``/retrieval`` and keeps the caller's roles.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from gcite.config import Settings
from gcite.knowledge import ingest_paths
from gcite.service.instances import ORPHANED, process_start
from gcite.service.runs import INTERRUPTED
from gcite.testing import free_port
from gcite.testing.corpus import MANIFEST, write_mixed
from support.openai_standin import SPLIT_DELTAS, SPLIT_SHOWN, OpenAIStandin, Script
from support.serve_workers import ServeWorkers
from support.serve_workers import children as _children

DATASET = "园区制度库"


def _ingest(base: Path) -> Path:
    data = base / "data"
    write_mixed(base / "docs")
    manifest = base / "manifest.json"
    manifest.write_text(json.dumps(MANIFEST, ensure_ascii=False), encoding="utf-8")
    settings = Settings.from_keys(data_dir=data, embed_backend="use")
    ingest_paths([base / "docs"], settings=settings, dataset=DATASET, manifest=manifest)
    (data / "gcite.toml").write_text(
        '[[app_keys]]\nkey = "ops"\nroles = ["运维工程师"]\n\n'
        '[[app_keys]]\nkey = "pub"\nroles = []\npublic_only = true\n',
        encoding="utf-8",
    )
    return data


def _titles(answer: dict[str, object]) -> set[str]:
    meta = answer["metadata"]
    assert isinstance(meta, dict)
    return {str(r.get("document_name", "")) for r in meta.get("retriever_resources") or []}


def test_two_workers_answer_through_the_knowledge_process(tmp_path: Path) -> None:
    data = _ingest(tmp_path)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}
    gcite = Path(sys.executable).parent / "gcite"
    proc = subprocess.Popen(
        [str(gcite), "serve", "--port", str(port), "--data-dir", str(data), "--workers", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        url = f"http://127.0.0.1:{port}/v1/chat-messages"
        payload = {"query": "电梯维保多久一次？", "user": "u", "response_mode": "blocking"}
        deadline = time.monotonic() + 120
        while True:
            try:
                response = httpx.post(
                    url, json=payload, headers={"Authorization": "Bearer ops"}, timeout=60
                )
                break
            except httpx.ConnectError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
                assert time.monotonic() < deadline, "gcite serve --workers 2 did not start"
                time.sleep(0.3)
        assert len(_children(proc.pid)) == 2
        seen_ops: set[str] = set()
        seen_pub: set[str] = set()
        for _ in range(4):  # several requests: both workers answer some
            for key, seen in (("ops", seen_ops), ("pub", seen_pub)):
                r = httpx.post(
                    url, json=payload, headers={"Authorization": f"Bearer {key}"}, timeout=60
                )
                assert r.status_code == 200, r.text
                seen |= _titles(r.json())
        assert response.status_code == 200, response.text
        assert any("elevator" in t or "电梯" in t for t in seen_ops), seen_ops
        assert not any("elevator" in t or "电梯" in t for t in seen_pub), seen_pub
        # a worker killed with SIGKILL is replaced while the other keeps answering
        victim, other = _children(proc.pid)
        os.kill(victim, signal.SIGKILL)
        gone = time.monotonic() + 60  # a hang guard: until it is gone
        while process_start(victim) is not None:
            assert time.monotonic() < gone
            time.sleep(0.05)
        for _ in range(6):  # new connections: the other worker or, on the dead one's
            # socket, its replacement once it listens (such a connection waits in the queue)
            r = httpx.post(url, json=payload, headers={"Authorization": "Bearer ops"}, timeout=60)
            assert r.status_code == 200, r.text
        deadline = time.monotonic() + 120  # a hang guard
        while True:
            now = set(_children(proc.pid))
            if len(now) == 2 and victim not in now:
                break
            assert proc.poll() is None
            assert time.monotonic() < deadline, now
            time.sleep(0.2)
        assert other in now
        # the knowledge process is the store's single owner: its death stops the set
        (knowledge,) = _children(proc.pid, "--knowledge-fd")
        os.kill(knowledge, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode not in (0, None)
        assert f"知识库进程 {knowledge} 意外退出" in err.decode()
        assert f"工作进程 {victim} 意外退出（退出码 -9），已启动新的工作进程" in err.decode()
        for pid in now:  # the workers were stopped (and reaped)
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
    assert proc.returncode is not None


PUBLIC_ONLY = '[[app_keys]]\nkey = "ops"\nroles = []\npublic_only = true\n'
OPERATOR = '[[app_keys]]\nkey = "ops"\nroles = ["运维工程师"]\n'


def test_a_role_change_in_the_config_is_seen_by_every_worker_at_its_next_request(
    tmp_path: Path,
) -> None:
    """The key starts public-only, so the knowledge process's internal key holds no role at
    all; granting 运维工程师 in the config file must show the elevator rules at the next
    request of each worker (worker and knowledge process both re-read the key tables), and
    taking it back must hide them again at the next request of each worker."""
    data = _ingest(tmp_path)
    config = data / "gcite.toml"
    config.write_text(PUBLIC_ONLY, encoding="utf-8")
    with ServeWorkers(data, 2, tmp_path / "serve.log") as served:
        url = f"{served.base}/v1/chat-messages"
        payload = {"query": "电梯维保多久一次？", "user": "u", "response_mode": "blocking"}

        def ask() -> tuple[bool, int]:
            request_id = uuid.uuid4().hex
            r = httpx.post(
                url,
                json=payload,
                headers={"Authorization": "Bearer ops", "X-Request-Id": request_id},
                timeout=60,
            )
            assert r.status_code == 200, r.text
            elevator = any("elevator" in t or "电梯" in t for t in _titles(r.json()))
            return elevator, served.pid_of(request_id)

        def every_worker_sees(expected: bool) -> None:
            pids: set[int] = set()
            for _ in range(40):  # new connections: the kernel spreads them over the workers
                elevator, pid = ask()
                assert elevator is expected, (expected, pid)
                pids.add(pid)
                if pids == served.worker_pids:
                    return
            raise AssertionError(f"only workers {pids} of {served.worker_pids} answered")

        every_worker_sees(False)
        config.write_text(OPERATOR, encoding="utf-8")
        every_worker_sees(True)
        config.write_text(PUBLIC_ONLY, encoding="utf-8")
        every_worker_sees(False)


LONG_ANSWER = "一二三四五六七八九十" * 40  # 400 one-character deltas, 50 ms apart: 20 s


async def _events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON events of an SSE response (``data:`` lines; pings and blanks skipped)."""
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            yield json.loads(line[6:])


async def _stream_and_stop(
    served: ServeWorkers, client: httpx.AsyncClient, user: str
) -> tuple[str, str, dict[str, object]]:
    """Open one stream, stop it through a new connection once its first text arrived.

    Returns ``(stream request id, stop request id, result)``: the access log lines of the
    two requests name the workers that served them; ``result`` is how the stream ended."""
    stream_id, stop_id = uuid.uuid4().hex, uuid.uuid4().hex
    headers = {"Authorization": "Bearer ops"}
    payload = {"query": "电梯维保多久一次？", "user": user, "response_mode": "streaming"}
    answer, status, last = "", "", ""
    async with client.stream(
        "POST",
        f"{served.base}/v1/chat-messages",
        json=payload,
        headers={**headers, "X-Request-Id": stream_id},
        timeout=60,
    ) as response:
        assert response.status_code == 200
        async for event in _events(response):
            last = str(event["event"])
            if last == "message":
                if not answer:  # a new connection each time: any worker may get the stop
                    async with httpx.AsyncClient() as other:
                        reply = await other.post(
                            f"{served.base}/v1/chat-messages/{event['task_id']}/stop",
                            json={"user": user},
                            headers={**headers, "X-Request-Id": stop_id},
                            timeout=30,
                        )
                    assert reply.json() == {"result": "success"}
                answer += str(event["answer"])
            elif last == "workflow_finished":
                status = str(event["data"]["status"])
    result = {"answer_chars": len(answer), "status": status, "last": last}
    return stream_id, stop_id, result


@pytest.mark.parametrize(
    ("database", "workers"),
    [("sqlite", 2), ("sqlite", 3), ("postgresql", 2), ("postgresql", 3)],
)
async def test_stop_works_from_every_worker(
    tmp_path: Path, request: pytest.FixtureRequest, database: str, workers: int
) -> None:
    """Streams run on real workers against the OpenAI stand-in; each is stopped through a
    new connection, which the kernel hands to any worker. Every stop ends its stream
    early with ``stopped`` (Dify's terminal order), and every worker has received a stop
    for a stream that another worker ran (so the stop record in the shared database
    reached it)."""
    data = _ingest(tmp_path)
    env = {
        "GCITE_LLM_BASE_URL": "",
        "GCITE_LLM_MODEL": "standin",
        "GCITE_LLM_API_KEY": "sk-test",
    }
    if database == "postgresql":
        env["GCITE_DATABASE_URL"] = str(request.getfixturevalue("postgres_url"))
    with OpenAIStandin(Script.text(LONG_ANSWER, size=1, token_delay_s=0.05)) as llm:
        env["GCITE_LLM_BASE_URL"] = llm.base_url
        with ServeWorkers(data, workers, tmp_path / "serve.log", env) as served:
            stops_elsewhere: dict[int, int] = {}  # stop pid -> stream pid
            limits = httpx.Limits(max_connections=64, max_keepalive_connections=0)
            async with httpx.AsyncClient(limits=limits) as client:
                for round_ in range(8):
                    runs = await asyncio.gather(
                        *(
                            _stream_and_stop(served, client, f"{database}-{round_}-{i}")
                            for i in range(2 * workers)
                        )
                    )
                    for stream_id, stop_id, result in runs:
                        stream_pid, stop_pid = served.pid_of(stream_id), served.pid_of(stop_id)
                        assert result["status"] == "stopped", result
                        assert result["last"] == "message_end", result
                        assert 0 < int(str(result["answer_chars"])) < len(LONG_ANSWER), result
                        assert {stream_pid, stop_pid} <= served.worker_pids
                        if stop_pid != stream_pid:
                            stops_elsewhere[stop_pid] = stream_pid
                    if set(stops_elsewhere) == served.worker_pids:
                        break
            assert set(stops_elsewhere) == served.worker_pids, stops_elsewhere
            assert llm.completed == 0  # no answer ran to its end


def test_each_worker_searches_the_offline_web_pages(tmp_path: Path) -> None:
    """``web_provider = "offline"`` (the demo's web source) keeps its index in an embedded
    Qdrant Edge shard, which one process opens at a time: each worker builds its own
    (``web-offline-worker-<n>``), and every worker's web branch answers."""
    data = _ingest(tmp_path)
    web_dir = Path(__file__).resolve().parents[2] / "src" / "gcite" / "sample_data" / "web"
    env = {"GCITE_WEB_PROVIDER": "offline", "GCITE_WEB_DIR": str(web_dir)}
    with ServeWorkers(data, 2, tmp_path / "serve.log", env=env) as served:
        url = f"{served.base}/v1/chat-messages"
        payload = {"query": "灭火器怎么用？", "user": "u", "response_mode": "streaming"}
        by_pid: dict[int, list[str]] = {}
        for _ in range(16):  # new connections: the kernel spreads them over both workers
            request_id = uuid.uuid4().hex
            headers = {"Authorization": "Bearer ops", "X-Request-Id": request_id}
            with httpx.stream("POST", url, json=payload, headers=headers, timeout=120) as r:
                assert r.status_code == 200
                tools = [
                    json.loads(line[6:])["data"]["status"]
                    for line in r.iter_lines()
                    if line.startswith('data: {"event":"node_finished"')
                    and '"node_type":"tool"' in line
                ]
            by_pid.setdefault(served.pid_of(request_id), []).extend(tools)
        assert set(by_pid) == served.worker_pids  # both workers answered
        assert all(statuses == ["succeeded"] * len(statuses) for statuses in by_pid.values())
        assert all(statuses for statuses in by_pid.values())
    assert (data / "web-offline-worker-1").is_dir() and (data / "web-offline-worker-2").is_dir()


def test_the_public_sockets_listen_only_once_a_worker_serves_them() -> None:
    """The parent binds the workers' sockets without listening: until a worker's server
    listens on its socket, a client is refused at once instead of waiting in the queue of a
    worker still loading its models (found with two workers: a request sat unanswered while
    the other worker already answered ``/health``)."""
    from gcite.cli.workers import _listeners

    sockets = _listeners("127.0.0.1", 0, 2)
    try:
        port = sockets[0].getsockname()[1]
        assert sockets[1].getsockname()[1] == port
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        sockets[0].listen(8)  # what a worker's server does when it starts serving
        for _ in range(4):  # every connection now goes to the one listening socket
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                pass
    finally:
        for sock in sockets:
            sock.close()


async def _whole_stream(served: ServeWorkers, client: httpx.AsyncClient, i: int) -> str:
    answer, status = "", ""
    payload = {"query": "巡检记录保存多久？", "inputs": {}, "response_mode": "streaming"}
    payload["user"] = f"burst-{i}"
    async with client.stream(
        "POST",
        f"{served.base}/v1/chat-messages",
        json=payload,
        headers={"Authorization": "Bearer ops"},
        timeout=120,
    ) as response:
        assert response.status_code == 200
        async for event in _events(response):
            if event["event"] == "message":
                answer += str(event["answer"])
            elif event["event"] == "workflow_finished":
                status = str(event["data"]["status"])
    return f"{status}:{answer}"


async def test_a_burst_of_100_streams_on_two_workers_loses_no_stream_and_no_text(
    tmp_path: Path,
) -> None:
    """100 streams at once on ``gcite serve --workers 2`` (busy workers: answers are joined
    and held while runs prepare, gcite/chatflow/scheduler.py): every stream ends
    ``succeeded`` with the model's text byte for byte, split markers and surrogates too."""
    data = _ingest(tmp_path)
    env = {"GCITE_LLM_BASE_URL": "", "GCITE_LLM_MODEL": "standin", "GCITE_LLM_API_KEY": "k"}
    with OpenAIStandin(Script(deltas=SPLIT_DELTAS * 5, token_delay_s=0.02, ascii_json=True)) as llm:
        env["GCITE_LLM_BASE_URL"] = llm.base_url
        with ServeWorkers(data, 2, tmp_path / "serve.log", env) as served:
            limits = httpx.Limits(max_connections=200, max_keepalive_connections=0)
            async with httpx.AsyncClient(limits=limits) as client:
                results = await asyncio.gather(
                    *(_whole_stream(served, client, i) for i in range(100))
                )
    assert results == [f"succeeded:{SPLIT_SHOWN * 5}"] * 100


def _serving_pid(data: Path, message_id: str) -> int:
    """The pid of the worker running ``message_id``, from the shared database."""
    with sqlite3.connect(data / "gcite.sqlite3") as db:
        row = db.execute(
            "SELECT i.pid FROM gcite_messages m JOIN gcite_instances i ON i.id = m.instance_id"
            " WHERE m.id = ?",
            (message_id,),
        ).fetchone()
    assert row is not None, message_id
    return int(row[0])


async def _cut_stream(
    served: ServeWorkers, data: Path, user: str, kill: Callable[[int], None]
) -> tuple[list[dict[str, Any]], str | None, str, int]:
    """Open a stream; once its first text came, ``kill(pid of its worker)``; read on.

    Returns ``(events, transport error or None, conversation id, killed pid)``."""
    events: list[dict[str, Any]] = []
    payload = {"query": "电梯维保多久一次？", "user": user, "response_mode": "streaming"}
    pid = 0
    try:
        async with (
            httpx.AsyncClient() as client,
            client.stream(
                "POST",
                f"{served.base}/v1/chat-messages",
                json=payload,
                headers={"Authorization": "Bearer ops"},
                timeout=120,
            ) as response,
        ):
            assert response.status_code == 200
            async for event in _events(response):
                events.append(event)
                if event["event"] == "message" and not pid:
                    pid = _serving_pid(data, str(event["message_id"]))
                    kill(pid)
    except httpx.TransportError as exc:
        return events, type(exc).__name__, str(events[0]["conversation_id"]), pid
    return events, None, str(events[0]["conversation_id"]), pid


def _status(served: ServeWorkers, conversation_id: str, user: str) -> dict[str, Any]:
    r = httpx.get(
        f"{served.base}/v1/messages",
        params={"conversation_id": conversation_id, "user": user},
        headers={"Authorization": "Bearer ops"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    (message,) = r.json()["data"]
    return dict(message)


def _signal(sig: signal.Signals) -> Callable[[int], None]:
    return lambda pid: os.kill(pid, sig)


async def test_answers_cut_by_a_dying_worker_are_marked_failed(tmp_path: Path) -> None:
    """SIGTERM: the worker ends its answer with an ``error`` event and stores it failed
    before it exits. SIGKILL: the client's stream is cut with nothing more; the worker
    started in its place marks the message failed at start-up (never left ``running``)."""
    data = _ingest(tmp_path)
    env = {"GCITE_LLM_BASE_URL": "", "GCITE_LLM_MODEL": "standin", "GCITE_LLM_API_KEY": "k"}
    with OpenAIStandin(Script.text(LONG_ANSWER * 3, size=1, token_delay_s=0.05)) as llm:
        env["GCITE_LLM_BASE_URL"] = llm.base_url
        with ServeWorkers(data, 2, tmp_path / "serve.log", env) as served:
            events, cut, conversation, pid = await _cut_stream(
                served, data, "t", _signal(signal.SIGTERM)
            )
            assert cut is None  # the stream ended properly, with the error event
            last = events[-1]
            assert last["event"] == "error", events[-3:]
            assert (last["code"], last["status"]) == ("service_unavailable", 503)
            assert last["message"] == INTERRUPTED
            texts = "".join(str(e.get("answer", "")) for e in events if e["event"] == "message")
            assert 0 < len(texts) < len(LONG_ANSWER * 3)
            served.replaced(pid)
            stored = _status(served, conversation, "t")
            assert (stored["gcite_status"], stored["error"]) == ("failed", INTERRUPTED)

            events, cut, conversation, pid = await _cut_stream(
                served, data, "k", _signal(signal.SIGKILL)
            )
            assert cut is not None  # cut: nothing could be sent
            assert all(e["event"] != "error" for e in events)
            served.replaced(pid)  # its replacement marks the message at start-up
            deadline = time.monotonic() + 120  # a hang guard: until the new one started
            while (stored := _status(served, conversation, "k"))["gcite_status"] == "running":
                assert time.monotonic() < deadline, stored
                await asyncio.sleep(0.2)
            assert (stored["gcite_status"], stored["error"]) == ("failed", ORPHANED)


# a stand-in worker: writes "ready" on its --ready-fd when told to (argv), then exits 3
_FAKE_WORKER = (
    "import os, sys; args = sys.argv[1:];"
    "fd = int(args[args.index('--ready-fd') + 1]);"
    "os.write(fd, b'ready\\n') if os.environ.get('FAKE_READY') else None; sys.exit(3)"
)


def _exited(proc: subprocess.Popen[bytes]) -> None:
    proc.wait(timeout=120)  # a hang guard


def test_a_worker_that_exits_before_it_is_ready_stops_the_set_one_that_was_ready_is_replaced() -> (
    None
):
    """The supervisor's rule, on real processes: a worker that exits without having said
    ``ready`` would fail again (the set stops with the reason); one that said it is
    replaced by a new one with the same worker number."""
    from gcite.cli.workers import _Children, _Workers

    children = _Children()
    base = [sys.executable, "-c", _FAKE_WORKER]
    for ready, expect_stop in (("", True), ("1", False)):
        env = {**os.environ, "FAKE_READY": ready}
        workers = _Workers(children, base, env, "127.0.0.1", 0)
        try:
            first = workers.start(1)
            _exited(first.proc)
            first.poll_ready()
            reason = workers.check()
            if expect_stop:
                assert reason is not None and "启动失败" in reason and str(first.proc.pid) in reason
            else:
                assert reason is None
                (slot,) = workers.slots
                assert slot.number == 1 and slot.proc.pid != first.proc.pid
                _exited(slot.proc)
        finally:
            children.stop()
            workers.close()


def _accept_queues(port: int) -> dict[int, int]:
    """``{socket inode: connections in its accept queue}`` of every listening IPv4 socket
    on ``port`` (``/proc/net/tcp``: a listener's ``rx_queue`` is its accept queue)."""
    queues: dict[int, int] = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, queue, inode = fields[1], fields[3], fields[4], int(fields[9])
        if state == "0A" and int(local.split(":")[1], 16) == port:
            queues[inode] = int(queue.split(":")[1], 16)
    return queues


def _listening_inode(pid: int, port: int) -> int:
    """The inode of the listening socket on ``port`` that process ``pid`` holds."""
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            held.add(int(target[8:-1]))
    (inode,) = held & set(_accept_queues(port))
    return inode


def test_connections_queued_at_a_worker_that_is_killed_are_answered_by_its_replacement(
    tmp_path: Path,
) -> None:
    """A stopped worker (SIGSTOP) accepts nothing, so the connections the kernel routes to
    its socket are known to be queued there (its accept queue, read from /proc, grows by
    one); the others are answered by the other worker. Then the stopped worker is killed
    with SIGKILL: every request still gets a whole answer, the queued ones from the worker
    started in its place on the same socket (none is reset)."""
    data = _ingest(tmp_path)
    with ServeWorkers(data, 2, tmp_path / "serve.log") as served:
        url = f"{served.base}/v1/chat-messages"
        payload = {"query": "电梯维保多久一次？", "user": "u", "response_mode": "blocking"}
        results: dict[str, str | dict[str, Any]] = {}

        def ask(request_id: str) -> None:
            headers = {"Authorization": "Bearer ops", "X-Request-Id": request_id}
            try:
                r = httpx.post(url, json=payload, headers=headers, timeout=300)
            except httpx.TransportError as exc:
                results[request_id] = type(exc).__name__
                return
            results[request_id] = r.json() if r.status_code == 200 else r.text

        victim = min(served.worker_pids)
        others = served.worker_pids - {victim}
        inode = _listening_inode(victim, served.port)
        os.kill(victim, signal.SIGSTOP)
        threads: list[threading.Thread] = []
        queued: list[str] = []
        try:
            while len(queued) < 3:  # new connections until three wait at the victim
                assert len(threads) < 200, "the kernel never picked the stopped worker"
                before = _accept_queues(served.port)[inode]
                request_id = uuid.uuid4().hex
                thread = threading.Thread(target=ask, args=(request_id,))
                thread.start()
                threads.append(thread)
                deadline = time.monotonic() + 120  # a hang guard
                while thread.is_alive():
                    if _accept_queues(served.port)[inode] > before:
                        queued.append(request_id)
                        break
                    assert time.monotonic() < deadline, "neither answered nor queued"
                    time.sleep(0.02)
        finally:
            os.kill(victim, signal.SIGKILL)
        for thread in threads:
            thread.join(timeout=300)  # a hang guard
            assert not thread.is_alive()
        for request_id, result in results.items():
            assert isinstance(result, dict), (request_id in queued, result)
            assert result["answer"], result
            assert any("elevator" in t or "电梯" in t for t in _titles(result)), result
        assert len(results) == len(threads)
        (replacement,) = served.replaced(victim) - others
        assert {served.pid_of(request_id) for request_id in queued} == {replacement}
        assert _listening_inode(replacement, served.port) == inode
