"""The chatflow run with no HTTP and no database: node order, a failing branch, an LLM
failure, stop, and the visibility re-check of earlier turns.

The knowledge store is gcite.testing's in-memory store holding the contract corpus (the
embeddings are not what these tests are about); the LLM is the real
extractive backend, wrapped where a test must watch or slow it; the web source is a
stand-in object returning Bocha's payload shape (no provider API runs here).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from gcite.chatflow import (
    AnswerDelta,
    ChatRun,
    Deps,
    NodeFinished,
    NodeStarted,
    PastTurn,
    RunEnded,
    RunFailed,
    Turn,
    earlier_turns,
)
from gcite.chatflow.scheduler import Knobs, Scheduler
from gcite.config import Settings
from gcite.errors import LLMError, SourceTimeout
from gcite.generate.backends import BackendLifecycle, Usage
from gcite.generate.extractive import ExtractiveBackend
from gcite.generate.prompt import NO_ANSWER
from gcite.knowledge import open_store
from gcite.stream.parser import strip_markers
from gcite.testing import MemoryStore
from gcite.testing.corpus import DATASET, MANIFEST, write_mixed
from support.clock import ManualClock, until
from support.web_standin import PayloadWeb as Web
from support.web_standin import bocha_payload, sample_items

QUERY = "电梯维保记录由谁签字？"
GUARD_S = 120.0  # hang guard only (a loaded machine may need tens of seconds)


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    base = tmp_path_factory.mktemp("chatflow")
    write_mixed(base / "docs")
    (base / "manifest.json").write_text(json.dumps(MANIFEST, ensure_ascii=False), "utf-8")
    with MemoryStore() as store:
        store.ingest([base / "docs"], dataset=DATASET, manifest=base / "manifest.json")
        yield store


class Watched(BackendLifecycle):
    """The extractive backend, recording its prompts, optionally slowed or failing."""

    name = "watched"

    def __init__(self, *, delay: float = 0.0, fail_after: int | None = None) -> None:
        self.inner = ExtractiveBackend(delta_chars=2)
        self.delay = delay
        self.fail_after = fail_after
        self.prompts: list[list[dict[str, str]]] = []
        self.closed = 0

    async def stream(
        self,
        messages: Sequence[dict[str, str]],
        *,
        chunks: Sequence[dict[str, Any]],
        query: str,
        usage: Usage | None = None,
    ) -> AsyncIterator[str]:
        self.prompts.append(list(messages))
        try:
            sent = 0
            async for delta in self.inner.stream(messages, chunks=chunks, query=query, usage=usage):
                if self.fail_after is not None and sent >= self.fail_after:
                    raise LLMError("模型服务连接中断: ReadError")
                await asyncio.sleep(self.delay)
                sent += 1
                yield delta
        finally:
            self.closed += 1


def deps(store: Any, backend: Any, web: Any = None, **settings: Any) -> Deps:
    return Deps(
        settings=Settings.from_keys(**settings),
        backend=backend,
        get_store=None if store is None else (lambda: store),
        web_source=web,
    )


async def collect(run: ChatRun) -> list[Any]:
    return [event async for event in run.events()]


def shape(events: list[Any]) -> list[str]:
    """``started:knowledge_retrieval``, ``answer``, ``ended:succeeded`` ... (deltas folded)."""
    out: list[str] = []
    for event in events:
        if isinstance(event, NodeStarted):
            out.append(f"started:{event.node}")
        elif isinstance(event, NodeFinished):
            out.append(f"finished:{event.node}:{event.status}")
        elif isinstance(event, AnswerDelta):
            if not out or out[-1] != "answer":
                out.append("answer")
        elif isinstance(event, RunEnded):
            out.append(f"ended:{event.summary.status}")
        elif isinstance(event, RunFailed):
            out.append(f"failed:{event.kind}")
    return out


async def test_node_order_outputs_and_summary(kb: Any) -> None:
    run = ChatRun(Turn(QUERY, ("运维工程师",)), deps(kb, Watched(), Web()))
    events = await collect(run)
    assert shape(events) == [
        "started:knowledge_retrieval",
        "started:web_search",
        "finished:knowledge_retrieval:succeeded",
        "finished:web_search:succeeded",
        "started:merge",
        "finished:merge:succeeded",
        "started:llm",
        "answer",
        "finished:llm:succeeded",
        "ended:succeeded",
    ]
    merged = next(e for e in events if isinstance(e, NodeFinished) and e.node == "merge")
    assert merged.outputs is not None
    chunks = merged.outputs["chunk_metadata"]
    assert {c["source_type"] for c in chunks} == {"rag", "web"}
    assert merged.outputs["chunk_count"] == len(chunks)
    assert "[C:1]" in merged.outputs["formatted_chunks"]
    assert "access_roles" not in repr(events)  # who may read a document never leaves
    summary = events[-1].summary
    assert summary.answer == "".join(e.text for e in events if isinstance(e, AnswerDelta))
    assert summary.cited_ids and set(summary.cited_ids) <= {str(c["id"]) for c in chunks}
    assert summary.invalid_ids == []
    assert summary.steps == 4 and summary.backend == "watched"
    llm = next(e for e in events if isinstance(e, NodeFinished) and e.node == "llm")
    assert llm.usage is not None and llm.usage.completion_tokens > 0
    assert llm.outputs == {"text": summary.answer}


async def test_a_failing_branch_degrades_the_answer(kb: Any, tmp_path: Path) -> None:
    missing = Settings.from_keys(data_dir=tmp_path / "no-such-kb")
    broken = Deps(
        settings=Settings.from_keys(web_timeout_s=0.05),
        backend=Watched(),
        get_store=lambda: open_store(missing),
        web_source=Web(delay=1.0),
    )
    events = await collect(ChatRun(Turn(QUERY), broken))
    assert shape(events)[:4] == [
        "started:knowledge_retrieval",
        "started:web_search",
        "finished:knowledge_retrieval:failed",
        "finished:web_search:failed",
    ]
    kr, web = (e for e in events if isinstance(e, NodeFinished) and e.status == "failed")
    assert kr.error is not None and kr.error.startswith("StoreError: 知识库数据目录不存在")
    assert web.error == "timeout after 0.05s" and web.outputs is None
    assert shape(events)[-1] == "ended:succeeded"  # the run itself goes on

    failing_web = deps(kb, Watched(), Web(fail=SourceTimeout("慢")))
    events = await collect(ChatRun(Turn(QUERY, ("运维工程师",)), failing_web))
    web = next(e for e in events if isinstance(e, NodeFinished) and e.node == "web_search")
    assert web.status == "failed" and web.error == "SourceTimeout: 慢"
    assert events[-1].summary.cited_ids  # answered from the knowledge branch


async def test_an_llm_failure_fails_the_run_and_keeps_the_partial_answer(kb: Any) -> None:
    backend = Watched(fail_after=2)
    events = await collect(ChatRun(Turn(QUERY, ("运维工程师",)), deps(kb, backend)))
    assert shape(events)[-3:] == ["answer", "finished:llm:failed", "failed:llm"]
    failed = events[-1]
    assert failed.error == "Run failed: 模型服务连接中断: ReadError"
    assert len(failed.summary.answer) > 0 and failed.summary.status == "failed"
    assert backend.closed == 1


async def test_stop_ends_the_run_with_its_partial_answer(kb: Any) -> None:
    backend = Watched(delay=0.05)
    run = ChatRun(Turn(QUERY, ("运维工程师",)), deps(kb, backend))
    seen: list[Any] = []
    answering = asyncio.Event()

    async def consume() -> None:
        async for event in run.events():
            seen.append(event)
            if isinstance(event, AnswerDelta):
                answering.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(answering.wait(), GUARD_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    ending = run.stopped()
    assert shape(seen + ending)[-3:] == ["answer", "finished:llm:stopped", "ended:stopped"]
    partial = "".join(e.text for e in seen if isinstance(e, AnswerDelta))
    assert ending[0].outputs == {"text": partial}
    assert ending[-1].summary.answer == partial and ending[-1].summary.status == "stopped"
    await asyncio.sleep(0)
    assert backend.closed == 1  # cancelling the run closed the model call


async def test_earlier_turns_are_rechecked_with_the_current_roles(kb: Any) -> None:
    first = await collect(ChatRun(Turn(QUERY, ("运维工程师",)), deps(kb, Watched(), Web())))
    summary = first[-1].summary
    cited = {str(c["id"]): c for c in summary.chunk_metadata}
    restricted = [i for i in summary.cited_ids if cited[i]["source_type"] == "rag"]
    assert restricted, "the first answer quotes the restricted elevator document"
    past = PastTurn(QUERY, summary.answer, False, summary.chunk_metadata, summary.cited_ids)
    secret = cited[restricted[0]]["content"]
    earlier = strip_markers(summary.answer)  # the prompt carries answers without markers
    seen = await _prompt(Turn("那维保频率呢？", ("运维工程师",), earlier_turns([past])), kb)
    assert earlier in seen and secret in seen
    hidden = await _prompt(Turn("那维保频率呢？", (), earlier_turns([past])), kb)
    assert QUERY in hidden  # the earlier question stays
    assert earlier not in hidden and secret not in hidden
    unknown = await _prompt(Turn("那维保频率呢？", ("运维工程师",), earlier_turns([past])), None)
    assert earlier not in unknown and secret not in unknown  # no store: fail closed
    failed = PastTurn("失败的问题", "半截", True, [], [])
    assert earlier_turns([failed]).turns == []  # failed turns never reach the prompt


async def _prompt(turn: Turn, store: Any) -> str:
    backend = Watched()
    await collect(ChatRun(turn, deps(store, backend)))
    return "\n".join(m["content"] for m in backend.prompts[0])


def test_the_chatflow_loads_no_http_client_and_no_sql() -> None:
    code = (
        "import sys, gcite, gcite.chatflow, gcite.dify.wire;"
        "bad = sorted({m.split('.')[0] for m in sys.modules} & {'httpx', 'sqlalchemy'});"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


class GatedStore:
    """The real store whose searches wait for ``go`` (set by the test) in their thread."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.searching = threading.Event()
        self.go = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def search(self, *args: Any, **kwargs: Any) -> Any:
        self.searching.set()
        self.go.wait(GUARD_S)  # a hang guard
        return self.store.search(*args, **kwargs)


