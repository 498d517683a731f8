"""The one way to reach the knowledge base of a configuration: search and management.

:class:`KnowledgeAccess` is what the service (:class:`gcite.service.resources.Resources`),
its Knowledge API and External Knowledge API, ``gcite ask``, ``gcite search``, ``gcite
ingest`` and the management commands open the knowledge base with:

- ``knowledge_url`` set (another gcite, or the knowledge process of ``gcite serve
  --workers N``): :meth:`store` is a :class:`~gcite.knowledge.remote.RemoteStore` on its
  ``/retrieval`` (with ``knowledge_key``) and :meth:`admin` a
  :class:`~gcite.knowledge.remote_admin.RemoteAdmin` on its Knowledge API (with
  ``knowledge_admin_key``, by default ``knowledge_key``); nothing is written locally. A
  key the other service refuses makes management answer 503 with the reason.
- otherwise the data dir's own store (:func:`gcite.knowledge.store.open_store`, Qdrant
  Edge or ``qdrant_url``), opened once on first use and shared by :meth:`store` and
  :meth:`admin` (a :class:`~gcite.knowledge.manage.LocalAdmin`; management creates the
  knowledge base when the data dir has none yet). Opening it reconciles the store with
  its catalog (:func:`gcite.knowledge.store.reconcile`) and ``uploads/`` with the catalog
  (:func:`gcite.knowledge.manage.reconcile_uploads`): what an interrupted write left goes.

``handles`` (:class:`~gcite.knowledge.store.StoreHandles`): the owner's, shared with
whatever else it opens the store or an embedder with (its own when not given).

Opening raises :class:`~gcite.errors.StoreError` (missing, corrupt, or held by another
process); it is retried at the next call. Thread-safe; :meth:`close` releases everything.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from gcite.config import Settings
from gcite.knowledge.admin import KnowledgeAdmin
from gcite.knowledge.jobs import JobLog, MemoryJobLog
from gcite.knowledge.protocol import KnowledgeStore

if TYPE_CHECKING:
    from gcite.knowledge.indexing import Indexer
    from gcite.knowledge.store import HybridStore, StoreHandles


class KnowledgeAccess:
    """The knowledge base of ``settings`` (module docstring)."""

    def __init__(self, settings: Settings, handles: StoreHandles | None = None) -> None:
        self.settings = settings
        self._handles = handles
        self._lock = threading.Lock()
        self._local: HybridStore | None = None
        self._remote: KnowledgeStore | None = None
        self._admin: KnowledgeAdmin | None = None
        self._indexer: Indexer | None = None

    @property
    def remote(self) -> bool:
        """True when the knowledge base is another service's (``knowledge_url``)."""
        return bool(self.settings.knowledge.url.strip())

    def store(self) -> KnowledgeStore:
        """The shared search store, opened on first use (blocking; raises StoreError)."""
        with self._lock:
            if self.remote:
                if self._remote is None:
                    from gcite.knowledge.remote import RemoteStore

                    self._remote = RemoteStore(
                        self.settings.knowledge.url,
                        self.settings.knowledge.key,
                        admin_key=self.settings.knowledge.admin_key,
                    )
                return self._remote
            return self._open_local(create=False)

    def admin(self) -> KnowledgeAdmin:
        """The shared management seam, opened on first use (blocking; raises StoreError)."""
        with self._lock:
            if self._admin is None:
                if self.remote:
                    from gcite.knowledge.remote_admin import RemoteAdmin

                    self._admin = RemoteAdmin(
                        self.settings.knowledge.url,
                        self.settings.knowledge.admin_key or self.settings.knowledge.key,
                    )
                else:
                    from gcite.knowledge.manage import LocalAdmin

                    self._admin = LocalAdmin(self._open_local(create=True))
            return self._admin

    def indexer(self) -> Indexer:
        """The worker that indexes documents accepted by the Knowledge API off the request
        path (:class:`~gcite.knowledge.indexing.Indexer`), started on first use, with the
        knowledge base's job log (:func:`open_job_log`: shared by
        every process of a pgvector store)."""
        with self._lock:
            if self._indexer is None:
                from gcite.knowledge.indexing import Indexer

                self._indexer = Indexer(open_job_log(self.settings))
            return self._indexer

    def _open_local(self, *, create: bool) -> HybridStore:
        if self._local is None:
            from gcite.knowledge.manage import reconcile_uploads
            from gcite.knowledge.store import open_store

            store = open_store(self.settings, create=create, handles=self._handles)
            # what an interrupted write left in uploads/ (a pgvector database may be shared
            # by processes writing now: only what is an hour old there)
            transactional = store.settings.knowledge.store == "pgvector"
            with store.lock:
                reconcile_uploads(
                    self.settings, store.catalog, min_age_s=3600.0 if transactional else 0.0
                )
            self._local = store
        return self._local

    def close(self) -> None:
        """Release the stores and the admin. Idempotent."""
        with self._lock:
            indexer, self._indexer = self._indexer, None
            opened = (self._admin, self._remote, self._local)
            self._admin = self._remote = self._local = None
        if indexer is not None:  # running writes end before the store closes
            indexer.close()
        for item in opened:
            if item is not None:
                item.close()

    def __enter__(self) -> KnowledgeAccess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_job_log(settings: Settings) -> JobLog:
    """The job log of the knowledge base of ``settings``: in the pgvector store's database
    (``knowledge_database_url``, else ``database_url``) for ``store = "pgvector"``, else
    in memory. Opening connects on first use (raises nothing here)."""
    if settings.knowledge.store == "pgvector":
        from gcite.knowledge.store import pgvector_url
        from gcite.knowledge.stores.pgjobs import PgJobLog

        return PgJobLog(pgvector_url(settings))
    return MemoryJobLog()


__all__ = ["KnowledgeAccess", "open_job_log"]
