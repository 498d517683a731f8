"""What the service builds once and shares between requests, with its lifecycle.

The app's lifespan builds one :class:`Resources` at start-up and closes it at shutdown
(:func:`gcite.service.app.create_app`); nothing of it is module state.

:class:`Resources`: the settings, the conversation store, the LLM backend
(:func:`gcite.generate.factory.make_backend`), the web source
(:func:`gcite.web.make_web_source`), the system prompt template and the knowledge base
(:class:`gcite.knowledge.access.KnowledgeAccess`: search store and management, opened on
first use, shared; another service's when ``knowledge_url`` is set), and the
:class:`~gcite.knowledge.store.StoreHandles` they and the verifier share (one handle per
knowledge base, one instance per embedder).
:meth:`Resources.warm_up` loads what the first request would (blocking; run it in a
worker thread at start-up); :meth:`Resources.aclose` releases everything through each
seam's lifecycle method.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from gcite.chatflow import Deps, KnowledgeStore, LLMBackend, WebSource
from gcite.config import Settings
from gcite.generate.factory import make_backend
from gcite.generate.prompt import load_template
from gcite.knowledge.access import KnowledgeAccess
from gcite.knowledge.store import StoreHandles
from gcite.service.heap import freeze_startup_objects
from gcite.service.store import ConversationStore
from gcite.web import make_web_source

log = logging.getLogger("gcite.service")

Verifier = Callable[[str, list[dict[str, Any]], str, str], dict[str, Any]]
"""The run-end citation verifier (:func:`gcite.verify.make_verifier`)."""


def open_conversations(settings: Settings) -> ConversationStore:
    """The conversation store of ``settings``, migrated to the newest schema. The data
    dir's own database may create its folder; a ``database_url`` only with
    ``create_database_dir``. Raises ``StoreError``."""
    create = not settings.service.database_url or settings.service.create_database_dir
    return ConversationStore(settings.db_url, create_dir=create)


class Resources:
    """The service's shared state (see the module docstring). Raises ``ConfigError`` /
    ``StoreError`` at construction for a bad configuration or an unusable database."""

    def __init__(
        self, settings: Settings, handles: StoreHandles | None = None, *, answers: bool = True
    ) -> None:
        self.settings = settings
        # False: the knowledge process of `gcite serve --workers N` (the chat workers
        # answer): no web source is built, and the warm-up loads nothing of the answers
        self.answers = answers
        # the open stores and embedders: the store, the verifier, the offline backend and
        # the offline web index share one bundled model
        self.handles = handles if handles is not None else StoreHandles()
        self.conversations = open_conversations(settings)
        self.backend: LLMBackend = make_backend(settings, self.handles.embedders)
        self.web_source: WebSource | None = (
            make_web_source(settings, handles=self.handles) if answers else None
        )
        self._verifier: Verifier | None = None
        self._verifier_lock = threading.Lock()
        self.template = (
            load_template(settings.llm.system_prompt_file)
            if settings.llm.system_prompt_file
            else None
        )
        self.knowledge = KnowledgeAccess(settings, self.handles)
        self._probe: Any = None

    async def readiness(self, *, background: bool = False) -> dict[str, bool]:
        """``GET /ready``'s checks: the knowledge store answers (it opens and lists its
        datasets: for a remote store, the knowledge process or ``knowledge_url`` service
        is reached), and the model is reachable (always, for the offline extractive
        backend or with ``on_model_error = "extractive"``). ``background`` (the periodic
        re-check of :class:`gcite.service.readiness.Readiness`): the store only, and only a
        pgvector store of this process (its own connection to the database; an embedded store
        is held by the process that opens it, a remote one would be asked over HTTP), and
        no model request."""
        from gcite.generate.probe import ModelProbe

        checks: dict[str, bool] = {}
        own_database = not self.knowledge.remote and self.settings.knowledge.store == "pgvector"
        if background and not own_database:
            return checks
        try:
            await asyncio.to_thread(lambda: self.get_store().datasets())
            checks["store"] = True
        except Exception:
            checks["store"] = False
        if background:
            return checks
        if self._probe is None:
            self._probe = ModelProbe(self.settings)
        model = await self._probe.check()
        checks["model"] = model.ok or self.settings.llm.on_model_error == "extractive"
        return checks

    def visible_documents(self, document_ids: list[str], roles: tuple[str, ...]) -> set[str]:
        """The ids among ``document_ids`` visible to ``roles`` now (blocking); empty (fail
        closed) when the knowledge store cannot be asked."""
        if not document_ids:
            return set()
        try:
            return set(self.get_store().visible_document_ids(document_ids, roles=list(roles)))
        except Exception:
            log.warning("visibility check failed: stored answers are redacted", exc_info=True)
            return set()

    @property
    def verifier(self) -> Verifier:
        """The citation verifier (:func:`gcite.verify.make_verifier`), made on first use,
        once (the warm-up makes it; its module and tables are not needed for ``/ready``)."""
        with self._verifier_lock:
            if self._verifier is None:
                from gcite.verify import make_verifier

                self._verifier = make_verifier(self.settings, embedders=self.handles.embedders)
            return self._verifier

    def get_store(self) -> KnowledgeStore:
        """The shared KnowledgeStore, opened on first use (raises StoreError when it cannot)."""
        return self.knowledge.store()

    def deps(self) -> Deps:
        """The chatflow's dependencies."""
        return Deps(
            settings=self.settings,
            backend=self.backend,
            get_store=self.get_store,
            web_source=self.web_source,
            template=self.template,
            verifier=self.verifier,
        )

    def warm_up(self) -> None:
        """Load what the first request would otherwise load while others stream (imports,
        the backend's model or dictionary, the verifier), so it does not stall the event
        loop later; then freeze the objects alive (:mod:`gcite.service.heap`). Without
        ``answers`` (the knowledge process) only what the store's requests use: the answer
        path (the backend, the verifier, the stream parser) is left unloaded."""
        importlib.import_module("gcite.knowledge.store")
        if self.answers:
            self._warm_answers()
        freeze_startup_objects()

    def _warm_answers(self) -> None:
        importlib.import_module("gcite.stream.parser")
        importlib.import_module("gcite.merge")
        self.backend.warm_up()
        warm_verifier = getattr(self.verifier, "warm_up", None)
        if warm_verifier is not None:
            try:
                warm_verifier()
            except Exception:  # the first answer will load it, or report its failure
                log.warning("warming up the citation verifier failed", exc_info=True)

    async def aclose(self) -> None:
        """Release the web source, the backend, the knowledge store and the database."""
        if self.web_source is not None:
            with contextlib.suppress(Exception):
                await self.web_source.aclose()
        with contextlib.suppress(Exception):
            await self.backend.aclose()
        with contextlib.suppress(Exception):
            self.knowledge.close()
        self.conversations.close()


__all__ = ["Resources", "open_conversations"]