class GatedWeb(Web):
    """The web stand-in answering once ``go`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.go = asyncio.Event()
        self.asked = asyncio.Event()

    async def search(self, query: str, *, count: int) -> Any:
        self.asked.set()
        await self.go.wait()
        return await super().search(query, count=count)


async def test_a_run_counts_as_preparing_but_not_while_it_waits_for_web_search(kb: Any) -> None:
    """The run's scheduler counts it as preparing (answers streaming in a busy process
    wait for it) while the knowledge base searches (CPU in a thread), not once only web
    search is left (a network wait), and again for its CPU steps up to its model call."""
    scheduler = Scheduler(Knobs(), ManualClock())
    store, web = GatedStore(kb), GatedWeb()
    backend = Watched()
    run = ChatRun(
        Turn(QUERY, ("运维工程师",)),
        dataclasses.replace(deps(store, backend, web), scheduler=scheduler),
    )
    events = asyncio.create_task(collect(run))
    await until(lambda: store.searching.is_set() and web.asked.is_set())
    assert scheduler.preparing_runs() == 1 and scheduler.busy_slots() == 0
    store.go.set()
    await until(lambda: scheduler.preparing_runs() == 0)  # only the web search left
    assert not events.done() and not backend.prompts
    web.go.set()
    seen = await asyncio.wait_for(events, GUARD_S)
    assert shape(seen)[-1] == "ended:succeeded" and backend.prompts
    assert scheduler.preparing_runs() == 0 and scheduler.busy_slots() == 0
    assert scheduler.active_streams() == 0


class Normalising:
    """The real store whose ``normalise_query`` rewrites ``RAW`` to ``QUERY``, recording
    the searches and the threads both ran in."""

    RAW = "电梯维保记录由谁签名？"

    def __init__(self, store: Any) -> None:
        self.store = store
        self.searched: list[str] = []
        self.threads: list[str] = []
        self.roles: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def normalise_query(self, query: str, roles: Sequence[str] | None = None) -> str:
        self.threads.append(threading.current_thread().name)
        self.roles.append(roles)
        return QUERY if query == self.RAW else query

    def search(self, query: str, **kwargs: Any) -> Any:
        self.threads.append(threading.current_thread().name)
        self.searched.append(query)
        return self.store.search(query, **kwargs)


class CountingScheduler(Scheduler):
    """The process scheduler, counting the jobs given to its search threads."""

    jobs = 0

    async def search(self, fn: Any, *args: Any) -> Any:
        self.jobs += 1
        return await super().search(fn, *args)


class AskedWeb(Web):
    """The web stand-in, recording what it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    async def search(self, query: str, *, count: int) -> Any:
        self.asked.append(query)
        return await super().search(query, count=count)


