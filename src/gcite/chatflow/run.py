"""The run of the seeds' chatflow for one question: the nodes wired, as typed events.

::

    history re-check ─▶ retrieval query (follow-ups: gcite.chatflow.followup)
    knowledge_retrieval ─┐ (parallel, each with its own timeout; a failure degrades)
    web_search ──────────┴▶ merge (“Chunk编号”) ─▶ prompt ─▶ llm

:class:`ChatRun` yields :mod:`gcite.chatflow.events` from :meth:`ChatRun.events`. To stop
a run, cancel the task iterating it (that closes the model call), then take
:meth:`ChatRun.stopped` for its terminal events. :meth:`ChatRun.summary` gives what was
produced at any moment (for a run whose client went away). No HTTP, no SQL.
Source: platform design §2.2, §3, §5, §6.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gcite.chatflow import nodes
from gcite.chatflow.events import (
    KNOWLEDGE,
    LLM,
    MERGE,
    WEB,
    AnswerDelta,
    Event,
    NodeFinished,
    NodeName,
    NodeStarted,
    ReasoningDelta,
    RunEnded,
    RunFailed,
    RunSummary,
    Status,
    UsageReport,
)
from gcite.chatflow.followup import search_query
from gcite.chatflow.gate import BACKGROUND_RANK, admit
from gcite.chatflow.history import History, visible_context
from gcite.chatflow.scheduler import Scheduler as ProcessScheduler
from gcite.chatflow.seams import (
    KnowledgeStore,
    LLMBackend,
    Reasoning,
    RunTurn,
    Scheduler,
    Usage,
    WebSource,
)
from gcite.config import Settings
from gcite.errors import LLMError
from gcite.generate.backends import WEAK_KEY
from gcite.generate.fallback import FellBack
from gcite.generate.prompt import build_messages

log = logging.getLogger("gcite.chatflow")


def weak_margin(backend: Any) -> float:
    """How far below ``score_threshold`` ``backend`` wants to see knowledge-base chunks
    (its ``weak_margin`` attribute, 0.0 without one): the offline answerer answers from
    such chunks only on strong evidence; a language model never sees them."""
    margin = getattr(backend, "weak_margin", 0.0)
    return float(margin) if isinstance(margin, int | float) and margin > 0 else 0.0


def mark_weak(
    chunk: dict[str, Any], threshold: float, promoted: frozenset[str] | set[str] = frozenset()
) -> dict[str, Any]:
    """``chunk``, or a copy with :data:`WEAK_KEY` set when it is a knowledge-base chunk
    scored below ``threshold`` and not admitted by the relevance gate (its ``segment_id``
    not in ``promoted``, :mod:`gcite.chatflow.gate`)."""
    score = chunk.get("score")
    if chunk.get("source_type") == "rag" and isinstance(score, int | float) and score < threshold:
        if chunk.get("segment_id") in promoted:
            return chunk
        return {**chunk, WEAK_KEY: True}
    return chunk


@dataclass
class _Found:
    """What the retrieval nodes found, and the score threshold the model's chunks keep."""

    rag_items: list[Any] = field(default_factory=list)
    web_payload: Any = field(default_factory=list)
    threshold: float = 0.0
    margin: float = 0.0
    promoted: set[str] = field(default_factory=set)


def new_id() -> str:
    """A fresh UUID4 string (message, task, run and node execution ids)."""
    return str(uuid.uuid4())


@dataclass
class Turn:
    """One question to answer.

    ``roles``: the caller's roles, resolved server side (never from the request);
    ``history``: the earlier turns (:func:`gcite.chatflow.history.earlier_turns`).
    """

    query: str
    roles: tuple[str, ...] = ()
    history: History = field(default_factory=History)


