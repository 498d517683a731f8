"""Running the questions of ``gcite eval`` through gcite: in process or against a service.

Both askers produce the same Dify chat SSE byte stream and read it with the one stream
consumer (:class:`gcite.stream.sse.DifyStreamConsumer`), so a run measures exactly what
a client sees:

- :class:`LocalAsker` runs the chatflow (:class:`gcite.chatflow.run.ChatRun`) in this
  process on a local knowledge base, serialised by the service's own writer
  (:mod:`gcite.dify.wire`), with the verifier of :func:`gcite.verify.make_verifier`. The
  caller's roles are given (a trusted operator tool). Earlier turns go into the history as
  given; a turn without an answer is asked first. After each answerable question it also
  ranks the knowledge base for the question without a score threshold (the *probe*), so
  a refusal can be traced to the gold chunk's rank and score.
- :class:`RemoteAsker` posts to ``<url>/v1/chat-messages`` (streaming) with the API key
  (:func:`gcite.stream.sse.consume_chat_stream`); the server decides the roles. Earlier
  turns are asked first in the same conversation (``conversation_id``), so their answers
  are the service's own. No probe: ranks come from the run's ``chunk_metadata``.

Latencies use an injected clock (seconds, monotonic).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol

from gcite.config import Settings
from gcite.errors import GciteError
from gcite.eval.questions import EvalQuestion
from gcite.eval.scoring import Observation, Verdict, judge
from gcite.stream.sse import (
    AnswerFinished,
    AnswerResult,
    SegmentsReceived,
    StreamFailed,
    StreamUpdate,
)

Clock = Callable[[], float]
EVAL_USER = "gcite-eval"
#: How many knowledge-base chunks the probe ranks (no score threshold).
PROBE_TOP_K = 20
#: At most this many characters of one answer are read (and kept in the report).
MAX_ANSWER = 200_000


class Asker(Protocol):
    """Answers one question (with its earlier turns) and reports what came back."""

    async def ask(self, question: EvalQuestion) -> Observation:
        """The observation of ``question``; a failed stream is an observation with
        ``error`` set. Raises :class:`~gcite.errors.GciteError` when nothing can be asked
        at all (no service, no knowledge base)."""
        ...

    async def warm_up(self) -> None:
        """Load what the first question would otherwise load (so its branch timeouts and
        latency are not the cold start's)."""
        ...

    async def aclose(self) -> None:
        """Release what the asker holds."""
        ...


async def read_stream(
    updates: AsyncIterator[StreamUpdate],
    clock: Clock,
    started: float,
    *,
    deadline_s: float | None = None,
    max_answer: int = MAX_ANSWER,
) -> tuple[AnswerResult, float | None]:
    """Drain ``updates``: the final :class:`AnswerResult` and the milliseconds from
    ``started`` to the first answer text (None without text). The stream is closed early
    and ends with an error, the text received so far kept (cut at ``max_answer``), when
    it is still open after ``deadline_s`` seconds (``timeout``: a service that hangs yet
    keeps the connection alive with pings) or its answer passes ``max_answer`` characters
    (``answer_too_long``: a service that never stops)."""
    first: float | None = None
    result: AnswerResult | None = None
    texts: list[str] = []
    size = 0
    try:
        async with asyncio.timeout(deadline_s):
            async for update in updates:
                if isinstance(update, SegmentsReceived):
                    if update.replace:
                        texts.clear()
                        size = 0
                    new = [str(s.get("text")) for s in update.segments if s.get("text")]
                    texts += new
                    size += sum(map(len, new))
                    if first is None and texts:
                        first = (clock() - started) * 1000
                    if size > max_answer:
                        failed = StreamFailed("answer_too_long", f"回答超过 {max_answer} 个字符")
                        return _partial(texts, max_answer, failed), first
                elif isinstance(update, AnswerFinished):
                    result = update.result
    except TimeoutError:
        failed = StreamFailed("timeout", f"服务在 {deadline_s:.0f} 秒内没有答完")
        return _partial(texts, max_answer, failed), first
    finally:  # a stream left early: close it (and its connection) now
        aclose = getattr(updates, "aclose", None)
        if aclose is not None:
            await aclose()
    if result is None:  # the consumer always ends with AnswerFinished
        result = AnswerResult(finished=False)
    return result, first


def _partial(texts: list[str], max_answer: int, failed: StreamFailed) -> AnswerResult:
    text = "".join(texts)[:max_answer]
    return AnswerResult(answer=text, raw_answer=text, error=failed)


def observation(
    result: AnswerResult, latency_ms: float, first_text_ms: float | None
) -> Observation:
    """The :class:`Observation` of one streamed answer."""
    error = None
    if result.error is not None:
        error = f"{result.error.message}（{result.error.code}）"
    elif not result.finished:  # closed cleanly, or never a Dify stream: not an answer
        error = "事件流没有正常结束（未收到 message_end）"
    verification = (result.metadata or {}).get("gcite_verification")
    return Observation(
        answer=result.answer,
        cited=[dict(entry["chunk"] or {}) for entry in result.panel],
        retrieved=[c for c in result.chunk_metadata if isinstance(c, dict)],
        verification=verification if isinstance(verification, dict) else None,
        latency_ms=latency_ms,
        first_text_ms=first_text_ms,
        error=error,
    )


class LocalAsker:
    """The chatflow in this process (see the module docstring).

    ``roles``: the caller's roles for questions without their own ``roles``; ``store``:
    an open :class:`~gcite.chatflow.seams.KnowledgeStore` to use (left open), else the
    store of ``settings`` is opened here (and closed by :meth:`aclose`). Raises
    :class:`~gcite.errors.StoreError` when the knowledge base cannot be opened and
    :class:`~gcite.errors.ConfigError` for bad model or web settings.
    """

    def __init__(
        self,
        settings: Settings,
        roles: Sequence[str] = (),
        *,
        probe: bool = True,
        store: Any = None,
        clock: Clock = time.perf_counter,
    ) -> None:
        from gcite.chatflow.run import Deps
        from gcite.generate.factory import make_backend
        from gcite.knowledge import open_store
        from gcite.knowledge.store import StoreHandles
        from gcite.verify import make_verifier
        from gcite.web import make_web_source

        self.settings = settings
        self.roles = tuple(roles)
        self.probe = probe
        self.clock = clock
        self._owns_store = store is None
        handles = StoreHandles()  # the store, the verifier and the backend share the embedder
        self.store = open_store(settings, handles=handles) if store is None else store
        try:
            self.backend = make_backend(settings, handles.embedders)
            self.web_source = make_web_source(settings, handles=handles)
            self.deps = Deps(
                settings=settings,
                backend=self.backend,
                get_store=lambda: self.store,
                web_source=self.web_source,
                verifier=make_verifier(settings, embedders=handles.embedders),
            )
        except BaseException:
            if self._owns_store:
                self.store.close()
            raise

    async def _frames(
        self, query: str, roles: tuple[str, ...], history: list[dict[str, Any]]
    ) -> AsyncIterator[bytes]:
        from gcite.chatflow import ChatRun, Turn, new_id
        from gcite.chatflow.history import History
        from gcite.dify.wire import DifyStream, Envelope, data_frame

        envelope = Envelope(
            task_id=new_id(),
            message_id=new_id(),
            conversation_id=new_id(),
            created_at=int(time.time()),
            stream_event=self.settings.service.stream_event,
            user=EVAL_USER,
        )
        wire = DifyStream(envelope)
        yield data_frame(wire.start(query))
        run = ChatRun(Turn(query, roles, History(turns=history)), self.deps)
        async for event in run.events():
            frames = wire.frames(event)
            if frames:
                yield frames

    async def _answer(
        self, query: str, roles: tuple[str, ...], history: list[dict[str, Any]]
    ) -> tuple[AnswerResult, float, float | None]:
        from gcite.cli.ask import local_updates

        started = self.clock()
        result, first = await read_stream(
            local_updates(self._frames(query, roles, history)), self.clock, started
        )
        return result, (self.clock() - started) * 1000, first

    def _probe(self, query: str, roles: tuple[str, ...]) -> list[dict[str, Any]]:
        items = self.store.search(
            query,
            dataset=self.settings.knowledge.dataset or None,
            roles=list(roles),
            top_k=PROBE_TOP_K,
            score_threshold=0.0,
        )
        return [
            {
                "source_type": "rag",
                "document_name": item["metadata"].get("document_name", ""),
                "document_title": (item["metadata"].get("doc_metadata") or {}).get(
                    "document_title", ""
                ),
                "content": item.get("content", ""),
                "score": item["metadata"].get("score"),
            }
            for item in items
        ]

    async def warm_up(self) -> None:
        """The backend's and the verifier's models, the store's embedder and the web
        source's index (one throwaway search each); a failure here is left to the first
        question to report."""
        await asyncio.to_thread(self.backend.warm_up)
        warm_verifier = getattr(self.deps.verifier, "warm_up", None)
        if warm_verifier is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(warm_verifier)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self._probe, "预热", self.roles)
        if self.web_source is not None:
            with contextlib.suppress(Exception):
                await self.web_source.search("预热", count=1)

    async def ask(self, question: EvalQuestion) -> Observation:
        from gcite.stream import strip_markers

        roles = question.roles if question.roles is not None else self.roles
        history: list[dict[str, Any]] = []
        for turn in question.turns:
            answer = turn.answer
            if answer is None:
                before, _, _ = await self._answer(turn.query, roles, list(history))
                answer = strip_markers(before.raw_answer or before.answer)
            history.append({"query": turn.query, "answer": answer})
        result, latency, first = await self._answer(question.question, roles, history)
        seen = observation(result, latency, first)
        if self.probe and question.answerable and question.has_gold_sources:
            seen.probe = await asyncio.to_thread(self._probe, question.question, roles)
        return seen

    async def aclose(self) -> None:
        try:
            if self.web_source is not None:
                await self.web_source.aclose()
            await self.backend.aclose()
        finally:
            if self._owns_store:
                self.store.close()


