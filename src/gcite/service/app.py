"""The app factory: a FastAPI app speaking Dify's Service API for chatflow apps.

Routers (facts: ``../shared/reference/dify-protocol.md`` §1 and §8, Dify's OpenAPI spec;
the full description with an example stream is ``docs/api.md``):

- chat (:mod:`gcite.service.chat`): ``POST /v1/chat-messages``, ``POST
  /v1/chat-messages/{task_id}/stop``;
- conversations, messages and Plan B (:mod:`gcite.service.conversations`);
- Dify's app endpoints (parameters, info, meta, site), feedback, rename, delete,
  conversation variables, and the features that are off (:mod:`gcite.service.dify_app`);
- the External Knowledge API (:mod:`gcite.service.retrieval`, under
  ``settings.service.retrieval_prefix``);
- the H5 page (:mod:`gcite.service.pages`);
- knowledge-base management in Dify's Knowledge API shape, admin keys only
  (:mod:`gcite.service.knowledge_api`, on ``resources.knowledge``: the same knowledge
  base the chat searches);
- ``GET /health`` (liveness) and ``GET /ready`` (store answers, model reachable, not
  stopping; 503 otherwise); while not ready, requests that came through a proxy are
  answered 503 ``not_ready`` before anything runs, so the load balancer sends them to
  another machine (:mod:`gcite.service.readiness`);
- around everything, :class:`gcite.service.ops.OpsMiddleware`: request id, body-read
  deadline, one JSON access log line per request; inside it
  :class:`gcite.service.retrieval.RetrievalFastPath` takes ``POST /retrieval`` straight to
  its endpoint.

Errors are Dify's ``{"code", "message", "status"}`` objects (400 ``invalid_param``,
401 ``unauthorized``, 404 ``not_found``, 413 ``request_too_large``, 500
``internal_server_error``, 503 ``store_unavailable``; gcite's own exceptions through the
one status table, :func:`gcite.service.errors.api_error`); errors after the stream opened
are ``error`` events.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException

from gcite.chatflow.scheduler import Scheduler
from gcite.config import Settings
from gcite.errors import GciteError
from gcite.knowledge.store import StoreHandles
from gcite.service.chat import MAX_BODY_BYTES, build_chat_router
from gcite.service.conversations import conversations_router
from gcite.service.deps import caller_of
from gcite.service.dify_app import dify_app_router
from gcite.service.errors import INTERNAL_MESSAGE, ApiError, api_error, error_response
from gcite.service.instances import Instances
from gcite.service.knowledge_api import knowledge_router
from gcite.service.ops import OpsMiddleware
from gcite.service.pages import mount_pages
from gcite.service.readiness import Readiness, ReadinessGate
from gcite.service.resources import Resources
from gcite.service.retrieval import RetrievalFastPath, retrieval_router, retrieval_setup
from gcite.service.retrieval import warm_up as warm_retrieval
from gcite.service.runs import RunRegistry
from gcite.service.warmup import WarmUp

log = logging.getLogger("gcite.service")


@asynccontextmanager
async def _lifespan(
    settings: Settings, handles: StoreHandles | None, answers: bool
) -> AsyncIterator[dict[str, Any]]:
    """What the app owns while it runs, as the lifespan state every request sees
    (``request.state.<name>``): ``resources``, ``knowledge`` (its
    :class:`~gcite.knowledge.access.KnowledgeAccess`), ``runs`` (the stop registry and
    the runs' tasks), ``scheduler`` (first text first, per process) and ``retrieval``
    (``POST /retrieval``'s setup), ``warming`` (the start-up warm-up,
    :class:`~gcite.service.warmup.WarmUp`), ``readiness``
    (:class:`~gcite.service.readiness.Readiness`: ``/ready`` and the gate)."""
    resources = Resources(settings, handles, answers=answers)
    try:
        # Warmed in the background once the server listens (gcite.service.warmup): /ready
        # answers at once; an answer that comes first waits for it.
        retrieval = retrieval_setup(settings, resources.get_store)
        background = (lambda: warm_retrieval(resources.get_store)) if retrieval.warm else None
        warming = WarmUp(resources.warm_up, background)
        # this process in the shared database; what crashed processes left is marked
        conversations = resources.conversations
        instances = Instances(conversations)
        await conversations.call(instances.join)
        heartbeat = asyncio.create_task(instances.heartbeat())
        readiness = Readiness(resources.readiness)
        rechecks = asyncio.create_task(readiness.run())
        scheduler = Scheduler.from_settings(settings)
        try:
            yield {
                "resources": resources,
                "knowledge": resources.knowledge,
                # its runs are ended on exit by gcite.service.server
                "runs": RunRegistry(resources.conversations),
                "scheduler": scheduler,
                "retrieval": retrieval,
                "warming": warming,
                "readiness": readiness,
            }
        finally:
            heartbeat.cancel()
            rechecks.cancel()
            await _leave(instances)
            scheduler.close()
            await warming.close()  # it uses what aclose releases
    finally:
        await resources.aclose()


async def _leave(instances: Instances) -> None:
    """Remove this process from the database (a failure is only logged)."""
    try:
        await instances.store.call(instances.leave)
    except Exception:
        log.warning("could not remove this process from the database", exc_info=True)


def create_app(
    settings: Settings, handles: StoreHandles | None = None, *, answers: bool = True
) -> FastAPI:
    """The chat service app for ``settings`` (see the module docstring for the routes).

    Builds nothing that holds state: its lifespan (:func:`_lifespan`) opens the
    conversation store (``settings.db_url``, migrated to the current schema), builds the
    LLM backend and the web source (:class:`~gcite.service.resources.Resources`; the
    knowledge store opens on first use) and the scheduler at start-up, and closes them at
    shutdown; a bad configuration fails the start-up (``ConfigError`` / ``StoreError``;
    ``gcite serve`` checks first, :func:`gcite.cli.startup.check_service`). ``handles``:
    the open stores it shares with its caller (:class:`~gcite.knowledge.store.StoreHandles`;
    the knowledge process holds the store open through them), else its own. ``answers``
    False: the app of the knowledge process of ``gcite serve --workers N``, which the chat
    workers ask for searches and knowledge-base management only (its internal key holds
    no app role): it builds no web source and its warm-up loads only what those requests
    use (:meth:`Resources.warm_up`).
    """
    app = FastAPI(
        title="gcite",
        version="0.1.0",
        lifespan=lambda _app: _lifespan(settings, handles, answers),
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(GciteError)
    async def _gcite_error(_request: Request, exc: GciteError) -> JSONResponse:
        error = api_error(exc)
        if error.status >= 500:
            log.warning("%s: %s", type(exc).__name__, exc)
        return error.response()

    @app.exception_handler(Exception)
    async def _internal(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return error_response(500, "internal_server_error", INTERNAL_MESSAGE)

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

    @app.get("/health", include_in_schema=False)
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/ready", include_in_schema=False)
    async def ready(request: Request) -> JSONResponse:
        checks = await request.state.readiness.refresh()
        ok = all(checks.values())
        warming: WarmUp = request.state.warming
        return JSONResponse(
            {"status": "ready" if ok else "not_ready", "checks": checks},
            status_code=200 if ok else 503,
            # the start-up warm-up begins once this answer is sent (gcite.service.warmup)
            background=None if warming.begun else BackgroundTask(warming.after_ready),
        )

    app.include_router(build_chat_router(caller_of))
    app.include_router(conversations_router())
    app.include_router(dify_app_router())
    retrieval = retrieval_router()
    app.include_router(retrieval, prefix=settings.service.retrieval_prefix)
    app.include_router(knowledge_router())
    mount_pages(app, settings)
    # innermost first: POST /retrieval straight to its endpoint, inside the ops layer
    app.add_middleware(
        RetrievalFastPath, router=retrieval, prefix=settings.service.retrieval_prefix
    )
    # not-ready answers for proxied requests, before anything runs (logged by the ops layer)
    app.add_middleware(ReadinessGate)
    app.add_middleware(OpsMiddleware, settings=settings)
    return app


__all__ = ["MAX_BODY_BYTES", "create_app"]