@dataclass
class Deps:
    """What the chatflow runs on.

    ``get_store``: returns the KnowledgeStore (may open it; raises ``StoreError``), or None
    for no knowledge branch; ``web_source``: the web branch or None; ``template``: the
    system prompt template (None: seed §5.2). ``settings``: ``dataset``, ``top_k``,
    ``score_threshold``, ``kb_timeout_s``, ``web_count``, ``web_timeout_s``,
    ``max_web_results``. ``verifier``: ``(answer, chunk_metadata, question,
    search_query) -> report`` (blocking,
    run in a thread after the last answer delta; :func:`gcite.verify.verify_answer`), or
    None; its report becomes :attr:`RunSummary.verification` of a succeeded run.
    ``scheduler``: the process's (the service's lifespan creates one); a run of its own
    when not given (``gcite ask``, tests).
    """

    settings: Settings
    backend: LLMBackend
    get_store: Callable[[], KnowledgeStore] | None
    web_source: WebSource | None = None
    template: str | None = None
    verifier: Callable[[str, list[dict[str, Any]], str, str], dict[str, Any]] | None = None
    scheduler: Scheduler = field(default_factory=ProcessScheduler)


def _normaliser(store: Any) -> Callable[..., Any] | None:
    """``store``'s ``normalise_query`` when it takes the caller's ``roles``, else None."""
    method = getattr(store, "normalise_query", None)
    if not callable(method):
        return None
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):  # no signature to read: not known to take roles
        return None
    return method if "roles" in parameters else None


class _Lookup:
    """One run's knowledge-base work as one job on the scheduler's search threads.

    The job normalises the question (the store's ``normalise_query``,
    :mod:`gcite.knowledge.vocabulary`: the knowledge base's wording, for retrieval, the
    gate and the answerer), hands it to the event loop at once (:attr:`normalised`: the
    nodes' inputs and the web branch need it before the search ends), then searches with
    it (``search(query)``: :func:`gcite.chatflow.nodes.search_knowledge`). The question
    is normalised with the vocabulary of the documents the caller's ``roles`` may see
    (``normalise_query(query, roles=...)``): the rewritten question is streamed to the
    client and sent to the web search, so words of documents hidden from the caller never
    reach it. The question is left as it is for a store whose ``normalise_query`` does not
    take the roles (it cannot scope its vocabulary: fail closed) or that has none (a
    remote knowledge base normalises its own searches, with the roles it is sent), or
    when the store cannot be opened or normalising fails (the search then fails, or not,
    on its own and the knowledge node says why).
    """

    def __init__(
        self,
        get_store: Callable[[], KnowledgeStore],
        query: str,
        roles: Sequence[str],
        search: Callable[[str], list[dict[str, Any]]],
        scheduler: Scheduler,
    ) -> None:
        self.query = query
        self.roles = list(roles)
        self._get_store = get_store
        self._search = search
        loop = asyncio.get_running_loop()
        self._loop = loop
        self.normalised: asyncio.Future[str] = loop.create_future()
        self.job: asyncio.Future[list[dict[str, Any]]] = asyncio.ensure_future(
            scheduler.search(self._run)
        )
        self.job.add_done_callback(self._ended)

    def _run(self) -> list[dict[str, Any]]:
        """In a search thread."""
        query = self.query
        try:
            normalise_query = _normaliser(self._get_store())
            if normalise_query is not None:
                query = str(normalise_query(query, roles=self.roles))
        except Exception as exc:  # the search fails (and says why) on its own
            log.warning("query not normalised: %s", exc)
        finally:
            self._loop.call_soon_threadsafe(self._hand, query)
        return self._search(query)

    def _ended(self, job: asyncio.Future[Any]) -> None:
        # a job that never ran (cancelled, the pool shut down) still hands the question
        # on; a failure nobody awaits (the run was stopped first) is not reported twice
        self._hand(self.query)
        if not job.cancelled():
            job.exception()

    def _hand(self, query: str) -> None:
        if not self.normalised.done():
            self.normalised.set_result(query)

    async def searched(self) -> list[dict[str, Any]]:
        """The search's items (raises what the search raised)."""
        return await self.job

    def cancel(self) -> None:
        """Give up the job (its result is no longer needed; nothing if it has ended): a
        job still queued for a search thread never runs; one running finishes in its
        thread and its result is dropped."""
        self.job.cancel()