async def test_the_question_is_normalised_and_searched_in_one_thread_job(kb: Any) -> None:
    """One search-thread job per run: the store normalises the question, the nodes' inputs
    and the web branch get the normalised text before the search ends, and the search
    uses it."""
    scheduler = CountingScheduler(Knobs(), ManualClock())
    store, web = Normalising(kb), AskedWeb()
    run = ChatRun(
        Turn(Normalising.RAW, ("运维工程师",)),
        dataclasses.replace(deps(store, Watched(), web), scheduler=scheduler),
    )
    events = await asyncio.wait_for(collect(run), GUARD_S)
    assert shape(events)[-1] == "ended:succeeded"
    assert scheduler.jobs == 1
    assert store.searched == [QUERY] and web.asked == [QUERY]
    assert store.roles == [["运维工程师"]]  # the turn's roles scope the vocabulary
    assert len(store.threads) == 2 and len(set(store.threads)) == 1  # one job, one thread
    assert store.threads[0].startswith("gcite-search")
    started = {e.node: e.inputs for e in events if isinstance(e, NodeStarted)}
    assert started["knowledge_retrieval"]["query"] == QUERY
    assert started["web_search"]["query"] == QUERY
    assert events[-1].summary.cited_ids
    scheduler.close()


PUBLIC_TEXT = "# 停车场管理办法\n\n地下停车场禁止存放易燃易爆物品。临时停车按小时计费。\n"
RESTRICTED_TEXT = (
    "# 财务巡查细则\n\n保安每晚巡更一次，巡更点位由财务部确认。\n"
    "机房配备项目经理不间断电源（UPS），每季度检查一次。\n"
)


