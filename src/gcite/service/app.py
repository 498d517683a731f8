"""The chat service: a FastAPI app speaking Dify's Service API for chatflow apps.

Endpoints (facts: ``../shared/reference/dify-protocol.md`` §1 and §8, Dify's OpenAPI spec;
the full description with an example stream is ``docs/api.md``):

- ``POST /v1/chat-messages`` — ``query``, ``inputs``, ``response_mode``
  (``streaming`` | ``blocking``, default blocking), ``user``, ``conversation_id``;
- ``POST /v1/chat-messages/{task_id}/stop`` — ``{"user"}``; stops a streaming answer;
- ``GET /v1/messages``, ``GET /v1/conversations`` — Dify's history shapes;
- Plan B (platform design §2.3): ``GET /v1/messages/{message_id}/chunk-metadata`` and
  ``GET /v1/conversations/{conversation_id}/chunk-metadata``;
- the External Knowledge API router and the H5 page, when those modules are present.

Errors are Dify's ``{"code", "message", "status"}`` objects (400 ``invalid_param``,
401 ``unauthorized``, 404 ``not_found``, 413 ``request_too_large``, 500
``internal_server_error``); errors after the stream opened are ``error`` events.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from gcite.config import Settings
from gcite.dify.service_api import (
    DEFAULT_USER,
    message_usage_fields,
    parse_sort_by,
    resource_items,
)
from gcite.generate.backends import LLMBackend, make_backend
from gcite.generate.prompt import load_template
from gcite.service.auth import AuthError, Caller, authenticate
from gcite.service.envelope import Envelope, blocking_response, to_wire
from gcite.service.events import ErrorEvent, Event, MessageEnd, NodeFinished
from gcite.service.jsonbody import BodyError, load_json, read_limited, storable
from gcite.service.pipeline import ChatDeps, Chatflow, ChatTurn, without_hidden
from gcite.service.sse import MEDIA_TYPE, PING_FRAME, data_frame
from gcite.service.store import ConversationStore, MessageRecord, new_id

log = logging.getLogger("gcite.service")

MAX_BODY_BYTES = 1_000_000
MAX_QUERY_CHARS = 10_000
MAX_USER_CHARS = 200
HISTORY_TURNS = 10


class ApiError(Exception):
    """An error answered as Dify's JSON error object with an HTTP status."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def error_response(status: int, code: str, message: str) -> JSONResponse:
    """Dify's error body: ``{"code", "message", "status"}``."""
    return JSONResponse({"code": code, "message": message, "status": status}, status_code=status)


@dataclass
class ChatRequestBody:
    """A validated ``POST /v1/chat-messages`` body."""

    query: str
    inputs: dict[str, Any]
    response_mode: str
    user: str
    conversation_id: str


async def read_body(request: Request) -> bytes:
    """The request body, at most :data:`MAX_BODY_BYTES` (413 by Content-Length or while read)."""
    try:
        return await read_limited(request.headers, request.stream(), MAX_BODY_BYTES)
    except BodyError as exc:
        raise ApiError(413, "request_too_large", exc.message) from exc


def load_body(raw: bytes) -> Any:
    """Decode a JSON body: 400 ``invalid_param`` for invalid JSON, too deep, bad text."""
    if len(raw) > MAX_BODY_BYTES:
        raise ApiError(413, "request_too_large", f"Request body exceeds {MAX_BODY_BYTES} bytes.")
    try:
        return load_json(raw or b"null")
    except BodyError as exc:
        raise ApiError(400, "invalid_param", exc.message) from exc


