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
import inspect
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
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
from gcite.chatflow.history import History, visible_context
from gcite.chatflow.seams import KnowledgeStore, LLMBackend, Reasoning, Usage, WebSource
from gcite.config import Settings
from gcite.errors import LLMError
from gcite.generate import priority
from gcite.generate.backends import WEAK_KEY
from gcite.generate.fallback import FellBack
from gcite.generate.prompt import build_messages

log = logging.getLogger("gcite.chatflow")


#: Verifications running at once in one process, on their own threads (never in the
#: default executor the searches use). Their offline part (sentence embeddings, CPU) runs
#: one at a time (``gcite.verify.verifier.OFFLINE_LOCK``); a configured judge's network
#: calls run concurrently. Under load a ``message_end`` waits its turn; the text never does.
VERIFY_THREADS = 4
#: Seconds a run waits for its verification (queueing included) before it ends without
#: one (``verification`` None, as when no verifier is configured): a stuck verifier never
#: holds back ``message_end``.
VERIFY_TIMEOUT_S = 30.0
_verify_pool: ThreadPoolExecutor | None = None


def _verify_threads() -> ThreadPoolExecutor:
    global _verify_pool
    if _verify_pool is None:
        _verify_pool = ThreadPoolExecutor(VERIFY_THREADS, thread_name_prefix="gcite-verify")
    return _verify_pool


def weak_margin(backend: Any) -> float:
    """How far below ``score_threshold`` ``backend`` wants to see knowledge-base chunks
    (its ``weak_margin`` attribute, 0.0 without one): the offline answerer answers from
    such chunks only on strong evidence; a language model never sees them."""
    margin = getattr(backend, "weak_margin", 0.0)
    return float(margin) if isinstance(margin, int | float) and margin > 0 else 0.0