@pytest.fixture(scope="module")
def restricted_kb() -> Iterator[Any]:
    """One public document and one only the role 财务 may see."""
    with MemoryStore() as store:
        store.add(DATASET, "parking.md", PUBLIC_TEXT)
        store.add(DATASET, "finance.md", RESTRICTED_TEXT, {"access_roles": ["财务"]})
        yield store


def started_queries(events: list[Any]) -> dict[str, str]:
    """The ``query`` input of each node started with one (the knowledge and web nodes)."""
    return {
        e.node: str(e.inputs["query"])
        for e in events
        if isinstance(e, NodeStarted) and e.node in {"knowledge_retrieval", "web_search"}
    }


@pytest.mark.parametrize(
    ("question", "revealed"),
    [("巡梗点位多久检查", "巡更"), ("UPS多少钱", "不间断电源")],
)
async def test_words_of_a_document_hidden_from_the_caller_never_rewrite_the_question(
    restricted_kb: Any, question: str, revealed: str
) -> None:
    """The question is normalised with the vocabulary of the documents the caller may
    see: a typo fixed or a short form expanded by a restricted document's words would be
    streamed in the nodes' inputs and sent to the web search."""
    for roles, shown in (((), False), (("财务",), True)):
        web = AskedWeb()
        run = ChatRun(Turn(question, roles), deps(restricted_kb, Watched(), web))
        events = await asyncio.wait_for(collect(run), GUARD_S)
        assert shape(events)[-1] == "ended:succeeded"
        queries = started_queries(events)
        sent = [queries["knowledge_retrieval"], queries["web_search"], *web.asked]
        assert all((revealed in q) is shown for q in sent), (roles, sent)
        if not shown:
            assert sent == [question] * 3