def parse_chat_body(raw: bytes) -> ChatRequestBody:
    """Validate the request body (Dify ``ChatRequest``). Raises :class:`ApiError` (400/413).

    Besides the field rules: JSON nested deeper than ``MAX_JSON_DEPTH`` and strings with
    lone UTF-16 surrogates are refused (``gcite.service.jsonbody``), so whatever is stored
    can always be read back and sent.
    """
    body = load_body(raw)
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_param", "Request body must be a JSON object.")
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ApiError(400, "invalid_param", "query is required and must be a non-empty string.")
    if len(query) > MAX_QUERY_CHARS:
        raise ApiError(400, "invalid_param", f"query is too long (max {MAX_QUERY_CHARS} chars).")
    inputs = body.get("inputs", {})
    if inputs is None:
        inputs = {}
    if not isinstance(inputs, dict):
        raise ApiError(400, "invalid_param", "inputs must be an object.")
    mode = body.get("response_mode")
    if mode is None or mode == "":
        mode = "blocking"
    if not isinstance(mode, str) or mode not in ("streaming", "blocking"):
        raise ApiError(400, "invalid_param", "response_mode must be 'streaming' or 'blocking'.")
    user = body.get("user")
    if not isinstance(user, str) or not user.strip():
        raise ApiError(400, "invalid_param", "user is required and must be a non-empty string.")
    if len(user) > MAX_USER_CHARS:
        raise ApiError(400, "invalid_param", f"user is too long (max {MAX_USER_CHARS} chars).")
    conversation_id = body.get("conversation_id")
    if conversation_id is None:
        conversation_id = ""
    if not isinstance(conversation_id, str):
        raise ApiError(400, "invalid_param", "conversation_id must be a string.")
    return ChatRequestBody(query, inputs, mode, user, conversation_id)


def _limit(raw: str | None) -> int:
    if raw is None or raw == "":
        return 20
    try:
        value = int(raw)
    except ValueError as exc:
        raise ApiError(400, "invalid_param", "limit must be an integer.") from exc
    if not 1 <= value <= 100:
        raise ApiError(400, "invalid_param", "limit must be between 1 and 100.")
    return value


