"""The G-Cite chatflow as an async generator of typed events (platform design §2.2, §5, §6).

::

    workflow_started
    node_started(knowledge-retrieval) [node_started(tool)]     both branches run in parallel,
    node_finished(knowledge-retrieval) [node_finished(tool)]    each with its own timeout
    node_started(code "Chunk编号") node_finished(code)          formatted_chunks, chunk_count,
                                                                chunk_metadata (before any text)
    node_started(llm) answer deltas... node_finished(llm)
    message_end workflow_finished                                (success, and stop)
    | workflow_finished(failed) error                            (failure)

A failing or timing-out retrieval branch does not fail the run: its ``node_finished``
says ``status: "failed"`` with the error, and the answer uses the other branch (with
no chunk at all, the model is asked to say "根据现有资料无法确定").

:class:`Chatflow` keeps the run's state (answer so far, chunk metadata, usage) so the
service can end a stopped run (:meth:`Chatflow.stopped_events`) after cancelling the
generator, and persist whatever was produced.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gcite.chatflow.followup import search_query
from gcite.config import Settings
from gcite.errors import LLMError, SourceError
from gcite.generate.backends import LLMBackend, Usage
from gcite.generate.prompt import build_messages
from gcite.service.events import (
    NODE_CODE,
    NODE_KNOWLEDGE,
    NODE_LLM,
    NODE_TOOL,
    AnswerDelta,
    ErrorEvent,
    Event,
    MessageEnd,
    NodeFinished,
    NodeStarted,
    WorkflowFinished,
    WorkflowStarted,
)
from gcite.service.store import new_id

KR_NODE = ("knowledge_retrieval", "知识检索")
WEB_NODE = ("web_search", "Web Search")
CODE_NODE = ("chunk_numbering", "Chunk编号")
LLM_NODE = ("llm", "LLM")
START_NODE_ID = "start"

log = logging.getLogger("gcite.service")


@dataclass
class ChatTurn:
    """One question to answer.

    ``roles``: the caller's roles, resolved server side from the app key (never from the
    request). ``history``: earlier turns, oldest first, ``{"query", "answer"}``.
    ``cited_before``: UnifiedChunks cited in earlier turns (seed §6). ``created_at``: int s.
    """

    query: str
    user: str
    conversation_id: str
    message_id: str
    roles: tuple[str, ...]
    inputs: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    cited_before: list[dict[str, Any]] = field(default_factory=list)
    created_at: int = field(default_factory=lambda: int(time.time()))
    workflow_run_id: str = field(default_factory=new_id)


@dataclass
class ChatDeps:
    """What the chatflow runs on.

    ``get_store``: returns the shared KnowledgeStore (``store.search(query, *, dataset,
    roles, condition, top_k, score_threshold) -> Dify KR result items``), or raises
    ``StoreError``; None: no knowledge branch configured. ``web_source``: a WebSource
    (``await search(query, count=...) -> raw payload``) or None. ``template``: the system
    prompt template (None: seed §5.2).
    """

    settings: Settings
    backend: LLMBackend
    get_store: Callable[[], Any] | None
    web_source: Any | None = None
    template: str | None = None


@dataclass
class Branch:
    """The outcome of one retrieval branch: ``value`` or ``error``, ``elapsed`` seconds."""

    value: Any = None
    error: str | None = None
    elapsed: float = 0.0


@dataclass
class RunState:
    """What the run produced so far (read by the service to answer and persist)."""

    status: str = "running"  # running | succeeded | failed | stopped
    answer_parts: list[str] = field(default_factory=list)
    chunk_metadata: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    error_code: str | None = None
    error_status: int = 500
    metadata: dict[str, Any] = field(default_factory=dict)
    retriever_resources: list[dict[str, Any]] = field(default_factory=list)
    cited_ids: list[str] = field(default_factory=list)
    invalid_ids: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    first_token: float | None = None
    llm_started: NodeStarted | None = None
    llm_started_at: float = 0.0
    steps: int = 0

    @property
    def answer(self) -> str:
        """The answer text so far, markers included."""
        return "".join(self.answer_parts)


def _now() -> int:
    return int(time.time())


async def _timed(coro: Any, timeout: float) -> Branch:
    """Await ``coro`` with a timeout; any failure becomes ``Branch.error`` (never raises)."""
    start = time.monotonic()
    try:
        value = await asyncio.wait_for(coro, timeout=timeout)
    except TimeoutError:
        return Branch(error=f"timeout after {timeout:g}s", elapsed=time.monotonic() - start)
    except SourceError as exc:
        return Branch(error=f"{type(exc).__name__}: {exc}", elapsed=time.monotonic() - start)
    except Exception as exc:  # a source bug must not take the answer down
        return Branch(error=f"{type(exc).__name__}: {exc}", elapsed=time.monotonic() - start)
    return Branch(value=value, elapsed=time.monotonic() - start)


def usage_dict(usage: Usage, state: RunState, end: float) -> dict[str, Any]:
    """Dify's ``LLMUsage`` (prices are decimal strings; times in seconds, 3 decimals)."""
    ttft = (state.first_token - state.started) if state.first_token is not None else None
    gen = (end - state.first_token) if state.first_token is not None else None
    return {
        "prompt_tokens": usage.prompt_tokens,
        "prompt_unit_price": "0",
        "prompt_price_unit": "0",
        "prompt_price": "0",
        "completion_tokens": usage.completion_tokens,
        "completion_unit_price": "0",
        "completion_price_unit": "0",
        "completion_price": "0",
        "total_tokens": usage.total_tokens,
        "total_price": "0",
        "currency": "USD",
        "latency": round(end - state.started, 3),
        "time_to_first_token": round(ttft, 3) if ttft is not None else None,
        "time_to_generate": round(gen, 3) if gen is not None else None,
    }


