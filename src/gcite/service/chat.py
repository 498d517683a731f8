"""``POST /v1/chat-messages`` and ``POST /v1/chat-messages/{task_id}/stop`` (Dify Service API).

Request body (Dify ``ChatRequest``, dify-protocol.md §1.1): ``query``, ``inputs``,
``response_mode`` (``streaming`` | ``blocking``, default blocking), ``user``,
``conversation_id``. The caller's roles come from the app key only (:mod:`auth`). The
chatflow run (:mod:`gcite.chatflow`) is owned by a :class:`~gcite.service.runs.RunHandle`
and serialised by :mod:`gcite.dify.wire`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse

from gcite.chatflow import ChatRun, PastTurn, Turn, earlier_turns, new_id
from gcite.chatflow.scheduler import Scheduler
from gcite.dify.wire import MEDIA_TYPE, DifyStream, Envelope, blocking_body, error_of
from gcite.service.auth import Caller
from gcite.service.errors import ApiError, error_response
from gcite.service.jsonbody import BodyError, load_json, read_limited
from gcite.service.resources import Resources
from gcite.service.runs import RunHandle, RunRegistry, Tasks, wait_for_disconnect
from gcite.service.warmup import WarmUp

MAX_BODY_BYTES = 1_000_000
MAX_QUERY_CHARS = 10_000
MAX_USER_CHARS = 200
HISTORY_TURNS = 10


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


def prepare(
    resources: Resources,
    body: ChatRequestBody,
    caller: Caller,
    scheduler: Scheduler,
    *,
    arrival: int | None = None,
    tasks: Tasks | None = None,
) -> tuple[RunHandle, Envelope]:
    """Create the message row and the run with its history (404: unknown conversation).
    Synchronous (database); call it from a worker thread. ``scheduler``: the process's
    (:mod:`gcite.chatflow.scheduler`); ``arrival``: the request's number in it;
    ``tasks``: where the run's tasks are kept (the process's, :class:`RunHandle`)."""
    conversations = resources.conversations
    try:  # the message row and the history of a follow-up: one transaction
        record, earlier = conversations.start_turn(
            user=caller.owner(body.user),
            query=body.query,
            inputs=body.inputs,
            conversation_id=body.conversation_id or None,
            history=HISTORY_TURNS,
        )
    except KeyError as exc:
        raise ApiError(404, "not_found", "Conversation Not Exists.") from exc
    past = [PastTurn(m.query, m.answer, m.failed, m.chunk_metadata, m.cited_ids) for m in earlier]
    turn = Turn(query=body.query, roles=caller.roles, history=earlier_turns(past))
    env = Envelope(
        task_id=new_id(),
        message_id=record.id,
        conversation_id=record.conversation_id,
        created_at=record.created_at,
        stream_event=caller.stream_event,
        citation_style=caller.citation_style,
        user=body.user,
        inputs=body.inputs,
    )
    handle = RunHandle(
        ChatRun(turn, replace(resources.deps(), scheduler=scheduler), arrival=arrival),
        DifyStream(env),
        conversations=conversations,
        message_id=record.id,
        ping_interval=resources.settings.service.ping_interval_s,
        tasks=tasks,
    )
    return handle, env


def build_chat_router(caller_of: Any) -> APIRouter:
    """The chat endpoints; ``caller_of(request) -> Caller`` authenticates (401). They work
    on the app's lifespan state: ``resources``, ``runs`` (the stop registry, whose
    :attr:`~gcite.service.runs.RunRegistry.tasks` keep the runs' tasks) and the process's
    :class:`~gcite.chatflow.scheduler.Scheduler` ``scheduler`` (``request.state.<name>``)."""
    router = APIRouter()

    @router.post("/v1/chat-messages", response_model=None)
    async def chat_messages(request: Request) -> Any:
        caller: Caller = caller_of(request)
        body = parse_chat_body(await read_body(request))
        resources: Resources = request.state.resources
        runs: RunRegistry = request.state.runs
        # an answer needs what the start-up warm-up loads: one that comes before the
        # warm-up ends waits for it (GET /ready does not)
        warming: WarmUp | None = getattr(request.state, "warming", None)
        if warming is not None and not warming.done:
            await warming.wait()
        scheduler: Scheduler = request.state.scheduler
        number = scheduler.arrival()  # first text first, in arrival order
        async with scheduler.step(number):
            handle, env = await resources.conversations.call(
                prepare, resources, body, caller, scheduler, arrival=number, tasks=runs.tasks
            )
        if body.response_mode == "blocking":
            with runs.live(handle):
                outcome = await handle.result(lambda: wait_for_disconnect(request.receive))
            if outcome.abandoned:
                return error_response(499, "client_disconnected", "Client disconnected.")
            if outcome.crashed:
                raise RuntimeError("chatflow failed")
            if outcome.failure is not None:
                code, status, message = error_of(outcome.failure)
                return error_response(status, code, message)
            return JSONResponse(blocking_body(env, outcome.summary))

        async def frames() -> Any:
            runs.add(env.task_id, caller.owner(body.user), handle)
            try:
                with runs.live(handle):
                    async for frame in handle.frames(body.query):
                        yield frame
            finally:
                runs.remove(env.task_id)

        return StreamingResponse(
            frames(),
            media_type=MEDIA_TYPE,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @router.post("/v1/chat-messages/{task_id}/stop")
    async def stop(task_id: str, request: Request) -> dict[str, str]:
        caller: Caller = caller_of(request)
        body = load_body(await read_body(request) or b"{}")
        user = body.get("user") if isinstance(body, dict) else None
        if not isinstance(user, str) or not user:
            raise ApiError(400, "invalid_param", "user is required.")
        runs: RunRegistry = request.state.runs
        await runs.stop_anywhere(task_id, caller.owner(user))  # wrong user: nothing (Dify)
        return {"result": "success"}

    return router


__all__ = [
    "MAX_BODY_BYTES",
    "ChatRequestBody",
    "build_chat_router",
    "load_body",
    "parse_chat_body",
    "prepare",
    "read_body",
]
