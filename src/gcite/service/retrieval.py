"""Dify's External Knowledge API on the gcite service: ``POST {prefix}/retrieval``.

A Dify user connects an external knowledge base to gcite and gets role-correct
retrieval without leaving Dify (platform design document §2.1.1: the risk the
seeds want solved first). The HTTP contract follows
``../shared/reference/dify-ecosystem.md`` §1 and Dify's
``ExternalDatasetService``:

* Request: ``Authorization: Bearer <key>``; JSON body (``Content-Type:
  application/json``, also accepted without a content type) ``{retrieval_setting:
  {top_k, score_threshold}, query, knowledge_id, metadata_condition?}``.
* Response 200: ``{"records": [{"content": str, "score": float 0–1, "title":
  str, "metadata": object}]}`` (bodies: :mod:`gcite.dify.external_knowledge`).
* Registration probe: Dify's "save" sends the header and no body; a valid key
  gets 200 ``{"records": []}``, a bad one 403 (so registration fails clearly).
* Errors: JSON ``{"error_code": int, "error_msg": str}``:

  =====  ==========  ===========================================================
  HTTP   error_code  when
  =====  ==========  ===========================================================
  403    1001        ``Authorization`` missing or not ``Bearer <key>``
  403    1002        unknown key
  404    2001        ``knowledge_id`` is not a gcite dataset
  400    3001        body is not a JSON object (also: nested deeper than 32, or a
                     lone UTF-16 surrogate in a string); a field is missing or of
                     the wrong type or range (``query``, ``knowledge_id``,
                     ``retrieval_setting``)
  400    3002        ``metadata_condition`` malformed, unknown operator, or a role
                     condition gcite refuses (see :mod:`retrieval_roles`)
  413    3003        body larger than :data:`MAX_BODY_BYTES`
  405    3004        any method but ``POST`` on ``/retrieval``
  503    5001        the knowledge store failed (transient; Dify retries 5xx)
  504    5002        the search took longer than the retrieval timeout
                     (``kb_timeout_s``, at most :data:`RETRIEVAL_TIMEOUT_S`)
  =====  ==========  ===========================================================

  Deterministic failures are all 4xx: a 5xx makes Dify retry up to 3 times.

Roles: see :mod:`gcite.service.retrieval_roles` — the key's roles are a
maximum, ``metadata_condition`` on ``access_roles`` only narrows them. The condition is
parsed by the one grammar, :func:`gcite.knowledge.filters.parse_condition`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from gcite.config import ApiKey, Settings
from gcite.dify.external_knowledge import build_records, error_body, records_body
from gcite.errors import FilterError, GciteError, StoreError
from gcite.knowledge.catalog import dataset_by_ref
from gcite.knowledge.filters import Node, parse_condition
from gcite.knowledge.protocol import KnowledgeStore
from gcite.service.auth import find_key
from gcite.service.heap import freeze_startup_objects
from gcite.service.jsonbody import MAX_JSON_DEPTH, BodyError, load_json
from gcite.service.retrieval_roles import narrow_roles

logger = logging.getLogger("gcite.service.retrieval")

MAX_BODY_BYTES = 1_048_576
"""Largest request body accepted (bytes); larger gives 413 / 3003."""

MAX_QUERY_CHARS = 8_192
"""Longest ``query`` accepted (characters); longer gives 400 / 3001."""

MAX_TOP_K = 100
"""Largest ``retrieval_setting.top_k`` accepted (Dify's UI caps it at 10)."""

RETRIEVAL_TIMEOUT_S = 4.5
"""Upper bound of one search (seconds): inside Dify's 5 s SSRF read timeout."""


ERR_AUTH_FORMAT = 1001
ERR_AUTH_FAILED = 1002
ERR_KNOWLEDGE_NOT_FOUND = 2001
ERR_BAD_REQUEST = 3001
ERR_BAD_CONDITION = 3002
ERR_TOO_LARGE = 3003
ERR_METHOD = 3004
ERR_INTERNAL = 5000
ERR_STORE = 5001
ERR_TIMEOUT = 5002


class RetrievalAPIError(Exception):
    """A request the External Knowledge API answers with an error body.

    ``status``: HTTP status; ``code``: Dify-style ``error_code``; ``message``:
    the ``error_msg`` (Chinese, one line).
    """

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def response(self) -> JSONResponse:
        """The JSON error response ``{"error_code", "error_msg"}``."""
        return JSONResponse(error_body(self.code, self.message), status_code=self.status)


@dataclass(frozen=True)
class RetrievalRequest:
    """A validated ``/retrieval`` body.

    ``top_k`` in 1..:data:`MAX_TOP_K`; ``score_threshold`` in 0–1 (0.0 = off);
    ``metadata_condition`` parsed by :func:`gcite.knowledge.filters.parse_condition`
    (the one condition grammar) or ``None``.
    """

    knowledge_id: str
    query: str
    top_k: int
    score_threshold: float
    metadata_condition: Node | None


def authenticate(
    header: str | None, keys: Sequence[ApiKey], *, allow_any_key: bool = False
) -> ApiKey:
    """Find the API key of an ``Authorization`` header value.

    ``header``: the raw header (``"Bearer <key>"``, scheme case-insensitive).
    ``keys``: ``settings.retrieval_keys``. With ``allow_any_key`` (demo mode)
    an unknown key is accepted as a caller with no roles.

    Raises :class:`RetrievalAPIError` 403/1001 for a missing or malformed
    header, 403/1002 for an unknown key. Keys are compared in constant time.
    Source: dify-ecosystem.md §1.3 (error conventions).
    """
    if header is None or not header.strip():
        raise RetrievalAPIError(
            403, ERR_AUTH_FORMAT, "缺少 Authorization 请求头，应为 Bearer <API key>"
        )
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        raise RetrievalAPIError(
            403, ERR_AUTH_FORMAT, "Authorization 请求头格式无效，应为 Bearer <API key>"
        )
    found = find_key(keys, token)
    if found is not None:
        return found
    if allow_any_key:
        return ApiKey(key=token, roles=())
    raise RetrievalAPIError(403, ERR_AUTH_FAILED, "API key 无效，鉴权失败")


def decode_body(raw: bytes) -> dict[str, Any] | None:
    """Decode a request body; ``None`` means the registration probe (no body).

    An empty or whitespace-only body is the probe. Anything else must be a
    UTF-8 JSON object, whatever the Content-Type says (Dify sends
    ``application/json``; some proxies drop it).

    Raises :class:`RetrievalAPIError` 400/3001 for a body that is not a JSON
    object, 413/3003 above :data:`MAX_BODY_BYTES`.
    """
    if len(raw) > MAX_BODY_BYTES:
        raise RetrievalAPIError(413, ERR_TOO_LARGE, f"请求体过大（上限 {MAX_BODY_BYTES} 字节）")
    if not raw.strip():
        return None
    try:
        data = load_json(raw)
    except BodyError as exc:
        reason = {
            "too_deep": f"请求体 JSON 嵌套过深（上限 {MAX_JSON_DEPTH} 层）",
            "bad_text": "请求体含有无效的 Unicode 文本（孤立的 UTF-16 代理项）",
        }.get(exc.kind, "请求体不是有效的 JSON")
        raise RetrievalAPIError(400, ERR_BAD_REQUEST, reason) from exc
    if not isinstance(data, dict):
        raise RetrievalAPIError(
            400, ERR_BAD_REQUEST, f"请求体必须是 JSON 对象，收到 {type(data).__name__}"
        )
    return data


def parse_request(body: Mapping[str, Any], *, default_top_k: int = 5) -> RetrievalRequest:
    """Validate a decoded ``/retrieval`` body (dify-ecosystem.md §1.2).

    ``retrieval_setting`` may be absent (``top_k`` = ``default_top_k``, no
    threshold); ``top_k`` ``null`` (Dify sends it for a dataset without a Top K)
    means ``default_top_k``; ``score_threshold`` ``null`` means 0.0 (off). ``top_k`` must be
    an integer (``4.0`` accepted) in 1..:data:`MAX_TOP_K`; ``score_threshold``
    a number in 0–1. Unknown top-level keys are ignored.

    Raises :class:`RetrievalAPIError` 400/3001 for a missing or wrong
    ``knowledge_id``, ``query`` (also empty or longer than
    :data:`MAX_QUERY_CHARS`) or ``retrieval_setting``; 400/3002 for a malformed
    ``metadata_condition``.
    """
    knowledge_id = body.get("knowledge_id")
    if not isinstance(knowledge_id, str) or not knowledge_id.strip():
        raise RetrievalAPIError(400, ERR_BAD_REQUEST, "缺少 knowledge_id（非空字符串）")
    query = body.get("query")
    if not isinstance(query, str):
        raise RetrievalAPIError(400, ERR_BAD_REQUEST, "缺少 query（字符串）")
    if not query.strip():
        raise RetrievalAPIError(400, ERR_BAD_REQUEST, "query 不能为空")
    if len(query) > MAX_QUERY_CHARS:
        raise RetrievalAPIError(
            400, ERR_BAD_REQUEST, f"query 过长（{len(query)} 字符，上限 {MAX_QUERY_CHARS}）"
        )
    setting = body.get("retrieval_setting")
    if setting is None:
        setting = {}
    if not isinstance(setting, dict):
        raise RetrievalAPIError(400, ERR_BAD_REQUEST, "retrieval_setting 必须是对象")
    raw_top_k = setting.get("top_k")
    top_k = default_top_k if raw_top_k is None else _parse_top_k(raw_top_k)
    threshold = _parse_threshold(setting.get("score_threshold"))
    raw_condition = body.get("metadata_condition")
    try:
        condition = (
            None
            if raw_condition is None
            else parse_condition(raw_condition, root="metadata_condition")
        )
    except FilterError as exc:
        raise RetrievalAPIError(400, ERR_BAD_CONDITION, str(exc)) from exc
    return RetrievalRequest(
        knowledge_id=knowledge_id.strip(),
        query=query,
        top_k=top_k,
        score_threshold=threshold,
        metadata_condition=condition,
    )


def _parse_top_k(raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise RetrievalAPIError(400, ERR_BAD_REQUEST, "retrieval_setting.top_k 必须是整数")
    if isinstance(raw, float) and (not math.isfinite(raw) or not raw.is_integer()):
        raise RetrievalAPIError(400, ERR_BAD_REQUEST, "retrieval_setting.top_k 必须是整数")
    value = int(raw)
    if not 1 <= value <= MAX_TOP_K:
        raise RetrievalAPIError(
            400, ERR_BAD_REQUEST, f"retrieval_setting.top_k 必须在 1 到 {MAX_TOP_K} 之间"
        )
    return value


def _parse_threshold(raw: Any) -> float:
    if raw is None:
        return 0.0
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise RetrievalAPIError(
            400, ERR_BAD_REQUEST, "retrieval_setting.score_threshold 必须是数字"
        )
    try:
        value = float(raw)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise RetrievalAPIError(
            400, ERR_BAD_REQUEST, "retrieval_setting.score_threshold 必须在 0 到 1 之间"
        )
    return value


SEARCH_THREADS = 8
"""Searches running at once in one process (a bounded pool: more threads only add GIL
contention; concurrent query embeddings are micro-batched, gcite.knowledge.embed)."""


@dataclass(frozen=True)
class RetrievalSetup:
    """What ``POST /retrieval`` works with (the lifespan state ``retrieval``): the settings (their
    ``retrieval_keys`` follow the config file), the shared store (``get_store()``, called
    per request so the app may open it lazily; a :class:`StoreError` becomes 503 / 5001)
    the search timeout in seconds, the limit of searches at once (:data:`SEARCH_THREADS`)
    and whether the store is warmed at start-up (``warm``: :func:`warm_up`). Built by the
    app's lifespan (:func:`retrieval_setup`)."""

    settings: Settings
    get_store: Callable[[], KnowledgeStore]
    timeout_s: float
    limiter: anyio.CapacityLimiter
    warm: bool = False


def retrieval_setup(settings: Settings, get_store: Callable[[], KnowledgeStore]) -> RetrievalSetup:
    """The :class:`RetrievalSetup` of an app: the timeout is ``kb_timeout_s``, capped at
    :data:`RETRIEVAL_TIMEOUT_S` to stay inside Dify's 5 s. When keys are configured (or
    ``allow_any_key``), ``warm`` is set: the app runs :func:`warm_up` in a daemon thread
    once the server listens (:mod:`gcite.service.warmup`): the first search loads the
    embedding model, the tokenizer and the shard (seconds, which would eat Dify's 5 s).
    """
    warm = bool(settings.retrieval_keys or settings.service.allow_any_key)
    timeout_s = RETRIEVAL_TIMEOUT_S
    if 0 < settings.knowledge.timeout_s < RETRIEVAL_TIMEOUT_S:
        timeout_s = settings.knowledge.timeout_s
    limiter = anyio.CapacityLimiter(SEARCH_THREADS)
    return RetrievalSetup(settings, get_store, timeout_s, limiter, warm)


async def retrieval(request: Request) -> JSONResponse:
    """``POST /retrieval`` (module docstring), on the lifespan state ``retrieval``."""
    setup: RetrievalSetup = request.state.retrieval
    settings = setup.settings
    try:
        api_key = authenticate(
            request.headers.get("authorization"),
            settings.retrieval_keys,  # read per request: the config file may change
            allow_any_key=settings.service.allow_any_key,
        )
        body = decode_body(await _read_body(request))
        if body is None:
            return JSONResponse(records_body([]))
        parsed = parse_request(body, default_top_k=settings.knowledge.top_k)
        try:
            decision = narrow_roles(api_key.roles, parsed.metadata_condition)
        except FilterError as exc:
            raise RetrievalAPIError(400, ERR_BAD_CONDITION, str(exc)) from exc
        records = await _search(
            setup,
            parsed,
            decision.roles,
            decision.condition,
            expose_roles=api_key.expose_roles,
        )
    except RetrievalAPIError as exc:
        # Dify turns any non-200 into a silent empty result: log every failure here.
        logger.warning("/retrieval %s error_code=%s: %s", exc.status, exc.code, exc.message)
        return exc.response()
    except ClientDisconnect:
        raise  # the client left mid-body: the ops layer logs one line
    except Exception as exc:  # a bug: still Dify's error shape, never the chat one
        logger.exception("/retrieval internal error", exc_info=exc)
        return RetrievalAPIError(500, ERR_INTERNAL, "内部错误").response()
    logger.info(
        "/retrieval knowledge_id=%s roles=%s narrowed=%s condition=%s top_k=%d "
        "score_threshold=%s records=%d",
        parsed.knowledge_id,
        list(decision.roles),
        decision.narrowed,
        "yes" if decision.condition else "no",
        parsed.top_k,
        parsed.score_threshold,
        len(records),
    )
    return JSONResponse(records_body(records))


async def wrong_method(request: Request) -> JSONResponse:
    """Any method but ``POST`` on ``/retrieval``: 405 / 3004 with ``Allow: POST``."""
    response = RetrievalAPIError(
        405, ERR_METHOD, f"不支持 {request.method}，External Knowledge API 只接受 POST"
    ).response()
    response.headers["Allow"] = "POST"
    return response


def retrieval_router() -> APIRouter:
    """The router serving ``POST /retrieval`` (Dify External Knowledge API) on the app's
    :class:`RetrievalSetup`. The app factory mounts it under ``settings.service.retrieval_prefix``;
    Dify is then registered with the endpoint ``http://host:port{prefix}`` (Dify appends
    ``/retrieval``). Every response is JSON; see the module docstring for the statuses."""
    router = APIRouter()
    router.add_api_route(
        "/retrieval", retrieval, methods=["POST"], summary="Dify External Knowledge API"
    )
    router.add_api_route(
        "/retrieval",
        wrong_method,
        methods=["GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"],
        include_in_schema=False,
    )
    return router


class RetrievalFastPath:
    """ASGI middleware: ``POST {prefix}/retrieval`` goes straight to the endpoint of
    :func:`retrieval_router`, past the framework's routing and request handling
    (route matching over every route of the app, dependency solving: about a quarter of
    the event loop's time per request on the knowledge process, docs/benchmarks.md
    "Knowledge process per request"). Same endpoint, same responses; every other request
    (another method or path, a ``root_path``) takes the normal way. Installed inside
    :class:`~gcite.service.ops.OpsMiddleware`, which logs the request with the route
    (``scope["route"]``, the router's own: template ``/retrieval``) set here as routing
    does.
    """

    def __init__(self, app: ASGIApp, router: APIRouter, prefix: str = "") -> None:
        self.app = app
        route = next(
            r
            for r in router.routes
            if isinstance(r, APIRoute) and r.path == "/retrieval" and "POST" in (r.methods or ())
        )
        self.endpoint = route.endpoint
        self.route = route
        self.path = f"{prefix}/retrieval"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope.get("method") != "POST"
            or scope.get("path") != self.path
            or scope.get("root_path")
        ):
            await self.app(scope, receive, send)
            return
        scope["route"] = self.route
        scope.setdefault("path_params", {})
        response = await self.endpoint(Request(scope, receive, send))
        await response(scope, receive, send)


def warm_up(get_store: Callable[[], KnowledgeStore]) -> bool:
    """Open the store and run one tiny search so the first real request is fast.

    Then freezes the objects alive (:mod:`gcite.service.heap`). Best effort: returns
    ``False`` and logs a warning (visible on the stderr of
    ``gcite serve``) when the store cannot be opened or searched, e.g. before
    ``gcite ingest``; requests then answer 503 / 5001 with the reason.
    """
    try:
        get_store().search("预热", roles=[], top_k=1)
    except Exception as exc:  # any failure here is reported, never raised
        logger.warning("External Knowledge API: 知识库预热失败: %s", exc)
        return False
    freeze_startup_objects()  # the index and models: out of the collector's way
    return True


async def _read_body(request: Request) -> bytes:
    """Read the body, stopping early above :data:`MAX_BODY_BYTES`."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise RetrievalAPIError(413, ERR_TOO_LARGE, f"请求体过大（上限 {MAX_BODY_BYTES} 字节）")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise RetrievalAPIError(413, ERR_TOO_LARGE, f"请求体过大（上限 {MAX_BODY_BYTES} 字节）")
        chunks.append(chunk)
    return b"".join(chunks)


async def _search(
    setup: RetrievalSetup,
    req: RetrievalRequest,
    roles: tuple[str, ...],
    condition: Node | None,
    *,
    expose_roles: bool = False,
) -> list[dict[str, Any]]:
    """Run the (blocking) store search in a worker thread (at most ``setup.limiter``'s at
    once), within ``setup.timeout_s`` seconds."""
    timeout_s = setup.timeout_s

    def work() -> list[dict[str, Any]]:
        store = setup.get_store()
        dataset = dataset_by_ref(store.datasets(), req.knowledge_id)
        if dataset is None:
            raise RetrievalAPIError(
                404, ERR_KNOWLEDGE_NOT_FOUND, f"知识库不存在: {req.knowledge_id}"
            )
        items = store.search(
            req.query,
            dataset=dataset,
            roles=list(roles),
            condition=condition,
            top_k=req.top_k,
            score_threshold=req.score_threshold,
        )
        return build_records(
            items,
            top_k=req.top_k,
            score_threshold=req.score_threshold,
            expose_roles=expose_roles,
        )

    try:
        with anyio.fail_after(timeout_s):
            return await anyio.to_thread.run_sync(
                work, abandon_on_cancel=True, limiter=setup.limiter
            )
    except TimeoutError as exc:
        raise RetrievalAPIError(504, ERR_TIMEOUT, f"检索超时（超过 {timeout_s:g} 秒）") from exc
    except FilterError as exc:
        raise RetrievalAPIError(400, ERR_BAD_CONDITION, str(exc)) from exc
    except StoreError as exc:
        raise RetrievalAPIError(503, ERR_STORE, f"知识库暂时不可用: {exc}") from exc
    except GciteError as exc:
        raise RetrievalAPIError(503, ERR_STORE, f"检索失败: {exc}") from exc


__all__ = [
    "MAX_BODY_BYTES",
    "MAX_QUERY_CHARS",
    "MAX_TOP_K",
    "RETRIEVAL_TIMEOUT_S",
    "RetrievalAPIError",
    "RetrievalFastPath",
    "RetrievalRequest",
    "RetrievalSetup",
    "authenticate",
    "decode_body",
    "parse_request",
    "retrieval_router",
    "retrieval_setup",
    "warm_up",
]