async def test_a_store_whose_normalisation_takes_no_roles_leaves_the_question(
    restricted_kb: Any,
) -> None:
    """A store that cannot scope its vocabulary to the caller's roles is not asked to
    normalise (fail closed): the question is searched and shown as asked."""

    class Unscoped:
        def __getattr__(self, name: str) -> Any:
            return getattr(restricted_kb, name)

        def normalise_query(self, query: str) -> str:
            return str(restricted_kb.normalise_query(query))  # every document's words

    web = AskedWeb()
    run = ChatRun(Turn("巡梗点位多久检查"), deps(Unscoped(), Watched(), web))
    events = await asyncio.wait_for(collect(run), GUARD_S)
    assert started_queries(events)["knowledge_retrieval"] == "巡梗点位多久检查"
    assert web.asked == ["巡梗点位多久检查"]


async def test_a_store_that_cannot_open_leaves_the_question_and_fails_its_node_only(
    tmp_path: Path,
) -> None:
    scheduler = CountingScheduler(Knobs(), ManualClock())
    missing = Settings.from_keys(data_dir=tmp_path / "no-such-kb")
    web = AskedWeb()
    broken = Deps(
        settings=Settings.from_keys(),
        backend=Watched(),
        get_store=lambda: open_store(missing),
        web_source=web,
        scheduler=scheduler,
    )
    events = await asyncio.wait_for(collect(ChatRun(Turn(Normalising.RAW), broken)), GUARD_S)
    assert scheduler.jobs == 1
    assert web.asked == [Normalising.RAW]
    kr = next(e for e in events if isinstance(e, NodeFinished) and e.node == "knowledge_retrieval")
    assert kr.status == "failed" and kr.error is not None and kr.error.startswith("StoreError")
    assert shape(events)[-1] == "ended:succeeded"
    scheduler.close()


async def test_a_stop_while_the_knowledge_base_searches_ends_the_run(kb: Any) -> None:
    scheduler = Scheduler(Knobs(), ManualClock())
    store, backend = GatedStore(kb), Watched()
    run = ChatRun(
        Turn(QUERY, ("运维工程师",)),
        dataclasses.replace(deps(store, backend), scheduler=scheduler),
    )
    task = asyncio.create_task(collect(run))
    await until(lambda: store.searching.is_set())
    task.cancel()  # a stop while the search job runs in its thread
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, GUARD_S)
    ending = run.stopped()
    assert shape(ending) == ["ended:stopped"] and not backend.prompts
    assert scheduler.preparing_runs() == 0 and scheduler.busy_slots() == 0
    store.go.set()  # the job ends on its own; nothing waits for it
    scheduler.close()


class JobScheduler(Scheduler):
    """The process scheduler, keeping the task of each job given to its search threads."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.jobs: list[asyncio.Task[Any]] = []

    async def search(self, fn: Any, *args: Any) -> Any:
        task = asyncio.current_task()
        assert task is not None
        self.jobs.append(task)
        return await super().search(fn, *args)


class CountedStore(GatedStore):
    """The gated store, counting the normalisations and searches that ran; normalising
    also waits for ``normalise`` (set by the test) in its thread."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.normalised = 0
        self.searches = 0
        self.normalising = threading.Event()
        self.normalise = threading.Event()

    def normalise_query(self, query: str, roles: Sequence[str] | None = None) -> str:
        self.normalised += 1
        self.normalising.set()
        self.normalise.wait(GUARD_S)  # a hang guard
        return query

    def search(self, *args: Any, **kwargs: Any) -> Any:
        self.searches += 1
        return super().search(*args, **kwargs)