def retriever_resource(chunk: dict[str, Any], position: int) -> dict[str, Any]:
    """One cited UnifiedChunk in Dify's ``RetrievalSourceMetadata`` shape (dify-protocol §1.6).

    Knowledge-base chunks map their dataset/document/segment ids; web chunks use
    ``document_name`` = title, ``document_id`` = url, ``dataset_name`` = site name (or
    host), ``data_source_type`` = ``"web"``. ``doc_metadata`` carries the G-Cite fields
    (``chunk_id``, ``source_type``, ``document_title``, ``display_subtitle``, ``url``, ...).
    """
    content = str(chunk.get("content") or "")
    is_web = chunk.get("source_type") == "web"
    title = str(chunk.get("document_title") or chunk.get("document_name") or "")
    doc_metadata: dict[str, Any] = {
        "chunk_id": str(chunk.get("id") or ""),
        "source_type": "web" if is_web else "rag",
        "document_title": title,
        "display_subtitle": chunk.get("display_subtitle") or "",
        "url": chunk.get("url") or "",
        "source_file_url": chunk.get("source_file_url") or "",
    }
    if is_web:
        doc_metadata.update(
            {
                "site_name": chunk.get("site_name") or "",
                "site_host": chunk.get("site_host") or "",
                "published_date": chunk.get("published_date") or "",
            }
        )
    return {
        "position": position,
        "dataset_id": None if is_web else (chunk.get("dataset_id") or None),
        "dataset_name": (chunk.get("site_name") or chunk.get("site_host") or "")
        if is_web
        else (chunk.get("dataset_name") or ""),
        "document_id": (chunk.get("url") or None) if is_web else (chunk.get("document_id") or None),
        "document_name": title if is_web else (chunk.get("document_name") or title),
        "data_source_type": "web" if is_web else "upload_file",
        "segment_id": None if is_web else (chunk.get("segment_id") or None),
        "retriever_from": "workflow",
        "score": chunk.get("score"),
        "hit_count": None,
        "word_count": len(content),
        "segment_position": None if is_web else chunk.get("segment_position"),
        "index_node_hash": None,
        "content": content,
        "page": None,
        "doc_metadata": doc_metadata,
        "title": title,
        "files": None,
    }