class RemoteAsker:
    """A running gcite / Dify service (see the module docstring). ``url``: the
    ``chat-messages`` endpoint (:func:`gcite.cli.ask.chat_url`); ``timeout_s``: per read;
    ``deadline_s``: per request, the whole stream (a question past it is a ``timeout``
    error verdict)."""

    def __init__(
        self,
        url: str,
        key: str,
        *,
        timeout_s: float = 120.0,
        deadline_s: float = 600.0,
        clock: Clock = time.perf_counter,
    ) -> None:
        import httpx

        self.url = url
        self.key = key
        self.clock = clock
        self.deadline_s = deadline_s
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=10.0))

    async def _answer(
        self, query: str, conversation_id: str
    ) -> tuple[AnswerResult, float, float | None]:
        from gcite.stream.sse import consume_chat_stream

        body: dict[str, Any] = {
            "inputs": {},
            "query": query,
            "response_mode": "streaming",
            "user": EVAL_USER,
        }
        if conversation_id:
            body["conversation_id"] = conversation_id
        headers = {"Accept": "text/event-stream"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        started = self.clock()
        updates = consume_chat_stream(self.client, self.url, body, headers)
        result, first = await read_stream(updates, self.clock, started, deadline_s=self.deadline_s)
        return result, (self.clock() - started) * 1000, first

    async def ask(self, question: EvalQuestion) -> Observation:
        conversation = ""
        for turn in question.turns:
            before, _, _ = await self._answer(turn.query, conversation)
            conversation = before.conversation_id or conversation
        result, latency, first = await self._answer(question.question, conversation)
        return observation(result, latency, first)

    async def warm_up(self) -> None:
        """Nothing: the service warms itself up at start."""

    async def aclose(self) -> None:
        await self.client.aclose()


async def run_questions(
    questions: Sequence[EvalQuestion],
    asker: Asker,
    *,
    on_verdict: Callable[[int, Verdict], None] | None = None,
) -> list[Verdict]:
    """Warm ``asker`` up, ask every question in order (one at a time) and judge it;
    ``on_verdict(i, v)`` after each (progress). Closes ``asker`` at the end.

    A :class:`~gcite.errors.GciteError` on the first question (no service, a wrong key,
    no knowledge base) is raised: the target cannot be used. After that, one question's
    failure (the service restarted, answered HTTP 500) is that question's ``error``
    verdict and the run goes on, so the verdicts already collected are not lost.
    """
    verdicts: list[Verdict] = []
    try:
        await asker.warm_up()
        for index, question in enumerate(questions):
            try:
                seen = await asker.ask(question)
            except GciteError as exc:
                if not verdicts:
                    raise
                seen = Observation(answer="", error=str(exc) or type(exc).__name__)
            verdict = judge(question, seen)
            verdicts.append(verdict)
            if on_verdict is not None:
                on_verdict(index, verdict)
    finally:
        await asker.aclose()
    return verdicts


__all__ = [
    "EVAL_USER",
    "MAX_ANSWER",
    "PROBE_TOP_K",
    "Asker",
    "LocalAsker",
    "RemoteAsker",
    "observation",
    "read_stream",
    "run_questions",
]