@pytest.mark.parametrize("waiting_for", ["normalisation", "slot"])
async def test_a_stop_before_the_retrieval_gives_up_the_search_job(
    kb: Any, waiting_for: str
) -> None:
    """A stop while the run waits for its question's normalisation (the job still queued
    behind another on the one search thread) or for a slot (the job searching in its
    thread) leaves no search job pending: a queued one never runs."""
    scheduler = JobScheduler(Knobs(search_threads=1, admit=1), ManualClock())
    store, backend = CountedStore(kb), Watched()
    busy = threading.Event()
    other = scheduler.turn()
    if waiting_for == "normalisation":  # the search thread busy with another job
        blocker = asyncio.ensure_future(Scheduler.search(scheduler, busy.wait, GUARD_S))
    run = ChatRun(
        Turn(QUERY, ("运维工程师",)),
        dataclasses.replace(deps(store, backend), scheduler=scheduler),
    )
    task = asyncio.create_task(collect(run))
    if waiting_for == "normalisation":
        await until(lambda: len(scheduler.jobs) == 1)
    else:  # the one slot taken by another run while the question is normalised
        await until(lambda: store.normalising.is_set())
        await other.wait(asyncio.sleep(0))
        store.normalise.set()
        await until(lambda: store.searching.is_set() and scheduler.waiting_steps() == 1)
    assert not task.done()
    task.cancel()  # the stop
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, GUARD_S)
    assert len(scheduler.jobs) == 1 and scheduler.jobs[0].cancelled()
    busy.set()
    store.normalise.set()
    store.go.set()
    if waiting_for == "normalisation":
        await asyncio.wait_for(blocker, GUARD_S)
    # one thread, jobs in order: a job still queued would have run before this one
    await asyncio.wait_for(Scheduler.search(scheduler, lambda: None), GUARD_S)
    if waiting_for == "normalisation":
        assert store.normalised == 0 and store.searches == 0
    assert not backend.prompts
    other.done()
    assert scheduler.preparing_runs() == 0 and scheduler.busy_slots() == 0
    scheduler.close()