def resources_for(
    cited: Sequence[str], chunk_metadata: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``retriever_resources`` for the cited raw ids, in display order, positions 1..n."""
    by_id = {str(c.get("id")): c for c in chunk_metadata}
    out: list[dict[str, Any]] = []
    for raw in cited:
        chunk = by_id.get(raw)
        if chunk is not None:
            out.append(retriever_resource(chunk, len(out) + 1))
    return out


HIDDEN_FIELDS = frozenset({"access_roles"})
"""Metadata keys chat clients never see (who may read a document is the server's business)."""


def without_hidden(value: Any) -> Any:
    """A copy of ``value`` without :data:`HIDDEN_FIELDS` keys in any nested dict.

    Applied to the knowledge-base result items as soon as the knowledge branch returns, so
    ``node_finished(knowledge-retrieval)``, ``chunk_metadata``, ``retriever_resources``,
    stored messages and Plan B never carry ``access_roles``.
    """
    if isinstance(value, dict):
        return {k: without_hidden(v) for k, v in value.items() if k not in HIDDEN_FIELDS}
    if isinstance(value, list):
        return [without_hidden(v) for v in value]
    return value


def citations_of(answer: str, known_ids: Sequence[str]) -> tuple[list[str], list[str]]:
    """(cited raw ids in display order, invalid ids) of a complete answer (marker spec §2-§3)."""
    from gcite.stream.parser import parse_all

    result = parse_all(answer, list(known_ids))
    return [raw for raw, _ in result.citations], list(result.invalid)


class Chatflow:
    """One run of the chatflow for one :class:`ChatTurn`.

    Iterate :meth:`events` for the normal run. To stop it: cancel the task iterating it,
    then emit :meth:`stopped_events`. :attr:`state` holds the answer so far either way.
    """

    def __init__(self, turn: ChatTurn, deps: ChatDeps) -> None:
        self.turn = turn
        self.deps = deps
        self.state = RunState()
        self._index = 0
        self._query = turn.query

    # ------------------------------------------------------------ node helpers
    def _start(
        self, node: tuple[str, str], node_type: str, pred: str | None, inputs: dict[str, Any]
    ) -> NodeStarted:
        self._index += 1
        self.state.steps += 1
        return NodeStarted(
            workflow_run_id=self.turn.workflow_run_id,
            execution_id=new_id(),
            node_id=node[0],
            node_type=node_type,
            title=node[1],
            index=self._index,
            predecessor_node_id=pred,
            inputs=inputs,
            created_at=_now(),
        )

    def _finish(
        self,
        started: NodeStarted,
        *,
        outputs: dict[str, Any] | None,
        status: str = "succeeded",
        error: str | None = None,
        elapsed: float = 0.0,
        process_data: dict[str, Any] | None = None,
        execution_metadata: dict[str, Any] | None = None,
    ) -> NodeFinished:
        return NodeFinished(
            workflow_run_id=started.workflow_run_id,
            execution_id=started.execution_id,
            node_id=started.node_id,
            node_type=started.node_type,
            title=started.title,
            index=started.index,
            predecessor_node_id=started.predecessor_node_id,
            inputs=started.inputs,
            outputs=outputs,
            status=status,
            error=error,
            elapsed_time=elapsed,
            created_at=started.created_at,
            finished_at=_now(),
            process_data=process_data,
            execution_metadata=execution_metadata
            or {"total_tokens": 0, "total_price": "0", "currency": "USD"},
        )

    # ------------------------------------------------------------- branches
    async def _search_kb(self) -> Any:
        assert self.deps.get_store is not None
        settings = self.deps.settings
        store = await asyncio.to_thread(self.deps.get_store)
        return await asyncio.to_thread(
            store.search,
            self._query,
            dataset=settings.dataset or None,
            roles=list(self.turn.roles),
            top_k=settings.top_k,
            score_threshold=settings.score_threshold,
        )

    async def _visible_documents(self, document_ids: list[str]) -> set[str]:
        """Which of ``document_ids`` the caller may see now (key's CURRENT roles, dataset).

        Fails closed: no store, or a store error, gives the empty set.
        """
        if not document_ids or self.deps.get_store is None:
            return set()
        try:
            store = await asyncio.to_thread(self.deps.get_store)
            visible: set[str] = await asyncio.to_thread(
                store.visible_document_ids,
                document_ids,
                roles=list(self.turn.roles),
                dataset=self.deps.settings.dataset or None,
            )
        except Exception as exc:  # fail closed: nothing earlier from the knowledge base
            log.warning("earlier turns left out, visibility check failed: %s", exc)
            return set()
        return visible

    async def _visible_context(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """``(history, cited_before)`` of earlier turns that the caller may still see (seed §6).

        Earlier turns were answered under the roles the key had then, from the documents as
        they were then. Before they go into the prompt, the knowledge-base documents they
        used are checked again against the store with the key's CURRENT roles (and the
        configured dataset): a chunk whose document is no longer visible (roles changed,
        the document's ``access_roles`` tightened by a re-ingest, the document deleted) is
        left out of ``cited_before``, content and title, and an earlier answer that quoted
        such a document is left out of the history (its question stays). Web chunks are
        public and kept. When the check cannot be made (no store, a store error), every
        knowledge-base chunk and every answer that quoted one is left out.
        """
        cited = self.turn.cited_before
        history = self.turn.history
        wanted = {str(c.get("document_id") or "") for c in cited if c.get("source_type") != "web"}
        for past in history:
            wanted.update(str(d) for d in past.get("document_ids") or ())
        visible = await self._visible_documents(sorted(wanted))
        kept_cited = [
            c
            for c in cited
            if c.get("source_type") == "web" or str(c.get("document_id") or "") in visible
        ]
        kept_history: list[dict[str, Any]] = []
        for past in history:
            turn = {k: v for k, v in past.items() if k != "document_ids"}
            if not all(str(d) in visible for d in past.get("document_ids") or ()):
                turn.pop("answer", None)
            kept_history.append(turn)
        return kept_history, kept_cited

    async def _search_web(self) -> Any:
        source = self.deps.web_source
        assert source is not None
        return await source.search(self._query, count=self.deps.settings.web_count)

    # ------------------------------------------------------------------ run
    async def events(self) -> AsyncIterator[Event]:
        """The run's events, from ``workflow_started`` to the terminal events."""
        turn = self.turn
        yield WorkflowStarted(
            workflow_run_id=turn.workflow_run_id,
            inputs={
                **turn.inputs,
                "sys.query": turn.query,
                "sys.user_id": turn.user,
                "sys.conversation_id": turn.conversation_id,
            },
            created_at=turn.created_at,
        )
        try:
            async for event in self._run():
                yield event
        except LLMError as exc:
            for event in self._failed(f"Run failed: {exc}", "completion_request_error", 400):
                yield event
        except Exception as exc:
            message = f"Run failed: {type(exc).__name__}: {exc}"
            for event in self._failed(message, "internal_server_error", 500):
                yield event

    async def _run(self) -> AsyncIterator[Event]:
        turn, settings, state = self.turn, self.deps.settings, self.state
        # the retrieval query: follow-ups get their subject (gcite.chatflow.followup)
        history, cited_before = await self._visible_context()
        self._query = await search_query(turn.query, history, self.deps.backend, settings)
        kr_node = web_node = None
        tasks: list[asyncio.Task[Branch]] = []
        if self.deps.get_store is not None:
            kr_node = self._start(KR_NODE, NODE_KNOWLEDGE, START_NODE_ID, {"query": self._query})
            yield kr_node
        if self.deps.web_source is not None:
            web_inputs = {"query": self._query, "count": settings.web_count}
            web_node = self._start(WEB_NODE, NODE_TOOL, START_NODE_ID, web_inputs)
            yield web_node
        try:
            if kr_node is not None:
                tasks.append(
                    asyncio.ensure_future(_timed(self._search_kb(), settings.kb_timeout_s))
                )
            if web_node is not None:
                tasks.append(
                    asyncio.ensure_future(_timed(self._search_web(), settings.web_timeout_s))
                )
            branches = list(await asyncio.gather(*tasks))
        finally:
            for task in tasks:
                task.cancel()
        rag_items: list[Any] = []
        web_payload: Any = []
        if kr_node is not None:
            kr = branches.pop(0)
            if kr.error is None and isinstance(kr.value, list):
                rag_items = [without_hidden(item) for item in kr.value]
                yield self._finish(kr_node, outputs={"result": rag_items}, elapsed=kr.elapsed)
            else:
                error = kr.error or "knowledge store returned no list"
                log.warning("knowledge retrieval failed: %s", error)
                yield self._finish(
                    kr_node, outputs=None, status="failed", error=error, elapsed=kr.elapsed
                )
        if web_node is not None:
            web = branches.pop(0)
            if web.error is None:
                web_payload = web.value
                tool_out = {"text": "", "files": [], "json": [web.value]}
                yield self._finish(web_node, outputs=tool_out, elapsed=web.elapsed)
            else:
                yield self._finish(
                    web_node, outputs=None, status="failed", error=web.error, elapsed=web.elapsed
                )

        # -- merge node ("Chunk编号", seed §3): before any answer text
        from gcite.merge import merge_chunks

        pred = web_node.node_id if web_node else (kr_node.node_id if kr_node else START_NODE_ID)
        code_inputs = {"rag_chunk_count": len(rag_items)}
        code_node = self._start(CODE_NODE, NODE_CODE, pred, code_inputs)
        yield code_node
        t0 = time.monotonic()
        merged = merge_chunks(rag_items, web_payload, max_web_results=settings.max_web_results)
        chunks = [without_hidden(dict(c)) for c in merged["chunk_metadata"]]
        state.chunk_metadata = chunks
        outputs: dict[str, Any] = {
            "formatted_chunks": merged["formatted_chunks"],
            "chunk_count": merged["chunk_count"],
            "chunk_metadata": chunks,
        }
        yield self._finish(code_node, outputs=outputs, elapsed=time.monotonic() - t0)

        # -- LLM node (seed §5)
        messages = build_messages(
            turn.query,
            merged["formatted_chunks"],
            history,
            cited_before,
            self.deps.template,
        )
        llm_node = self._start(LLM_NODE, NODE_LLM, code_node.node_id, {"query": turn.query})
        state.llm_started, state.llm_started_at = llm_node, time.monotonic()
        yield llm_node
        stream = self.deps.backend.stream(
            messages, chunks=chunks, query=self._query, usage=state.usage
        )
        try:
            async for delta in stream:
                if not isinstance(delta, str) or not delta:
                    continue
                if state.first_token is None:
                    state.first_token = time.monotonic()
                state.answer_parts.append(delta)
                yield AnswerDelta(delta, node_id=llm_node.node_id)
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        state.status = "succeeded"
        for event in self._terminal("succeeded"):
            yield event

    # ------------------------------------------------------------ endings
    def _close_llm(self, status: str, error: str | None) -> list[Event]:
        state = self.state
        if state.llm_started is None:
            return []
        started, state.llm_started = state.llm_started, None
        usage = usage_dict(state.usage, state, time.monotonic())
        return [
            self._finish(
                started,
                outputs={"text": state.answer},
                status=status,
                error=error,
                elapsed=time.monotonic() - state.llm_started_at,
                process_data={"usage": usage},
                execution_metadata={
                    "total_tokens": state.usage.total_tokens,
                    "total_price": "0",
                    "currency": "USD",
                },
            )
        ]

    def _summarise(self) -> None:
        state = self.state
        known = [str(c.get("id")) for c in state.chunk_metadata]
        cited, invalid = citations_of(state.answer, known)
        state.cited_ids, state.invalid_ids = cited, invalid
        state.retriever_resources = resources_for(cited, state.chunk_metadata)
        state.metadata = {
            "annotation_reply": None,
            "usage": usage_dict(state.usage, state, time.monotonic()),
            "retriever_resources": state.retriever_resources,
            "gcite": {
                "backend": self.deps.backend.name,
                "cited_ids": cited,
                "invalid_ids": invalid,
            },
        }

    def _terminal(self, status: str) -> list[Event]:
        """``node_finished(llm)``, ``message_end``, ``workflow_finished`` (success or stop)."""
        state = self.state
        state.status = status
        events = self._close_llm(status, None)
        self._summarise()
        events.append(MessageEnd(metadata=state.metadata))
        events.append(self._workflow_finished(status, None))
        return events

    def _workflow_finished(self, status: str, error: str | None) -> WorkflowFinished:
        state = self.state
        return WorkflowFinished(
            workflow_run_id=self.turn.workflow_run_id,
            status=status,
            outputs={"answer": state.answer} if status != "failed" else None,
            error=error,
            elapsed_time=time.monotonic() - state.started,
            total_tokens=state.usage.total_tokens,
            total_steps=state.steps,
            created_at=self.turn.created_at,
            finished_at=_now(),
        )

    def _failed(self, message: str, code: str, status: int) -> list[Event]:
        state = self.state
        state.status, state.error, state.error_code, state.error_status = (
            "failed",
            message,
            code,
            status,
        )
        events = self._close_llm("failed", message)
        self._summarise()
        events.append(self._workflow_finished("failed", message))
        events.append(ErrorEvent(code=code, status=status, message=message))
        return events

    def summarise_partial(self) -> None:
        """Compute the cited ids, ``retriever_resources`` and metadata of the answer so far
        when no terminal event did (a run abandoned by its client), so they are stored."""
        if not self.state.metadata:
            self._summarise()

    def stopped_events(self) -> list[Event]:
        """Terminal events of a run stopped by ``/stop`` (after its generator was cancelled)."""
        return self._terminal("stopped")


__all__ = [
    "Branch",
    "ChatDeps",
    "ChatTurn",
    "Chatflow",
    "RunState",
    "citations_of",
    "resources_for",
    "retriever_resource",
    "usage_dict",
    "without_hidden",
]