class ChatRun:
    """One run of the chatflow for one :class:`Turn` (see the module docstring)."""

    def __init__(self, turn: Turn, deps: Deps, *, arrival: int | None = None) -> None:
        self.turn = turn
        self.arrival = arrival  # the request's arrival number (Scheduler.arrival)
        self.deps = deps
        self.status: Literal["running", "succeeded", "failed", "stopped"] = "running"
        self.error: str | None = None
        self.answer_parts: list[str] = []
        self.reasoning_parts: list[str] = []
        self.chunk_metadata: list[dict[str, Any]] = []
        self.usage = Usage()
        self.started = time.monotonic()
        self.first_token: float | None = None
        self.timings: dict[str, float] = {}  # seconds: retrieval, web, merge
        self.fallback: dict[str, str] | None = None
        self.verification: dict[str, Any] | None = None
        self.steps = 0
        self._llm: NodeStarted | None = None
        self._llm_started = 0.0

    @property
    def answer(self) -> str:
        """The answer so far, markers included."""
        return "".join(self.answer_parts)

    # ------------------------------------------------------------------ helpers
    def _start(self, node: NodeName, inputs: dict[str, Any]) -> NodeStarted:
        self.steps += 1
        return NodeStarted(node, inputs, time.time())

    @staticmethod
    def _finish(
        started: NodeStarted,
        *,
        outputs: dict[str, Any] | None,
        elapsed: float,
        status: Status = "succeeded",
        error: str | None = None,
        usage: UsageReport | None = None,
    ) -> NodeFinished:
        return NodeFinished(
            started.node, status, started.inputs, outputs, error, elapsed, time.time(), usage
        )

    def usage_report(self) -> UsageReport:
        """Tokens and times now."""
        now = time.monotonic()
        first = self.first_token
        return UsageReport(
            prompt_tokens=self.usage.prompt_tokens,
            completion_tokens=self.usage.completion_tokens,
            estimated=self.usage.estimated,
            latency=now - self.started,
            time_to_first_token=None if first is None else first - self.started,
            time_to_generate=None if first is None else now - first,
        )

    def summary(self) -> RunSummary:
        """What the run produced so far: answer, cited and invalid ids, chunks, usage."""
        from gcite.stream.parser import parse_all

        known = [str(c.get("id")) for c in self.chunk_metadata]
        parsed = parse_all(self.answer, known)
        return RunSummary(
            status=self.status,
            answer=self.answer,
            cited_ids=[raw for raw, _ in parsed.citations],
            invalid_ids=list(parsed.invalid),
            chunk_metadata=self.chunk_metadata,
            backend=self.deps.backend.name,
            usage=self.usage_report(),
            elapsed=time.monotonic() - self.started,
            steps=self.steps,
            at=time.time(),
            error=self.error,
            reasoning="".join(self.reasoning_parts),
            timings=dict(self.timings),
            fallback=self.fallback,
            verification=self.verification,
        )

    # ---------------------------------------------------------------------- run
    async def events(self) -> AsyncIterator[Event]:
        """The run's events, from the first node to :class:`RunEnded` / :class:`RunFailed`."""
        # until its model is called the run goes before answers already streaming in a
        # busy process (gcite.chatflow.scheduler)
        turn = self.deps.scheduler.turn(self.arrival)
        try:
            async for event in self._run(turn):
                yield event
        except LLMError as exc:
            for event in self._failed(f"Run failed: {exc}", "llm"):
                yield event
        except Exception as exc:
            log.exception("chatflow run failed")
            for event in self._failed(f"Run failed: {type(exc).__name__}: {exc}", "internal"):
                yield event
        finally:
            turn.done()

    async def _run(self, turn: RunTurn) -> AsyncIterator[Event]:
        """The nodes wired: history, retrieval query, both sources, merge, prompt, model."""
        question, deps, settings = self.turn, self.deps, self.deps.settings
        history, cited_before = await visible_context(
            question.history,
            deps.get_store,
            roles=question.roles,
            dataset=settings.knowledge.dataset or None,
        )
        # a follow-up's condense call waits for the model (unpaced: part of the preparation)
        query = await turn.wait(search_query(question.query, history, deps.backend, settings))
        # the knowledge base's part in one search-thread job: the question normalised
        # (handed back at once, for the nodes' inputs and the web branch), then searched
        lookup = self._look_up(query)
        found = _Found()
        try:
            if lookup is not None:
                query = await turn.wait(lookup.normalised)
            async for event in self._retrieve(query, turn, found, lookup):
                yield event
        finally:  # a stop or a closed run while waiting: the search is not needed
            if lookup is not None:
                lookup.cancel()
        merge_node = self._start(MERGE, {"rag_chunk_count": len(found.rag_items)})
        yield merge_node
        t0 = time.monotonic()
        merged = nodes.merge(
            found.rag_items, found.web_payload, max_web_results=settings.web.max_results
        )
        self.chunk_metadata = [dict(c) for c in merged["chunk_metadata"]]
        self.timings["merge"] = time.monotonic() - t0
        yield self._finish(merge_node, outputs=dict(merged), elapsed=time.monotonic() - t0)
        messages = build_messages(
            question.query, merged["formatted_chunks"], history, cited_before, deps.template
        )
        self._llm = self._start(LLM, {"query": question.query})
        self._llm_started = time.monotonic()
        turn.done()
        yield self._llm
        async for event in self._generate(messages, query, found):
            yield event
        if deps.verifier is not None:  # after the last delta: the text is never delayed
            await self._verify(deps.verifier, query)
        for event in self._ended("succeeded"):
            yield event

    async def _retrieve(
        self, query: str, turn: RunTurn, found: _Found, lookup: _Lookup | None
    ) -> AsyncIterator[Event]:
        """The knowledge (``lookup``'s search) and web nodes, in parallel, each with its own
        timeout; their results (or nothing, for a failed branch) into ``found``."""
        deps, settings = self.deps, self.deps.settings
        # a backend that weighs evidence itself (the offline answerer) also sees the
        # knowledge-base chunks a little below the threshold, marked as such
        found.threshold = settings.knowledge.score_threshold
        found.margin = weak_margin(deps.backend) if found.threshold > 0 else 0.0
        kr_node = web_node = None
        if deps.get_store is not None:
            kr_node = self._start(KNOWLEDGE, {"query": query})
            yield kr_node
        if deps.web_source is not None:
            web_node = self._start(WEB, {"query": query, "count": settings.web.count})
            yield web_node
        works, tasks = self._branch_tasks(query, lookup)
        try:
            # counted as preparing while the knowledge base searches (CPU), not after
            computing = tasks[0] if kr_node is not None else None
            branches = list(await turn.wait(asyncio.gather(*tasks), computing=computing))
        finally:
            for task in tasks:
                task.cancel()
            for work in works:  # a branch cancelled before it started never ran its work
                if inspect.getcoroutinestate(work) == inspect.CORO_CREATED:
                    work.close()
        if kr_node is not None:
            kr = branches.pop(0)
            if kr.error is None:
                found.rag_items = self._gate(query, list(kr.value or []), found)
            else:
                log.warning("knowledge retrieval failed: %s", kr.error)
            yield self._branch_finished(kr_node, kr, "retrieval", {"result": found.rag_items})
        if web_node is not None:
            web = branches.pop(0)
            if web.error is None:
                found.web_payload = web.value
            yield self._branch_finished(web_node, web, "web", {"payload": web.value})

    def _branch_tasks(
        self, query: str, lookup: _Lookup | None
    ) -> tuple[list[Coroutine[Any, Any, Any]], list[asyncio.Task[nodes.Branch[Any]]]]:
        """The retrieval branches' works (knowledge first, then web, as configured) and
        the tasks running each under its own timeout."""
        deps, settings = self.deps, self.deps.settings
        works: list[Coroutine[Any, Any, Any]] = []
        tasks: list[asyncio.Task[nodes.Branch[Any]]] = []
        if lookup is not None:
            kr_work = lookup.searched()
            works.append(kr_work)
            tasks.append(asyncio.ensure_future(nodes.branch(kr_work, settings.knowledge.timeout_s)))
        if deps.web_source is not None:
            web_work = nodes.search_web(deps.web_source, query, count=settings.web.count)
            works.append(web_work)
            tasks.append(asyncio.ensure_future(nodes.branch(web_work, settings.web.timeout_s)))
        return works, tasks

    def _branch_finished(
        self,
        node: NodeStarted,
        branch: nodes.Branch[Any],
        timing: str,
        outputs: dict[str, Any],
    ) -> NodeFinished:
        """The finish event of a retrieval node (``outputs`` when it succeeded); its
        elapsed time into :attr:`timings` under ``timing``."""
        self.timings[timing] = branch.elapsed
        if branch.error is None:
            return self._finish(node, outputs=outputs, elapsed=branch.elapsed)
        return self._finish(
            node, outputs=None, status="failed", error=branch.error, elapsed=branch.elapsed
        )

    def _look_up(self, query: str) -> _Lookup | None:
        """The knowledge base's job for ``query`` started on the scheduler's search
        threads, or None without a knowledge branch."""
        get_store = self.deps.get_store
        if get_store is None:
            return None
        settings = self.deps.settings
        search = functools.partial(
            nodes.search_knowledge,
            get_store,
            roles=self.turn.roles,
            dataset=settings.knowledge.dataset or None,
            # the gate (gcite.chatflow.gate) weighs the whole ranked list
            top_k=max(settings.knowledge.top_k, BACKGROUND_RANK),
            score_threshold=0.0,
        )
        return _Lookup(get_store, query, self.turn.roles, search, self.deps.scheduler)

    def _gate(self, query: str, items: list[Any], found: _Found) -> list[Any]:
        """The retrieved items the relevance gate passes on (:func:`gcite.chatflow.gate.admit`),
        cut to ``top_k``; the promoted ones into ``found``."""
        weak_floor = found.threshold - found.margin if found.margin > 0 else None
        admitted = admit(query, items, found.threshold, weak_floor=weak_floor)
        found.promoted = admitted.promoted
        return admitted.items[: self.deps.settings.knowledge.top_k]

    async def _generate(
        self, messages: list[dict[str, str]], query: str, found: _Found
    ) -> AsyncIterator[Event]:
        """The LLM node's deltas, paced and coalesced by the process's scheduler."""
        chunks = self.chunk_metadata
        if found.margin > 0:
            chunks = [mark_weak(c, found.threshold, found.promoted) for c in chunks]
        backend = self.deps.scheduler.paced(self.deps.backend)
        async for delta in nodes.generate(
            backend, messages, chunks=chunks, query=query, usage=self.usage
        ):
            if isinstance(delta, FellBack):  # the model is down: the offline answerer
                self.fallback = {"backend": delta.backend, "reason": delta.reason}
                continue
            if isinstance(delta, Reasoning):
                self.reasoning_parts.append(delta.text)
                yield ReasoningDelta(delta.text)
                continue
            if self.first_token is None:
                self.first_token = time.monotonic()
            self.answer_parts.append(delta)
            yield AnswerDelta(delta)

    async def _verify(
        self, verifier: Callable[[str, list[dict[str, Any]], str, str], Any], query: str
    ) -> None:
        """The verification report (of the answer against its chunks, and against the
        question and the retrieval ``query``), on the scheduler's threads; left out (None)
        when it fails or takes too long."""
        try:
            report = await self.deps.scheduler.verify(
                verifier, self.answer, self.chunk_metadata, self.turn.query, query
            )
        except Exception:
            log.exception("citation verification failed")
            return
        if report is None:
            log.warning("citation verification took too long: left out")
        self.verification = report

    # ------------------------------------------------------------------ endings
    def _close_llm(self, status: Status, error: str | None) -> list[Event]:
        started, self._llm = self._llm, None
        if started is None:
            return []
        return [
            self._finish(
                started,
                outputs={"text": self.answer},
                status=status,
                error=error,
                elapsed=time.monotonic() - self._llm_started,
                usage=self.usage_report(),
            )
        ]

    def _ended(self, status: Literal["succeeded", "stopped"]) -> list[Event]:
        self.status = status
        events = self._close_llm(status, None)
        events.append(RunEnded(self.summary()))
        return events

    def interrupted(self, error: str) -> list[Event]:
        """Terminal events of a run its serving process ended while it ran (after
        cancelling :meth:`events`): the LLM node failed (when it had started) and
        :class:`RunFailed` of kind ``interrupted`` with ``error``."""
        return self._failed(error, "interrupted")

    def _failed(self, error: str, kind: Literal["llm", "internal", "interrupted"]) -> list[Event]:
        self.status, self.error = "failed", error
        events = self._close_llm("failed", error)
        events.append(RunFailed(error, kind, self.summary()))
        return events

    def stopped(self) -> list[Event]:
        """Terminal events of a run stopped by its caller (after cancelling :meth:`events`):
        the LLM node finished as ``stopped`` (when it had started) and :class:`RunEnded`."""
        return self._ended("stopped")


__all__ = ["ChatRun", "Deps", "Turn", "new_id"]