def _required(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise ApiError(400, "invalid_param", f"{name} is required.")
    return value


def message_json(record: MessageRecord) -> dict[str, Any]:
    """A stored message in Dify's ``GET /v1/messages`` item shape (plus ``failed``).

    Spec ``ConversationMessageItem``: ``feedback`` ``{"rating"}`` or null, spec-typed
    ``retriever_resources`` (:func:`gcite.dify.service_api.resource_items`) and the token,
    latency and price fields of the answer's usage.
    """
    resources = without_hidden(record.retriever_resources)
    return {
        "id": record.id,
        "conversation_id": record.conversation_id,
        "parent_message_id": None,
        "inputs": storable(record.inputs, {}),
        "query": record.query,
        "answer": record.answer,
        "message_files": [],
        "feedback": {"rating": record.feedback} if record.feedback else None,
        "retriever_resources": resource_items(
            resources, message_id=record.id, created_at=record.created_at
        ),
        "agent_thoughts": [],
        "extra_contents": [],
        "created_at": record.created_at,
        "status": "error" if record.failed else "normal",
        "error": record.error,
        **message_usage_fields(record.metadata),
        "failed": record.failed,
        "gcite_status": record.status,
    }


def chunk_metadata_json(record: MessageRecord) -> dict[str, Any]:
    """Plan B: the chunk metadata of one message (platform design §2.3)."""
    return {
        "message_id": record.id,
        "conversation_id": record.conversation_id,
        "chunk_count": len(record.chunk_metadata),
        "chunk_metadata": without_hidden(record.chunk_metadata),
        "cited_ids": record.cited_ids,
        "status": record.status,
    }


class ChatService:
    """The service's state: settings, conversation store, backend, sources, running tasks."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.store = ConversationStore(settings.db_url)
        self.backend: LLMBackend = make_backend(settings)
        self.template = (
            load_template(settings.system_prompt_file) if settings.system_prompt_file else None
        )
        self.web_source = self._make_web_source()
        self.knowledge_available = importlib.util.find_spec("gcite.knowledge") is not None
        self._kb: Any = None
        self._kb_lock = threading.Lock()
        self.tasks: dict[str, tuple[str, Callable[[], None]]] = {}
        self._running: set[asyncio.Task[None]] = set()

    def _make_web_source(self) -> Any:
        try:
            module = importlib.import_module("gcite.web")
        except ModuleNotFoundError:
            return None
        factory: Callable[[Settings], Any] = module.make_web_source
        return factory(self.settings)

    def warm_up(self) -> None:
        """Load what the first request would otherwise load while others stream (imports,
        the extractive backend's dictionary), so it does not stall the event loop later."""
        importlib.import_module("gcite.stream.parser")
        importlib.import_module("gcite.merge")
        if self.knowledge_available:
            importlib.import_module("gcite.knowledge")
        warm = getattr(self.backend, "warm_up", None)
        if warm is not None:
            warm()

    def get_store(self) -> Any:
        """The shared KnowledgeStore, opened on first use (raises StoreError when it cannot)."""
        with self._kb_lock:
            if self._kb is None:
                from gcite.knowledge import open_store

                self._kb = open_store(self.settings)
            return self._kb

    async def aclose(self) -> None:
        """Release sources, the backend and the database."""
        for resource in (self.web_source, self.backend):
            closer = getattr(resource, "aclose", None)
            if closer is not None:
                with contextlib.suppress(Exception):
                    await closer()
        kb = self._kb
        if kb is not None and hasattr(kb, "close"):
            with contextlib.suppress(Exception):
                kb.close()
        self.store.close()

    # ---------------------------------------------------------------- chat
    def deps(self) -> ChatDeps:
        """The chatflow's dependencies."""
        return ChatDeps(
            settings=self.settings,
            backend=self.backend,
            get_store=self.get_store if self.knowledge_available else None,
            web_source=self.web_source,
            template=self.template,
        )

    def prepare(self, body: ChatRequestBody, caller: Caller) -> tuple[Chatflow, Envelope]:
        """Create the message row and the chatflow run (404 for an unknown conversation)."""
        try:
            record = self.store.start_message(
                user=caller.owner(body.user),
                query=body.query,
                inputs=body.inputs,
                conversation_id=body.conversation_id or None,
            )
        except KeyError as exc:
            raise ApiError(404, "not_found", "Conversation Not Exists.") from exc
        history: list[dict[str, Any]] = []
        cited_before: list[dict[str, Any]] = []
        if body.conversation_id:
            for past in self.store.history(record.conversation_id, limit=HISTORY_TURNS):
                if past.id == record.id or past.failed:
                    continue
                by_id = {str(c.get("id")): c for c in past.chunk_metadata}
                cited = [by_id[i] for i in past.cited_ids if i in by_id]
                cited_before.extend(cited)
                # the knowledge-base documents this answer quoted: the pipeline leaves the
                # answer out of the history when the caller can no longer see one of them
                documents = [
                    str(c.get("document_id") or "") for c in cited if c.get("source_type") != "web"
                ]
                history.append(
                    {"query": past.query, "answer": past.answer, "document_ids": documents}
                )
        turn = ChatTurn(
            query=body.query,
            user=body.user,
            conversation_id=record.conversation_id,
            message_id=record.id,
            roles=caller.roles,
            inputs=body.inputs,
            history=history,
            cited_before=cited_before,
            created_at=record.created_at,
        )
        env = Envelope(
            task_id=new_id(),
            message_id=record.id,
            conversation_id=record.conversation_id,
            created_at=record.created_at,
            workflow_run_id=turn.workflow_run_id,
            stream_event=caller.stream_event,
        )
        return Chatflow(turn, self.deps()), env

    def persist(
        self, flow: Chatflow, *, status: str | None = None, error: str | None = None
    ) -> None:
        """Write the run's outcome to the message row (sync; call from a worker thread)."""
        state = flow.state
        final = status or {"succeeded": "normal", "failed": "failed"}.get(state.status, "stopped")
        flow.summarise_partial()  # a run its client abandoned: cite what the partial answer cites
        self.store.finish_message(
            flow.turn.message_id,
            answer=state.answer,
            status=final,
            error=error or state.error,
            retriever_resources=state.retriever_resources,
            cited_ids=state.cited_ids,
            metadata=state.metadata,
        )

    async def _on_event(self, flow: Chatflow, event: Event) -> bool:
        """Persist at the points where the state is final; True once the outcome is stored.

        A database failure is logged and does not break the answer stream (the client still
        gets every event); the outcome then counts as handled so it is not written twice.
        """
        try:
            if isinstance(event, NodeFinished) and event.node_type == "code":
                await asyncio.to_thread(
                    self.store.set_chunks, flow.turn.message_id, flow.state.chunk_metadata
                )
            if isinstance(event, MessageEnd | ErrorEvent):
                await asyncio.to_thread(self.persist, flow)
                return True
        except Exception:
            log.exception("could not store message %s", flow.turn.message_id)
            return isinstance(event, MessageEnd | ErrorEvent)
        return False

    async def stream(self, flow: Chatflow, env: Envelope, user: str) -> AsyncIterator[bytes]:
        """SSE frames of one run, with pings, ``/stop`` and client-disconnect handling.

        The chatflow runs in a producer task that puts its events on a queue; a pinger task
        adds a ping after ``ping_interval_s`` of silence; this generator only serialises
        what comes off the queue. ``/stop`` cancels the producer (which closes the model
        call) and queues the stopped terminal events; a client disconnect cancels it too and
        stores what was produced.
        """
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Event | bytes | None] = asyncio.Queue()
        run = _Run()

        async def produce() -> None:
            async for event in flow.events():
                queue.put_nowait(event)

        def produced(task: asyncio.Task[None]) -> None:
            if task.cancelled():
                if run.stopping:
                    for event in flow.stopped_events():
                        queue.put_nowait(event)
            elif task.exception() is not None:
                log.error("chatflow failed", exc_info=task.exception())
                queue.put_nowait(ErrorEvent("internal_server_error", 500, "Run failed."))
            queue.put_nowait(None)
            if run.abandoned and not run.persisted:
                run.persisted = True
                loop.run_in_executor(None, self._persist_quietly, flow, "client disconnected")

        def request_stop() -> None:
            if flow.state.status == "running" and not producer.done():
                run.stopping = True
                producer.cancel()

        producer = asyncio.create_task(produce())
        self._running.add(producer)  # keep a strong reference until it ends
        producer.add_done_callback(self._running.discard)
        producer.add_done_callback(produced)
        pinger = asyncio.create_task(_ping(queue, run, max(0.01, self.settings.ping_interval_s)))
        self.tasks[env.task_id] = (user, request_stop)
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                if isinstance(item, bytes):
                    yield item
                    continue
                run.persisted = await self._on_event(flow, item) or run.persisted
                run.last_sent = time.monotonic()
                yield data_frame(to_wire(item, env))
        finally:
            pinger.cancel()
            self.tasks.pop(env.task_id, None)
            if not run.persisted:
                run.abandoned = True
                if producer.done():  # the run ended but its outcome was not stored
                    run.persisted = True
                    loop.run_in_executor(None, self._persist_quietly, flow, "client disconnected")
                else:  # the client went away: cancel the model call; `produced` stores
                    producer.cancel()

    def _persist_quietly(self, flow: Chatflow, error: str) -> None:
        """Store a run whose client went away: its own outcome if it ended, else stopped."""
        ended = flow.state.status in ("succeeded", "failed")
        try:
            if ended:
                self.persist(flow)
            else:
                self.persist(flow, status="stopped", error=error)
        except Exception:
            log.exception("could not store message %s", flow.turn.message_id)

    async def blocking(
        self, flow: Chatflow, env: Envelope, receive: Callable[[], Awaitable[Any]] | None = None
    ) -> JSONResponse:
        """Run to the end and answer Dify's blocking shape (an HTTP error if the run failed).

        ``receive``: the request's ASGI ``receive`` (its body already read); when it reports
        ``http.disconnect`` before the run ended, the run is cancelled (which closes the
        model call) and the message is stored as stopped, ``error: "client disconnected"``,
        as for a streaming client that goes away.
        """
        failure: ErrorEvent | None = None

        async def run() -> None:
            nonlocal failure
            events = flow.events()
            try:
                async for event in events:
                    await self._on_event(flow, event)
                    if isinstance(event, ErrorEvent):
                        failure = event
            finally:
                await events.aclose()  # type: ignore[attr-defined]

        runner = asyncio.create_task(run())
        watcher = asyncio.create_task(_wait_for_disconnect(receive))
        try:
            await asyncio.wait({runner, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
        if not runner.done():  # the client went away: cancel the model call, keep what came
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            await asyncio.to_thread(self._persist_quietly, flow, "client disconnected")
            return error_response(499, "client_disconnected", "Client disconnected.")
        runner.result()
        if failure is not None:
            return error_response(failure.status, failure.code, failure.message)
        return JSONResponse(blocking_response(env, flow.state.answer, flow.state.metadata))


@dataclass
class _Run:
    """Bookkeeping of one streamed run (shared by the generator and its callbacks)."""

    stopping: bool = False
    abandoned: bool = False
    persisted: bool = False
    last_sent: float = field(default_factory=time.monotonic)


async def _wait_for_disconnect(receive: Callable[[], Awaitable[Any]] | None) -> None:
    """Return when the ASGI ``receive`` channel reports ``http.disconnect`` (never if None)."""
    if receive is None:
        await asyncio.Event().wait()
        return
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return


async def _ping(queue: asyncio.Queue[Event | bytes | None], run: _Run, interval: float) -> None:
    """Queue Dify's ``event: ping`` frame whenever ``interval`` seconds passed without a frame."""
    while True:
        await asyncio.sleep(max(0.0, run.last_sent + interval - time.monotonic()))
        if time.monotonic() - run.last_sent >= interval:
            run.last_sent = time.monotonic()
            queue.put_nowait(PING_FRAME)


def create_app(settings: Settings) -> FastAPI:
    """The chat service app for ``settings`` (see the module docstring for the endpoints).

    Opens the conversation store (``settings.db_url``), builds the LLM backend
    (``make_backend``) and the web source, includes the External Knowledge API router
    (``gcite.service.retrieval``, under ``settings.retrieval_prefix``) and mounts the H5
    page (``gcite.service.pages``) when those modules exist. The knowledge store is opened
    on first use. Raises ``ConfigError`` / ``StoreError`` for a bad configuration.
    """
    service = ChatService(settings)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(service.warm_up)
        yield
        await service.aclose()

    app = FastAPI(title="gcite", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.service = service

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return error_response(400, "invalid_param", f"{where}: {first.get('msg', 'invalid')}")

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized"}
        return error_response(
            exc.status_code, codes.get(exc.status_code, "bad_request"), str(exc.detail)
        )

    @app.exception_handler(Exception)
    async def _internal(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return error_response(
            500, "internal_server_error", "Internal Server Error, please contact support."
        )

    def caller_of(request: Request) -> Caller:
        try:
            return authenticate(settings, request.headers.get("authorization"))
        except AuthError as exc:
            raise ApiError(401, "unauthorized", exc.message) from exc

    @app.post("/v1/chat-messages", response_model=None)
    async def chat_messages(request: Request) -> Any:
        caller = caller_of(request)
        body = parse_chat_body(await read_body(request))
        flow, env = await asyncio.to_thread(service.prepare, body, caller)
        if body.response_mode == "blocking":
            return await service.blocking(flow, env, request.receive)
        return StreamingResponse(
            service.stream(flow, env, caller.owner(body.user)),
            media_type=MEDIA_TYPE,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @app.post("/v1/chat-messages/{task_id}/stop")
    async def stop(task_id: str, request: Request) -> dict[str, str]:
        caller = caller_of(request)
        body = load_body(await read_body(request) or b"{}")
        user = body.get("user") if isinstance(body, dict) else None
        if not isinstance(user, str) or not user:
            raise ApiError(400, "invalid_param", "user is required.")
        entry = service.tasks.get(task_id)
        # a wrong user silently does nothing (Dify)
        if entry is not None and entry[0] == caller.owner(user):
            entry[1]()
        return {"result": "success"}

    @app.get("/v1/messages")
    async def messages(request: Request) -> dict[str, Any]:
        caller = caller_of(request)
        conversation_id = _required(request, "conversation_id")
        user = caller.owner(request.query_params.get("user") or DEFAULT_USER)
        limit = _limit(request.query_params.get("limit"))
        first_id = request.query_params.get("first_id") or None
        conv = await asyncio.to_thread(service.store.get_conversation, conversation_id, user)
        if conv is None:
            raise ApiError(404, "not_found", "Conversation Not Exists.")
        try:
            rows, has_more = await asyncio.to_thread(
                service.store.list_messages, conversation_id, first_id=first_id, limit=limit
            )
        except KeyError as exc:
            raise ApiError(404, "not_found", "First Message Not Exists.") from exc
        return {"limit": limit, "has_more": has_more, "data": [message_json(r) for r in rows]}

    @app.get("/v1/conversations")
    async def conversations(request: Request) -> dict[str, Any]:
        caller = caller_of(request)
        user = caller.owner(request.query_params.get("user") or DEFAULT_USER)
        limit = _limit(request.query_params.get("limit"))
        last_id = request.query_params.get("last_id") or None
        try:
            sort_field, descending = parse_sort_by(request.query_params.get("sort_by"))
        except ValueError as exc:
            raise ApiError(400, "invalid_param", str(exc)) from exc
        try:
            rows, has_more = await asyncio.to_thread(
                partial(
                    service.store.list_conversations,
                    user,
                    last_id=last_id,
                    limit=limit,
                    sort_by=sort_field,
                    descending=descending,
                )
            )
        except KeyError as exc:
            raise ApiError(404, "not_found", "Last Conversation Not Exists.") from exc
        data = [
            {
                "id": c.id,
                "name": c.name,
                "inputs": storable(c.inputs, {}),
                "status": "normal",
                "introduction": "",
                "created_at": c.created_at,
                "updated_at": c.updated_at,
            }
            for c in rows
        ]
        return {"limit": limit, "has_more": has_more, "data": data}

    @app.get("/v1/messages/{message_id}/chunk-metadata")
    async def message_chunks(message_id: str, request: Request) -> dict[str, Any]:
        caller = caller_of(request)
        user = caller.owner(_required(request, "user"))
        record = await asyncio.to_thread(service.store.get_message, message_id, user)
        if record is None:
            raise ApiError(404, "not_found", "Message Not Exists.")
        return chunk_metadata_json(record)

    @app.get("/v1/conversations/{conversation_id}/chunk-metadata")
    async def conversation_chunks(conversation_id: str, request: Request) -> dict[str, Any]:
        caller = caller_of(request)
        user = caller.owner(_required(request, "user"))
        conv = await asyncio.to_thread(service.store.get_conversation, conversation_id, user)
        if conv is None:
            raise ApiError(404, "not_found", "Conversation Not Exists.")
        rows = await asyncio.to_thread(service.store.conversation_messages, conversation_id)
        return {"conversation_id": conversation_id, "data": [chunk_metadata_json(r) for r in rows]}

    from gcite.service.dify_app import build_dify_app_router  # imports this module

    app.include_router(build_dify_app_router(service.store, caller_of))
    _include_optional(app, settings, service)
    return app


def _include_optional(app: FastAPI, settings: Settings, service: ChatService) -> None:
    """Add the External Knowledge API router and the H5 page when their modules exist."""
    if importlib.util.find_spec("gcite.service.retrieval") is not None:
        from gcite.service.retrieval import build_retrieval_router

        app.include_router(
            build_retrieval_router(settings, service.get_store), prefix=settings.retrieval_prefix
        )
    if importlib.util.find_spec("gcite.service.pages") is not None:
        from gcite.service.pages import mount_pages

        mount_pages(app, settings)


__all__ = ["ApiError", "ChatService", "create_app", "parse_chat_body"]
