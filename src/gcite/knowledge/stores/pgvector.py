"""The PostgreSQL + pgvector adapter: knowledge tables in a database gcite already uses.

Selected by ``store = "pgvector"``: the tables live in the database of
``knowledge_database_url``, or of ``database_url`` when that is empty (the conversation
store's database). Several processes and machines may open one database: there is no
knowledge process (every worker opens the store itself).

Tables (Alembic, :mod:`gcite.knowledge.migrations`, own version table):

* ``gcite_kb_chunks``: one row per chunk: ``embedding vector(dim)`` with an HNSW index
  (cosine), ``tokens bigint[]`` (the BM25 token ids of :mod:`gcite.knowledge.sparse`, the
  same tokeniser as the Qdrant stores) and ``lexemes tsvector`` generated from them with
  a GIN index (the keyword retriever), ``access_roles text[]`` with a GIN index (the role
  filter), ``payload jsonb`` (what results and metadata filters read). The vector, the
  token ids, the lexemes and the payload are stored out of line (migration ``k0005``):
  the rows the keyword retriever reads by the thousand stay small;
* ``gcite_kb_datasets``, ``gcite_kb_documents``, ``gcite_kb_meta``: the catalog (what
  ``catalog.json`` holds for the Qdrant stores), :class:`PgCatalog`.

The keyword retriever is PostgreSQL full text over the pre-tokenised text: the candidates
are the chunks holding at least one query token (one GIN lookup per token), ranked by the
query tokens' IDF weight they hold (the weights of :func:`gcite.knowledge.sparse.query_weights`, the
relevance score's lexical evidence), shorter chunks first among equals. A search runs
both retrievers, and the cosines of the keyword candidates, as one statement
(:meth:`PgIndex.retrieve`: one round trip), then reads the payloads of the hits kept. pgvector's
``sparsevec`` was the other candidate: its dimension is capped at 10^9, below the 32-bit
token ids (so the same tokeniser could not be kept without merging tokens), and it is
searched exactly (a scan) or through an approximate HNSW graph; measurements in
docs/knowledge-base.md ("PostgreSQL + pgvector").

Writes: one transaction per writing thread, on a connection of its own (taken from a
small pool of idle ones at its first write, given back at its commit or rollback), from a
document's first write to the catalog save that records it (:meth:`PgCatalog.save`), so
readers see a document's old version or its new one, never half of it, an interrupted
write leaves the old one, and a long write (one dataset's) neither waits for nor holds up
another thread's (another dataset's): each save commits its own thread's transaction.
Reads: an autocommit connection. Every failure of the driver is a
:class:`~gcite.errors.StoreError` (:func:`pg_errors`).
Source: issue 31 items 1 and 4; pgvector README (HNSW, iterative index scans).
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gcite.errors import StoreError
from gcite.knowledge.catalog import Catalog
from gcite.knowledge.filters import FilterModels
from gcite.knowledge.stores.base import (
    RRF_K,
    Candidate,
    Hit,
    HybridQuery,
    PointData,
    Stage,
    rrf_scale,
)

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
VERSION_TABLE = "gcite_knowledge_alembic_version"
MIGRATION_LOCK = 0x6763_6974_6B62_6D67  # "gcitkbmg": the advisory lock of migrate()
ENSURE_LOCK = 0x6763_6974_6B62_6978  # "gcitkbix": the advisory lock of the dimension step
EF_SEARCH = 100
"""``hnsw.ef_search``: candidates the HNSW graph search keeps (pgvector's default is 40,
the number of candidates a search asks for; docs/knowledge-base.md has the recall
measured against an exact scan)."""
POSTINGS_PER_TOKEN = 1000
"""Chunks read per query token by the keyword retriever (in the table's order). A token
held by more chunks is a common one (it weighs little in the ranking): its other chunks
are left out, so a keyword search reads at most this many rows per token, whatever the
corpus size. Every token of the law corpus (484 chunks) is read whole."""
ROLES_KEY = "m_str.access_roles"
CHANNEL = "gcite_kb_catalog"
"""The PostgreSQL notification channel of catalog saves (datasets, documents, embedder):
every store's reader connection listens, so a dataset created by another worker or by
``gcite ingest`` is known to this one at its next search."""
_COLUMNS = {"dataset_name": "dataset_name", "document_id": "document_id"}
IDLE_WRITERS = 4
"""Write connections kept open between transactions (more writing threads at once open
more; those beyond this many are closed at their commit)."""
FAILED = "知识库写入已失败并回滚，正在写入的文档保持旧版本"
STATEMENTS_KEPT = 64
"""Search statements' texts a :class:`PgIndex` keeps (one per filter and stage layout:
a role set, a metadata condition), then it starts over."""
_migrating = threading.Lock()


def conninfo(url: str) -> str:
    """A libpq URI for psycopg from a gcite database URL (``postgresql://``,
    ``postgres://`` or ``postgresql+psycopg://``); raises :class:`StoreError` for any
    other (a SQLite URL, an empty one)."""
    for scheme in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql://" + url.removeprefix(scheme)
    shown = url.rsplit("@", 1)[-1] or "（空）"
    raise StoreError(
        f'store = "pgvector" 需要 PostgreSQL 数据库: 请设置 knowledge_database_url 或 '
        f"database_url 为 postgresql://... （当前: {shown}）"
    )


def _safe(url: str) -> str:
    return url.rsplit("@", 1)[-1]


@contextlib.contextmanager
def pg_errors(message: str, url: str) -> Iterator[None]:
    """Run a block of driver calls; any exception but StoreError -> ``StoreError``."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:  # psycopg.Error, SQLAlchemy and Alembic errors, OSError
        raise StoreError(f"{message} ({_safe(url)}): {exc}".replace(url, _safe(url))) from exc


SCHEMA_HEAD = "k0005"
"""The newest revision of ``gcite.knowledge.migrations`` (a test holds it to Alembic's
head): a database already there is not migrated, and Alembic is not imported (about a
tenth of a second of CPU on the way to a service's first ``/ready``)."""


def at_head(url: str) -> bool:
    """Whether the knowledge tables of the database at ``url`` are at :data:`SCHEMA_HEAD`
    (one connection, two reads; no lock: a database being migrated meanwhile reads as its
    old revision until the migration commits). Raises what psycopg raises."""
    import psycopg

    with psycopg.connect(conninfo(url), autocommit=True, connect_timeout=10) as conn:
        table = conn.execute("SELECT to_regclass(%s)", (VERSION_TABLE,)).fetchone()
        if table is None or table[0] is None:
            return False
        found = conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchall()
    return [str(row[0]) for row in found] == [SCHEMA_HEAD]


def migrate(url: str) -> None:
    """Bring the knowledge tables of the database at ``url`` to the newest revision.

    Nothing to do when they are there already (:func:`at_head`). Else one transaction
    under a PostgreSQL advisory lock (stores opening together migrate one after the other;
    in a process under a lock too: Alembic's context is process-global). Creates the
    ``vector`` extension when missing (needs a role allowed to). Raises
    :class:`StoreError`.
    """
    with pg_errors("无法初始化知识库数据表", url):
        if at_head(url):
            return
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, text

    sa_url = "postgresql+psycopg://" + conninfo(url).removeprefix("postgresql://")
    with pg_errors("无法初始化知识库数据表", url):
        engine = create_engine(sa_url)
        try:
            with _migrating, engine.begin() as connection:
                connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
                config = Config()
                config.set_main_option("script_location", str(MIGRATIONS_DIR))
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
        finally:
            engine.dispose()


class Float4s:
    """A vector parameter: sent as a binary ``float4[]`` (:class:`_Float4sDumper`, one
    NumPy conversion; a list of Python floats is sent as ``float8[]``, one ``struct.pack``
    per element), cast to ``vector`` in SQL: the same float32 values."""

    __slots__ = ("values",)

    def __init__(self, values: Sequence[float]) -> None:
        self.values = values


def _float4s_dumper() -> type:
    """The psycopg dumper of :class:`Float4s` (PostgreSQL's binary array format)."""
    import struct

    import numpy as np
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    header = struct.Struct(">iiIii")  # dimensions, has nulls, element type, length, lower bound

    class _Float4sDumper(Dumper):
        format = Format.BINARY
        oid = 1021  # float4[]

        def dump(self, obj: Any) -> bytes:
            values = np.asarray(obj.values, dtype=">f4")
            items = np.empty((values.size, 2), dtype=">i4")  # each element: length, value
            items[:, 0] = 4
            items[:, 1] = values.view(">i4")
            return header.pack(1, 0, 700, values.size, 1) + items.tobytes()

    return _Float4sDumper


# --------------------------------------------------------------------------- filters


def _sql() -> Any:
    from psycopg import sql

    return sql


class SqlModels:
    """:class:`~gcite.knowledge.filters.FilterModels` compiling to SQL boolean expressions
    over ``gcite_kb_chunks`` (``psycopg.sql`` objects, values as literals).

    Every leaf is true or false, never NULL (a missing field is "not equal", "empty"), so
    negations match documents without the field as in Qdrant. ``dataset_name`` and
    ``document_id`` are columns; ``m_str.access_roles`` is the indexed ``access_roles``
    array (a document without roles has ``{}``); other keys are paths into ``payload``
    whose value is a scalar or a list (a list matches when an element does).
    """

    def __init__(self) -> None:
        self.sql = _sql()

    def _path(self, key: str) -> Any:
        sql = self.sql
        return sql.SQL("(payload #> {})").format(sql.Literal(key.split(".")))

    def _elements(self, key: str, *, as_text: bool = True) -> Any:
        """A set-returning expression: the value's elements (a scalar as one element)."""
        sql = self.sql
        fn = "jsonb_array_elements_text" if as_text else "jsonb_array_elements"
        path = self._path(key)
        return sql.SQL(
            "{fn}(CASE jsonb_typeof({p}) WHEN 'array' THEN {p} ELSE jsonb_build_array({p}) END)"
        ).format(fn=sql.SQL(fn), p=path)

    def _any_text(self, key: str, predicate: str, value: str) -> Any:
        sql = self.sql
        if key == ROLES_KEY:
            source = sql.SQL("unnest(access_roles)")
        elif key in _COLUMNS:
            source = sql.SQL("(VALUES ({}))").format(sql.Identifier(_COLUMNS[key]))
        else:
            source = self._elements(key)
        return sql.SQL("EXISTS (SELECT 1 FROM {src} AS e(v) WHERE {pred})").format(
            src=source, pred=sql.SQL(predicate).format(sql.Literal(value))
        )

    def match_value(self, key: str, value: str) -> Any:
        sql = self.sql
        if key == ROLES_KEY:
            return sql.SQL("(access_roles @> ARRAY[{}]::text[])").format(sql.Literal(value))
        if key in _COLUMNS:
            return sql.SQL("({} = {})").format(sql.Identifier(_COLUMNS[key]), sql.Literal(value))
        return sql.SQL("coalesce({} ? {}, false)").format(self._path(key), sql.Literal(value))

    def match_any(self, key: str, values: list[str]) -> Any:
        sql = self.sql
        items = sql.Literal([str(v) for v in values])
        if key == ROLES_KEY:
            return sql.SQL("(access_roles && {}::text[])").format(items)
        if key in _COLUMNS:
            return sql.SQL("({} = ANY({}::text[]))").format(sql.Identifier(_COLUMNS[key]), items)
        return sql.SQL("coalesce({} ?| {}::text[], false)").format(self._path(key), items)

    def substring(self, key: str, value: str) -> Any:
        return self._any_text(key, "strpos(e.v, {}) > 0", value)

    def prefix(self, key: str, value: str) -> Any:
        return self._any_text(key, "starts_with(e.v, {})", value)

    def range(
        self,
        key: str,
        *,
        gt: float | None = None,
        gte: float | None = None,
        lt: float | None = None,
        lte: float | None = None,
    ) -> Any:
        sql = self.sql
        tests = [sql.SQL("jsonb_typeof(e.v) = 'number'")]
        for bound, op in ((gt, ">"), (gte, ">="), (lt, "<"), (lte, "<=")):
            if bound is not None:
                tests.append(
                    sql.SQL("(e.v::text)::float8 {} {}::float8").format(
                        sql.SQL(op), sql.Literal(float(bound))
                    )
                )
        return sql.SQL("EXISTS (SELECT 1 FROM {} AS e(v) WHERE {})").format(
            self._elements(key, as_text=False), sql.SQL(" AND ").join(tests)
        )

    def is_empty(self, key: str) -> Any:
        sql = self.sql
        if key == ROLES_KEY:
            return sql.SQL("(cardinality(access_roles) = 0)")
        if key in _COLUMNS or key == "segment_id":  # always stored
            return sql.SQL("false")
        return sql.SQL("coalesce({} IN ('null'::jsonb, '[]'::jsonb), true)").format(self._path(key))

    def filter(
        self,
        must: list[Any] | None = None,
        should: list[Any] | None = None,
        must_not: list[Any] | None = None,
    ) -> Any:
        sql = self.sql
        parts = [sql.SQL("({})").format(m) for m in must or []]
        if should:
            parts.append(sql.SQL("({})").format(sql.SQL(" OR ").join(should)))
        parts.extend(sql.SQL("(NOT {})").format(m) for m in must_not or [])
        if not parts:
            return sql.SQL("true")
        return sql.SQL("({})").format(sql.SQL(" AND ").join(parts))


# --------------------------------------------------------------------------- the index


def _roles(payload: Mapping[str, Any]) -> list[str]:
    """The chunk's ``access_roles`` column: the role strings of its filter payload."""
    value = (payload.get("m_str") or {}).get("access_roles")
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _vector_param(params: dict[str, Any], dense: Sequence[float]) -> str:
    """The name of the statement parameter holding the query vector ``dense`` (added to
    ``params``; a vector already there is sent once)."""
    for name, value in params.items():
        if isinstance(value, Float4s) and list(value.values) == list(dense):
            return name
    name = f"q{len(params)}"
    params[name] = Float4s(dense)
    return name


def _dense_part(position: int, vector: str, where: Any, with_payload: bool) -> Any:
    """The dense stage at ``position`` of a :meth:`PgIndex.retrieve` statement: the
    ``%(n)s`` nearest chunks under ``where`` by the HNSW index (query: the parameter named
    ``vector``), as ``(position, distance, id, NULL, tokens, payload, NULL)`` rows."""
    sql = _sql()
    return sql.SQL(
        "(SELECT {pos}, d, id::text, NULL::float8, tokens, {p}, NULL::float8 FROM "
        "(SELECT id, embedding <=> {q}::float4[]::vector AS d, tokens{pc} FROM gcite_kb_chunks "
        "WHERE {w} ORDER BY d LIMIT %(n)s) AS dn)"
    ).format(
        pos=sql.Literal(position),
        q=sql.Placeholder(vector, format="b"),
        w=where,
        p=sql.SQL("payload") if with_payload else sql.SQL("NULL::jsonb"),
        pc=sql.SQL(", payload") if with_payload else sql.SQL(""),
    )


def _keyword_part(position: int, vector: str | None, where: Any, with_payload: bool) -> Any:
    """The keyword stage at ``position`` of a :meth:`PgIndex.retrieve` statement, as
    ``(position, rank, id, score, tokens, payload, cosine)`` rows: for each query token
    (``%(t<position>)s``, their weights ``%(w<position>)s``) one GIN lookup reading at
    most :data:`POSTINGS_PER_TOKEN` chunks under ``where`` (no row's lexemes read), the
    weights of the tokens a chunk holds summed, the best ``%(n)s`` joined back for their
    token ids and their cosine with the query embedding (the parameter named ``vector``,
    when given).
    Parameters, not literals: the statement's text is the same for every query under the
    same filter, so the driver prepares it once (no planning per search)."""
    sql = _sql()
    cosine_sql = (
        sql.SQL("1 - (c.embedding <=> {}::float4[]::vector)").format(
            sql.Placeholder(vector, format="b")
        )
        if vector
        else sql.SQL("NULL::float8")
    )
    return sql.SQL(
        "(SELECT {pos}, (row_number() OVER (ORDER BY b.s DESC, b.n_tokens, b.id))::float8, "
        "c.id::text, b.s, c.tokens, {p}, {cos} FROM (SELECT m.id, sum(m.w) AS s, m.n_tokens "
        "FROM unnest({t}::text[], {wt}::float8[]) AS k(t, w) CROSS JOIN LATERAL "
        "(SELECT id, n_tokens, k.w AS w FROM gcite_kb_chunks WHERE lexemes @@ k.t::tsquery "
        "AND {w} LIMIT {cap}) AS m GROUP BY m.id, m.n_tokens "
        "ORDER BY s DESC, m.n_tokens, m.id LIMIT %(n)s) AS b "
        "JOIN gcite_kb_chunks AS c ON c.id = b.id)"
    ).format(
        pos=sql.Literal(position),
        p=sql.SQL("c.payload") if with_payload else sql.SQL("NULL::jsonb"),
        cos=cosine_sql,
        t=sql.Placeholder(f"t{position}"),
        wt=sql.Placeholder(f"w{position}"),
        w=where,
        cap=sql.Literal(POSTINGS_PER_TOKEN),
    )


class PgIndex:
    """A :class:`~gcite.knowledge.stores.base.VectorIndex` on the knowledge tables at ``url``.

    Opening migrates the tables (:func:`migrate`). ``create`` is accepted for the seam's
    sake: the tables exist once migrated, empty until the first ingest.
    """

    def __init__(self, url: str, *, create: bool = False) -> None:
        self.url = url
        self.info = conninfo(url)
        self.models: FilterModels = SqlModels()
        self.transactional = True
        self._reader: Any = None
        # the open write transactions, by thread: [connection, False], or [None, True]
        # after a failed write (rolled back, refused until the thread rolls back)
        self._writes: dict[int, list[Any]] = {}
        self._idle: list[Any] = []  # write connections between transactions
        self._writers_lock = threading.Lock()
        self._stale = False
        self.dim = 0
        self._dumper = _float4s_dumper()
        self._statements: dict[tuple[Any, ...], str] = {}  # _statement()'s, by layout
        migrate(url)
        with pg_errors("无法连接知识库数据库", url):
            self.dim = self._column_dim()

    # -- connections -------------------------------------------------------

    def _connect(self, *, autocommit: bool) -> Any:
        import psycopg

        conn = psycopg.connect(self.info, autocommit=autocommit, connect_timeout=10)
        conn.adapters.register_dumper(Float4s, self._dumper)
        if autocommit:
            conn.execute(f"SET hnsw.ef_search = {EF_SEARCH}")
            # filtered searches keep scanning the graph until enough rows pass the filter
            conn.execute("SET hnsw.iterative_scan = relaxed_order")
            # the planner does not cost reading vectors and lexemes per row and picks a scan
            # of every row over the HNSW and GIN indexes on small tables (20 ms against
            # 0.5 ms for the dense query on the law corpus): searches use the indexes
            conn.execute("SET enable_seqscan = off")
            conn.execute(f"LISTEN {CHANNEL}")
        return conn

    def reader(self) -> Any:
        """The autocommit connection of searches (reconnected when it was lost)."""
        if self._reader is None or self._reader.closed or self._reader.broken:
            self._reader = self._connect(autocommit=True)
            self._stale = True  # changes made while it was away were not heard
        return self._reader

    def catalog_changed(self, *, sync: bool = False) -> bool:
        """Whether a catalog save was committed (by any process) since the last call: the
        notifications of :data:`CHANNEL` that arrived on the reader connection (no round
        trip), or a new reader connection. ``sync``: one round trip first, after which
        every save committed before this call has been heard (the server delivers
        pending notifications before it answers)."""
        with pg_errors("知识库查询失败", self.url):
            reader = self.reader()
            if sync:
                reader.execute("SELECT 1")
            heard = bool(list(reader.notifies(timeout=0)))
        stale, self._stale = self._stale, False
        return heard or stale

    @property
    def writing(self) -> bool:
        """Whether a write transaction is open in any thread (writes not yet committed)."""
        with self._writers_lock:
            return any(not failed for _, failed in self._writes.values())

    def writer(self) -> Any:
        """The calling thread's write connection; its transaction runs until :meth:`commit`
        (or :meth:`rollback`) in the same thread. Raises :class:`StoreError` after a failed
        write of this thread until it rolls back."""
        key = threading.get_ident()
        with self._writers_lock:
            open_write = self._writes.get(key)
            if open_write is not None and open_write[1]:
                raise StoreError(FAILED)
            if open_write is not None:
                if not (open_write[0].closed or open_write[0].broken):
                    return open_write[0]
                # the connection went away with part of this transaction: never go on
                # with the rest in a new one
                with contextlib.suppress(Exception):
                    open_write[0].close()
                self._writes[key] = [None, True]
                raise StoreError(FAILED)
            idle = [c for c in self._idle if not (c.closed or c.broken)]
            conn = idle.pop() if idle else None
            self._idle = idle
        if conn is None:
            conn = self._connect(autocommit=False)
        with self._writers_lock:
            self._writes[key] = [conn, False]
        return conn

    def _read(self, query: Any, params: Any = None) -> list[Any]:
        with pg_errors("知识库查询失败", self.url):
            try:
                # binary results: token arrays and floats without text parsing
                rows: list[Any] = self.reader().execute(query, params, binary=True).fetchall()
            except Exception:
                if self._reader is not None and (self._reader.closed or self._reader.broken):
                    rows = self.reader().execute(query, params, binary=True).fetchall()
                else:
                    raise
            return rows

    @contextlib.contextmanager
    def _write(self) -> Iterator[Any]:
        """A block of statements in the calling thread's write transaction; a failure rolls
        it back."""
        try:
            with pg_errors("知识库写入失败", self.url):
                yield self.writer()
        except StoreError:
            conn = self._end()
            if conn is not None:
                self._release(conn, commit=False)
            # the rest of this transaction's writes must not start a new one (it would hold
            # half a document): refused until the thread rolls back explicitly
            with self._writers_lock:
                self._writes[threading.get_ident()] = [None, True]
            raise

    def _end(self) -> Any:
        """Take the calling thread's write connection out of its open transaction."""
        with self._writers_lock:
            open_write = self._writes.pop(threading.get_ident(), None)
        return None if open_write is None else open_write[0]

    def _release(self, conn: Any, *, commit: bool) -> None:
        """End ``conn``'s transaction (rolled back unless ``commit``; a failed commit raises
        :class:`StoreError`) and keep it for the next one, or close it."""
        try:
            if commit:
                with pg_errors("知识库写入失败", self.url):
                    conn.commit()
            else:
                with contextlib.suppress(Exception):
                    conn.rollback()
        except StoreError:
            with contextlib.suppress(Exception):
                conn.close()
            raise
        with self._writers_lock:
            if not (conn.closed or conn.broken) and len(self._idle) < IDLE_WRITERS:
                self._idle.append(conn)
                return
        with contextlib.suppress(Exception):
            conn.close()

    def commit(self) -> None:
        """End the calling thread's write transaction: its writes since its last commit
        become visible. Raises :class:`StoreError` after a failed write (nothing of it is
        committed)."""
        with self._writers_lock:
            open_write = self._writes.get(threading.get_ident())
            if open_write is not None and open_write[1]:
                raise StoreError(FAILED)
        conn = self._end()
        if conn is not None:
            self._release(conn, commit=True)

    def rollback(self) -> None:
        """Discard the calling thread's writes since its last commit (and clear a failed
        write's refusal)."""
        conn = self._end()
        if conn is not None:
            self._release(conn, commit=False)

    # -- VectorIndex -------------------------------------------------------

    def _column_dim(self) -> int:
        conn = self.reader()
        row = conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'gcite_kb_chunks'::regclass "
            "AND attname = 'embedding'"
        ).fetchone()
        return max(int(row[0]), 0) if row else 0

    def ensure(self, dim: int) -> None:
        """Give ``embedding`` its dimension and build the HNSW index (first write only)."""
        if self.dim:
            if self.dim != dim:
                raise StoreError(f"知识库向量维度为 {self.dim}，当前嵌入模型为 {dim} 维")
            return
        with self._write() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (ENSURE_LOCK,))
            current = conn.execute(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = "
                "'gcite_kb_chunks'::regclass AND attname = 'embedding'"
            ).fetchone()
            if not current or int(current[0]) <= 0:
                conn.execute(
                    f"ALTER TABLE gcite_kb_chunks ALTER COLUMN embedding TYPE vector({int(dim)})"
                )
                conn.execute(
                    "CREATE INDEX IF NOT EXISTS ix_gcite_kb_chunks_embedding ON gcite_kb_chunks "
                    "USING hnsw (embedding vector_cosine_ops)"
                )
        self.commit()
        with pg_errors("知识库查询失败", self.url):
            self.dim = self._column_dim()
        if self.dim != dim:
            raise StoreError(f"知识库向量维度为 {self.dim}，当前嵌入模型为 {dim} 维")

    def upsert(self, points: Sequence[PointData]) -> None:
        if not points:
            return
        rows = [
            (
                p.id,
                p.payload.get("document_id", ""),
                p.payload.get("dataset_name", ""),
                _roles(p.payload),
                Float4s(p.dense),
                [int(i) for i in p.sparse.indices],
                json.dumps(p.payload, ensure_ascii=False),
            )
            for p in points
        ]
        with self._write() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO gcite_kb_chunks (id, document_id, dataset_name, access_roles, "
                "embedding, tokens, payload) VALUES (%s, %s, %s, %s, %b::float4[]::vector, "
                "%s, %s::jsonb) ON CONFLICT (id) DO UPDATE SET document_id = "
                "EXCLUDED.document_id, dataset_name = EXCLUDED.dataset_name, access_roles = "
                "EXCLUDED.access_roles, embedding = EXCLUDED.embedding, tokens = "
                "EXCLUDED.tokens, payload = EXCLUDED.payload",
                rows,
            )

    def delete_document(self, document_id: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM gcite_kb_chunks WHERE document_id = %s", (document_id,))

    def delete_matching(self, flt: Any) -> None:
        sql = _sql()
        where = self._where(flt)
        with self._write() as conn:
            conn.execute(sql.SQL("DELETE FROM gcite_kb_chunks WHERE {}").format(where), {})

    def _where(self, flt: Any) -> Any:
        """The filter as SQL (:meth:`_where_text`)."""
        return _sql().SQL(self._where_text(flt))

    def _where_text(self, flt: Any) -> str:
        """The filter as SQL text for a query that also has ``%s`` parameters: its literal
        values are rendered here, so a ``%`` in one (a role name) is escaped, never a
        placeholder."""
        if flt is None:
            return "true"
        with pg_errors("知识库查询失败", self.url):
            text: str = flt.as_string(self.reader()).replace("%", "%%")
            return text

    def nearest(
        self, stage: Stage, flt: Any, limit: int, *, with_payload: bool = True
    ) -> list[Candidate]:
        return self._retrieve([stage], flt, limit, with_payload=with_payload)[0]

    def retrieve(self, stages: Sequence[Stage], flt: Any, limit: int) -> list[list[Candidate]]:
        """Every stage's candidates (:meth:`nearest` without payloads) from one statement
        (one round trip; the keyword candidates with their cosines when the keyword stage
        carries the query embedding)."""
        return self._retrieve(stages, flt, limit, with_payload=False)

    def _retrieve(
        self, stages: Sequence[Stage], flt: Any, limit: int, *, with_payload: bool
    ) -> list[list[Candidate]]:
        """The candidates of ``stages`` from one statement: each stage's part (a dense
        stage's and a keyword stage's, :func:`_dense_part`, :func:`_keyword_part`) tagged
        with its position, its rows in its order. The statement's text depends on the filter
        and the stages' layout alone (the values are parameters): it is kept
        (:meth:`_statement`)."""
        where = self._where_text(flt)
        params: dict[str, Any] = {"n": int(limit)}
        layout: list[tuple[str, int, str | None]] = []
        for position, stage in enumerate(stages):
            if stage.sparse is None:
                self._check_dim()
                layout.append(("dense", position, _vector_param(params, stage.dense or [])))
                continue
            tokens = list(dict.fromkeys(int(t) for t in stage.sparse.indices))
            if not tokens:
                continue
            weights = stage.weights or {}
            params[f"t{position}"] = [str(t) for t in tokens]
            params[f"w{position}"] = [float(weights.get(t, 1.0)) for t in tokens]
            cosine = None
            if stage.dense is not None and self.dim:
                cosine = _vector_param(params, stage.dense)
            layout.append(("keyword", position, cosine))
        found: list[list[Candidate]] = [[] for _ in stages]
        if not layout:
            return found
        statement = self._statement(where, tuple(layout), with_payload)
        for position, key, point_id, score, tokens_, payload, cosine_ in self._read(
            statement, params
        ):
            if score is None:  # a dense stage's row: the score is the cosine
                cosine_ = score = 1.0 - float(key)
            found[position].append(
                Candidate(
                    point_id,
                    float(score),
                    tokens_,
                    dict(payload or {}),
                    None if cosine_ is None else float(cosine_),
                )
            )
        return found

    def _statement(
        self,
        where: str,
        layout: tuple[tuple[str, int, str | None], ...],
        with_payload: bool,
    ) -> str:
        """The text of a :meth:`_retrieve` statement (the last :data:`STATEMENTS_KEPT` kept):
        ``layout``: each part's kind (``dense`` | ``keyword``), position and vector
        parameter."""
        key = (where, layout, with_payload)
        known = self._statements.get(key)
        if known is not None:
            return known
        sql = _sql()
        condition = sql.SQL(where)
        parts = [
            _dense_part(position, vector or "", condition, with_payload)
            if kind == "dense"
            else _keyword_part(position, vector, condition, with_payload)
            for kind, position, vector in layout
        ]
        # dense rows by distance (relaxed_order iterative scans may return a few out of
        # order), keyword rows by rank
        query = sql.SQL(" UNION ALL ").join(parts) + sql.SQL(" ORDER BY 1, 2, 3")
        with pg_errors("知识库查询失败", self.url):
            text: str = query.as_string(self.reader())
        if len(self._statements) >= STATEMENTS_KEPT:
            self._statements.clear()  # atomic: other threads may be searching
        self._statements[key] = text
        return text

    def _check_dim(self) -> None:
        """Raise :class:`StoreError` while the store holds no chunk (no dimension yet)."""
        if not self.dim:  # another process may have made the first write since
            with pg_errors("知识库查询失败", self.url):
                self.dim = self._column_dim()
        if not self.dim:
            raise StoreError("知识库为空: 尚未导入任何文档")

    def query(self, query: HybridQuery) -> list[Hit]:
        """The RRF baseline: each stage's candidates fused by RRF (k=60) in Python."""
        scores: dict[str, float] = {}
        for stage in query.stages:
            for rank, cand in enumerate(
                self.nearest(stage, query.flt, query.prefetch, with_payload=False)
            ):
                scores[cand.id] = scores.get(cand.id, 0.0) + 1.0 / (RRF_K + rank + 1)
        best = sorted(scores.items(), key=lambda kv: -kv[1])
        if query.threshold is not None:
            best = [kv for kv in best if kv[1] >= query.threshold]
        best = best[: query.limit]
        payloads = self.payloads([i for i, _ in best])
        n = len(query.stages)
        return [Hit(rrf_scale(s, n), payloads.get(i, {}), i) for i, s in best]

    def cosines(self, dense: list[float], ids: Sequence[str]) -> dict[str, float]:
        if not ids or not self.dim:
            return {}
        rows = self._read(
            "SELECT id::text, 1 - (embedding <=> %b::float4[]::vector) FROM gcite_kb_chunks "
            "WHERE id = ANY(%s::uuid[])",
            (Float4s(dense), _uuids(ids)),
        )
        return {r[0]: float(r[1]) for r in rows}

    def payloads(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        rows = self._read(
            "SELECT id::text, payload FROM gcite_kb_chunks WHERE id = ANY(%s::uuid[])",
            (_uuids(ids),),
        )
        return {r[0]: dict(r[1]) for r in rows}

    def count(self) -> int:
        return int(self._read("SELECT count(*) FROM gcite_kb_chunks")[0][0])

    def count_matching(self, flt: Any) -> int:
        sql = _sql()
        query = sql.SQL("SELECT count(*) FROM gcite_kb_chunks WHERE {}").format(self._where(flt))
        return int(self._read(query, {})[0][0])

    def flush(self) -> None:
        """Nothing to do: the catalog save (:meth:`PgCatalog.save`) commits."""
        return None

    def optimize(self) -> None:
        """Refresh the planner's statistics of the chunks (PostgreSQL keeps the HNSW and GIN
        indexes up to date with every write; autovacuum would analyze later)."""
        with self._write() as conn:
            conn.execute("ANALYZE gcite_kb_chunks")
        self.commit()

    def close(self) -> None:
        """Close every connection (open write transactions are rolled back)."""
        with self._writers_lock:
            conns = [c for c, _ in self._writes.values() if c is not None] + self._idle
            self._writes, self._idle = {}, []
        for conn in [self._reader, *conns]:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
        self._reader = None

    # -- the catalog -------------------------------------------------------

    def load_catalog(self) -> tuple[str, int, dict[str, dict[str, Any]]]:
        """``(embedder, dim, datasets)`` as stored (the ``catalog.json`` shape)."""
        meta = self._read("SELECT embedder, dim FROM gcite_kb_meta WHERE id = 1")
        embedder, dim = (str(meta[0][0]), int(meta[0][1])) if meta else ("", 0)
        datasets: dict[str, dict[str, Any]] = {}
        for name, dataset_id, fields, info in self._read(
            "SELECT name, dataset_id, array_fields, info FROM gcite_kb_datasets ORDER BY name"
        ):
            datasets[name] = {
                **dict(info or {}),
                "dataset_id": dataset_id,
                "array_fields": list(fields),
                "documents": {},
            }
        for document_id, dataset_name, info in self._read(
            "SELECT document_id, dataset_name, info FROM gcite_kb_documents"
        ):
            if dataset_name in datasets:
                datasets[dataset_name]["documents"][document_id] = dict(info)
        return embedder, dim, datasets

    def load_tags(self) -> dict[str, dict[str, Any]]:
        """The tags as stored (the ``catalog.json`` shape: ``{id: {"name", "created_at"}}``)."""
        rows = self._read("SELECT id, name, created_at FROM gcite_kb_tags")
        return {str(i): {"name": str(n), "created_at": int(c)} for i, n, c in rows}

    def save_catalog(
        self,
        embedder: str,
        dim: int,
        datasets: Mapping[str, Mapping[str, Any]],
        saved: Mapping[str, Mapping[str, Any]],
        tags: tuple[Mapping[str, Mapping[str, Any]], Mapping[str, Mapping[str, Any]]] = ({}, {}),
    ) -> None:
        """Write what changed from ``saved`` to ``datasets`` (and from the saved tags to
        the current ones: ``tags = (current, saved)``) and commit the write transaction
        (with the chunks written since the last commit)."""
        with self._write() as conn:
            _save_tags(conn, *tags)
            conn.execute(
                "UPDATE gcite_kb_meta SET embedder = %s, dim = %s, generation = generation + 1 "
                "WHERE id = 1",
                (embedder, dim),
            )
            conn.execute(f"NOTIFY {CHANNEL}")  # delivered at commit
            for name in saved.keys() - datasets.keys():
                conn.execute("DELETE FROM gcite_kb_datasets WHERE name = %s", (name,))
            for name, entry in datasets.items():
                old = saved.get(name)
                fields = sorted(entry.get("array_fields", []))
                info = _dataset_info(entry)
                if (
                    old is None
                    or old.get("array_fields") != entry.get("array_fields")
                    or _dataset_info(old) != info
                ):
                    conn.execute(
                        "INSERT INTO gcite_kb_datasets (name, dataset_id, array_fields, info) "
                        "VALUES (%s, %s, %s, %s::jsonb) ON CONFLICT (name) DO UPDATE SET "
                        "array_fields = EXCLUDED.array_fields, info = EXCLUDED.info",
                        (
                            name,
                            str(entry["dataset_id"]),
                            fields,
                            json.dumps(info, ensure_ascii=False),
                        ),
                    )
                docs = entry.get("documents", {})
                old_docs = (old or {}).get("documents", {})
                gone = [d for d in old_docs if d not in docs]
                if gone:
                    conn.execute(
                        "DELETE FROM gcite_kb_documents WHERE document_id = ANY(%s)", (gone,)
                    )
                for document_id, info in docs.items():
                    if old_docs.get(document_id) != info:
                        conn.execute(
                            "INSERT INTO gcite_kb_documents (document_id, dataset_name, info) "
                            "VALUES (%s, %s, %s::jsonb) ON CONFLICT (document_id) DO UPDATE "
                            "SET dataset_name = EXCLUDED.dataset_name, info = EXCLUDED.info",
                            (document_id, name, json.dumps(info, ensure_ascii=False)),
                        )
        self.commit()


_ENTRY_COLUMNS = ("dataset_id", "array_fields", "documents")


def _save_tags(
    conn: Any, tags: Mapping[str, Mapping[str, Any]], saved: Mapping[str, Mapping[str, Any]]
) -> None:
    """Write the tags that changed (removed ones first: names stay unique)."""
    gone = [t for t in saved if t not in tags]
    if gone:
        conn.execute("DELETE FROM gcite_kb_tags WHERE id = ANY(%s)", (gone,))
    for tag_id, tag in tags.items():
        if saved.get(tag_id) != tag:
            conn.execute(
                "INSERT INTO gcite_kb_tags (id, name, created_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name",
                (tag_id, str(tag.get("name", "")), int(tag.get("created_at") or 0)),
            )


def _dataset_info(entry: Mapping[str, Any]) -> dict[str, Any]:
    """What a dataset's catalog entry keeps besides its columns (the ``info`` column)."""
    return {k: v for k, v in entry.items() if k not in _ENTRY_COLUMNS}


_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _uuids(ids: Sequence[str]) -> list[str]:
    """The ids that are UUIDs, in their canonical form (any other id names no chunk); an
    id in that form already (every id a search found) is taken as it is."""
    import uuid

    out = []
    for i in ids:
        if isinstance(i, str) and _CANONICAL_UUID.fullmatch(i):
            out.append(i)
            continue
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            out.append(str(uuid.UUID(str(i))))
    return out


class PgCatalog(Catalog):
    """The :class:`~gcite.knowledge.catalog.Catalog` of a pgvector store, in the knowledge
    tables: :meth:`save` writes what changed since the last save and commits the index's
    write transaction, so a document's chunks and its catalog entry change together."""

    def __init__(self, index: PgIndex) -> None:
        embedder, dim, datasets = index.load_catalog()
        super().__init__(
            Path(f"pgvector:{_safe(index.url)}"), embedder, dim, datasets, index.load_tags()
        )
        self.index = index
        self._saved = copy.deepcopy(self.datasets)
        self._saved_tags = copy.deepcopy(self.tags)

    def save(self) -> None:
        """Write the changes and commit (see the class docstring)."""
        self.index.save_catalog(
            self.embedder, self.dim, self.datasets, self._saved, (self.tags, self._saved_tags)
        )
        self._saved = copy.deepcopy(self.datasets)
        self._saved_tags = copy.deepcopy(self.tags)
        self.revision += 1

    def refresh(self, *, sync: bool = False) -> None:
        """Reload the catalog when another store (this process's or another's) saved one
        since the last load, unless a write of this store is in progress. In place: an
        entry held by a running ingestion stays the catalog's entry. ``sync``: also
        what was committed just now, on another machine (read-your-writes through any
        machine; one round trip)."""
        if self.index.writing or not self.index.catalog_changed(sync=sync):
            return
        self.embedder, self.dim, fresh = self.index.load_catalog()
        merged: dict[str, dict[str, Any]] = {}
        for name, entry in fresh.items():
            old = self.datasets.get(name)
            if old is None:
                merged[name] = entry
                continue
            for key in _dataset_info(old).keys() - entry.keys():
                del old[key]
            old.update(_dataset_info(entry))  # description, tag bindings, ...
            old["dataset_id"] = entry["dataset_id"]
            old["array_fields"] = entry["array_fields"]
            old["documents"].clear()
            old["documents"].update(entry["documents"])
            merged[name] = old
        self.datasets = merged  # copy on write: searches read the table without the lock
        self._saved = copy.deepcopy(self.datasets)
        self.tags = self.index.load_tags()
        self._saved_tags = copy.deepcopy(self.tags)
        self.revision += 1


__all__ = [
    "SCHEMA_HEAD",
    "PgCatalog",
    "PgIndex",
    "SqlModels",
    "at_head",
    "conninfo",
    "migrate",
    "pg_errors",
]