def mark_weak(chunk: dict[str, Any], threshold: float) -> dict[str, Any]:
    """``chunk``, or a copy with :data:`WEAK_KEY` set when it is a knowledge-base chunk
    scored below ``threshold``."""
    score = chunk.get("score")
    if chunk.get("source_type") == "rag" and isinstance(score, int | float) and score < threshold:
        return {**chunk, WEAK_KEY: True}
    return chunk


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
    ``max_web_results``. ``verifier``: ``(answer, chunk_metadata) -> report`` (blocking,
    run in a thread after the last answer delta; :func:`gcite.verify.verify_answer`), or
    None; its report becomes :attr:`RunSummary.verification` of a succeeded run.
    """

    settings: Settings
    backend: LLMBackend
    get_store: Callable[[], KnowledgeStore] | None
    web_source: WebSource | None = None
    template: str | None = None
    verifier: Callable[[str, list[dict[str, Any]]], dict[str, Any]] | None = None


class ChatRun:
    """One run of the chatflow for one :class:`Turn` (see the module docstring)."""

    def __init__(self, turn: Turn, deps: Deps, *, arrival: int | None = None) -> None:
        self.turn = turn
        self.arrival = arrival  # the request's arrival number (generate/priority.py)
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
        # busy process (generate/priority.py)
        preparing = priority.Preparing(self.arrival)
        try:
            async for event in self._run(preparing):
                yield event
        except LLMError as exc:
            for event in self._failed(f"Run failed: {exc}", "llm"):
                yield event
        except Exception as exc:
            log.exception("chatflow run failed")
            for event in self._failed(f"Run failed: {type(exc).__name__}: {exc}", "internal"):
                yield event
        finally:
            preparing.done()

    async def _run(self, preparing: priority.Preparing) -> AsyncIterator[Event]:
        turn, deps, settings = self.turn, self.deps, self.deps.settings
        history, cited_before = await visible_context(
            turn.history,
            deps.get_store,
            roles=turn.roles,
            dataset=settings.knowledge.dataset or None,
        )
        preparing.away()  # a follow-up's condense call waits for the model
        query = await search_query(turn.query, history, deps.backend, settings)
        await preparing.admit()  # CPU steps before the model call, in arrival order
        threshold = settings.knowledge.score_threshold
        # a backend that weighs evidence itself (the offline answerer) also sees the
        # knowledge-base chunks a little below the threshold, marked as such
        margin = weak_margin(deps.backend) if threshold > 0 else 0.0
        kr_threshold = max(0.0, threshold - margin)
        kr_node = web_node = None
        tasks: list[asyncio.Task[nodes.Branch[Any]]] = []
        works: list[Coroutine[Any, Any, Any]] = []
        kr_task: asyncio.Task[nodes.Branch[Any]] | None = None
        if deps.get_store is not None:
            kr_node = self._start(KNOWLEDGE, {"query": query})
            yield kr_node
        if deps.web_source is not None:
            web_node = self._start(WEB, {"query": query, "count": settings.web.count})
            yield web_node
        try:
            if deps.get_store is not None:
                kr_work = nodes.retrieve_knowledge(
                    deps.get_store,
                    query,
                    roles=turn.roles,
                    dataset=settings.knowledge.dataset or None,
                    top_k=settings.knowledge.top_k,
                    score_threshold=kr_threshold,
                )
                works.append(kr_work)
                kr_task = asyncio.ensure_future(nodes.branch(kr_work, settings.knowledge.timeout_s))
                tasks.append(kr_task)
            if deps.web_source is not None:
                web_work = nodes.search_web(deps.web_source, query, count=settings.web.count)
                works.append(web_work)
                tasks.append(asyncio.ensure_future(nodes.branch(web_work, settings.web.timeout_s)))
            # no slot held while the sources answer; counted while the knowledge base
            # searches (CPU), not after
            preparing.release()
            if kr_task is None:
                preparing.away()
            else:
                kr_task.add_done_callback(lambda _task: preparing.away())
            branches = list(await asyncio.gather(*tasks))
            await preparing.admit()
        finally:
            for task in tasks:
                task.cancel()
            for work in works:  # a branch cancelled before it started never ran its work
                if inspect.getcoroutinestate(work) == inspect.CORO_CREATED:
                    work.close()
        rag_items: list[Any] = []
        web_payload: Any = []
        if kr_node is not None:
            kr = branches.pop(0)
            self.timings["retrieval"] = kr.elapsed
            if kr.error is None:
                rag_items = list(kr.value or [])
                yield self._finish(kr_node, outputs={"result": rag_items}, elapsed=kr.elapsed)
            else:
                log.warning("knowledge retrieval failed: %s", kr.error)
                yield self._finish(
                    kr_node, outputs=None, status="failed", error=kr.error, elapsed=kr.elapsed
                )
        if web_node is not None:
            web = branches.pop(0)
            self.timings["web"] = web.elapsed
            if web.error is None:
                web_payload = web.value
                yield self._finish(web_node, outputs={"payload": web.value}, elapsed=web.elapsed)
            else:
                yield self._finish(
                    web_node, outputs=None, status="failed", error=web.error, elapsed=web.elapsed
                )

        merge_node = self._start(MERGE, {"rag_chunk_count": len(rag_items)})
        yield merge_node
        t0 = time.monotonic()
        merged = nodes.merge(rag_items, web_payload, max_web_results=settings.web.max_results)
        self.chunk_metadata = [dict(c) for c in merged["chunk_metadata"]]
        self.timings["merge"] = time.monotonic() - t0
        yield self._finish(merge_node, outputs=dict(merged), elapsed=time.monotonic() - t0)

        messages = build_messages(
            turn.query, merged["formatted_chunks"], history, cited_before, deps.template
        )
        self._llm = self._start(LLM, {"query": turn.query})
        self._llm_started = time.monotonic()
        preparing.done()
        yield self._llm
        backend_chunks = self.chunk_metadata
        if margin > 0:
            backend_chunks = [mark_weak(c, threshold) for c in self.chunk_metadata]
        async for delta in nodes.generate(
            deps.backend,
            messages,
            chunks=backend_chunks,
            query=query,
            usage=self.usage,
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
        if deps.verifier is not None:  # after the last delta: the text is never delayed
            try:
                loop = asyncio.get_running_loop()
                self.verification = await asyncio.wait_for(
                    loop.run_in_executor(
                        _verify_threads(), deps.verifier, self.answer, self.chunk_metadata
                    ),
                    VERIFY_TIMEOUT_S,
                )
            except TimeoutError:
                log.warning("citation verification took over %s s: left out", VERIFY_TIMEOUT_S)
            except Exception:
                log.exception("citation verification failed")
        for event in self._ended("succeeded"):
            yield event

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

    def _failed(self, error: str, kind: Literal["llm", "internal"]) -> list[Event]:
        self.status, self.error = "failed", error
        events = self._close_llm("failed", error)
        events.append(RunFailed(error, kind, self.summary()))
        return events

    def stopped(self) -> list[Event]:
        """Terminal events of a run stopped by its caller (after cancelling :meth:`events`):
        the LLM node finished as ``stopped`` (when it had started) and :class:`RunEnded`."""
        return self._ended("stopped")


__all__ = ["ChatRun", "Deps", "Turn", "new_id"]