@pytest.fixture(scope="module")
def traditional_kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The corpus of :func:`kb` written in traditional characters (OpenCC ``s2t``)."""
    import opencc

    to_traditional = opencc.OpenCC("s2t")
    base = tmp_path_factory.mktemp("traditional")
    write_mixed(base / "simplified")
    (base / "docs").mkdir()
    for path in sorted((base / "simplified").iterdir()):
        if path.suffix in {".md", ".txt", ".html"}:
            text = to_traditional.convert(path.read_text("utf-8"))
            (base / "docs" / path.name).write_text(text, "utf-8")
        else:
            (base / "docs" / path.name).write_bytes(path.read_bytes())
    (base / "manifest.json").write_text(json.dumps(MANIFEST, ensure_ascii=False), "utf-8")
    with MemoryStore() as store:
        store.ingest([base / "docs"], dataset=DATASET, manifest=base / "manifest.json")
        yield store


def test_documents_in_traditional_characters_are_searched_in_either_script(
    kb: Any, traditional_kb: Any
) -> None:
    """The keyword search matches a document and a question whatever script each is
    written in: the tokens of both are cut from the simplified form, so the corpus written
    in traditional characters gives a question in either script the results (chunks and
    scores) the simplified corpus gives, and the chunks keep their own characters."""
    from gcite.knowledge.sparse import simplified

    def found(store: Any, question: str) -> list[tuple[str, float, str]]:
        hits = store.search(question, roles=["运维工程师"], top_k=3)
        return [(h["title"], h["metadata"]["score"], h["content"]) for h in hits]

    expected = found(kb, QUERY)
    assert expected
    for question in (QUERY, "電梯維保記錄由誰簽字？"):
        got = found(traditional_kb, question)
        assert [(title, score) for title, score, _ in got] == [
            (title, score) for title, score, _ in expected
        ]
        assert [simplified(text) for _, _, text in got] == [text for _, _, text in expected]
        assert got[0][2] != expected[0][2]  # quoted as written


async def test_a_question_in_traditional_characters_is_answered_as_the_simplified_one(
    kb: Any,
) -> None:
    from gcite.verify import SupportModel, verify_answer

    def verifier(answer: str, chunks: list[dict[str, Any]], question: str, query: str) -> Any:
        return verify_answer(answer, chunks, SupportModel(), question=question, search_query=query)

    answers, checks = [], []
    for question in (QUERY, "電梯維保記錄由誰簽字？"):
        run = ChatRun(
            Turn(question, ("运维工程师",)),
            Deps(
                settings=Settings.from_keys(),
                backend=ExtractiveBackend(),
                get_store=lambda: kb,
                verifier=verifier,
            ),
        )
        await collect(run)
        summary = run.summary()
        answers.append(strip_markers(summary.answer).strip())
        checks.append(summary.verification["answers_question"])
    assert answers[0] != NO_ANSWER and answers[1] == answers[0]
    assert checks == [True, True]


async def test_a_document_in_traditional_characters_is_answered_and_quoted_as_written(
    kb: Any, traditional_kb: Any
) -> None:
    """The offline answerer and the verifier compare a document written in traditional
    characters with the question in simplified ones: the corpus in traditional characters
    gives the answer the simplified corpus gives, quoted in the document's own characters,
    every citation supported and the question answered."""
    from gcite.knowledge.sparse import simplified
    from gcite.verify import SupportModel, verify_answer

    def verifier(answer: str, chunks: list[dict[str, Any]], question: str, query: str) -> Any:
        return verify_answer(answer, chunks, SupportModel(), question=question, search_query=query)

    answers, reports = [], []
    for store in (kb, traditional_kb):
        run = ChatRun(
            Turn(QUERY, ("运维工程师",)),
            Deps(
                settings=Settings.from_keys(),
                backend=ExtractiveBackend(),
                get_store=lambda store=store: store,
                verifier=verifier,
            ),
        )
        await collect(run)
        summary = run.summary()
        answers.append(strip_markers(summary.answer).strip())
        reports.append(summary.verification)
    assert answers[0] != NO_ANSWER
    assert answers[1] != answers[0] and simplified(answers[1]) == answers[0]
    for report in reports:
        assert report["answers_question"] is True
        assert report["checked"] and report["supported"] == report["checked"]


class HalfPairWeb(Web):
    """Bocha's payload whose pages hold a lone UTF-16 surrogate (``"\\ud83d"`` in its
    JSON: an emoji's pair cut by the provider's summary) beside traditional characters."""

    async def search(self, query: str, *, count: int) -> Any:
        items = sample_items(query, count)
        for item in items:
            item["summary"] = "電梯維保記錄由維保單位簽字\ud83d。" + item["summary"]
            item["snippet"] = "電梯\ud83d維保"
        return bocha_payload(query, items)


async def test_a_web_page_holding_half_a_surrogate_pair_is_answered(kb: Any) -> None:
    """A web page's lone surrogate (not encodable as UTF-8, and OpenCC takes UTF-8 only) is
    read as U+FFFD where the page is compared in simplified characters: the answerer and
    the verifier read the page, and the run ends."""
    from gcite.verify import SupportModel, verify_answer

    def verifier(answer: str, chunks: list[dict[str, Any]], question: str, query: str) -> Any:
        return verify_answer(answer, chunks, SupportModel(), question=question, search_query=query)

    run = ChatRun(
        Turn(QUERY, ("运维工程师",)),
        dataclasses.replace(deps(kb, ExtractiveBackend(), HalfPairWeb()), verifier=verifier),
    )
    events = await collect(run)
    assert shape(events)[-1] == "ended:succeeded"
    summary = run.summary()
    assert summary.verification is not None and summary.verification["checked"]
