"""Start-up checks of the settings: every limit positive and in range, paths and URLs sane.

A limit of 0 or less used to mean "no limit" silently; now :func:`validate` refuses it
with one Chinese line naming the setting, its value and its range
(:class:`~gcite.errors.ConfigError`, shown by the CLI as ``错误: ...``). "No limit" is
an explicit value, ``"none"``, only for the settings in :data:`NO_LIMIT` (read by
:func:`no_limit_value` while the raw value is still a string). Called by
:func:`gcite.config.load_settings`; documented in ``docs/api.md`` (configuration table).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from gcite.errors import ConfigError


class KeyedSettings(Protocol):
    """What the checks read: a setting's value by config key
    (:meth:`gcite.config.Settings.value`)."""

    def value(self, key: str) -> Any:
        """The value of config key ``key``."""
        ...


NONE = "none"
"""The explicit "no limit" value (file or environment), for :data:`NO_LIMIT` only."""


@dataclass(frozen=True)
class Bound:
    """An inclusive range ``low``..``high`` (``low_open``: ``low`` itself is excluded)."""

    low: float
    high: float
    low_open: bool = False

    def holds(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        return above and value <= self.high

    def text(self) -> str:
        low = "(" if self.low_open else "["
        return f"{low}{_number(self.low)}, {_number(self.high)}]"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


_SECONDS = Bound(0, 86_400, low_open=True)
BOUNDS: dict[str, Bound] = {
    # answers
    "llm_timeout_s": _SECONDS,
    "llm_total_timeout_s": _SECONDS,
    "llm_idle_timeout_s": _SECONDS,
    "max_answer_chars": Bound(1, 10_000_000),
    "max_stream_line_bytes": Bound(1024, 1 << 30),
    # retrieval
    "top_k": Bound(1, 100),
    "score_threshold": Bound(0, 1),
    "rerank_timeout_s": _SECONDS,
    "kb_timeout_s": _SECONDS,
    "condense_timeout_s": _SECONDS,
    "web_timeout_s": _SECONDS,
    "web_count": Bound(1, 50),
    "max_web_results": Bound(1, 50),
    "chunk_size": Bound(1, 100_000),
    "chunk_overlap": Bound(0, 100_000),
    # service
    "port": Bound(0, 65_535),
    "ping_interval_s": Bound(0.1, 3600),
    "body_read_timeout_s": _SECONDS,
    # converting documents
    "convert_max_cells": Bound(1, 100_000_000),
    "convert_max_unzipped_bytes": Bound(1024, 1 << 40),
    "convert_max_zip_ratio": Bound(1, 1_000_000),
    "convert_max_pdf_pages": Bound(1, 10_000_000),
    "convert_max_pdf_objects": Bound(1, 100_000_000),
    "convert_timeout_s": _SECONDS,
    "convert_cpu_s": _SECONDS,
    "convert_memory_mb": Bound(64, 1 << 20),
}
"""The range of every numeric limit, by config key (:data:`gcite.config.KEYS`)."""

NO_LIMIT: dict[str, float] = {"llm_total_timeout_s": 0.0}
"""Settings that accept ``"none"``, and the value standing for it inside
:class:`~gcite.config.Settings` (what the code using them reads as "no limit")."""

_PREFIX = re.compile(r"(?:/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+")


def no_limit_value(name: str, raw: Any) -> tuple[bool, Any]:
    """``(True, internal value)`` when ``raw`` is ``"none"`` for a setting of
    :data:`NO_LIMIT`, else ``(False, raw)``. ``"none"`` for another setting is left to
    the type check (which refuses it)."""
    if name in NO_LIMIT and isinstance(raw, str) and raw.strip().lower() == NONE:
        return True, NO_LIMIT[name]
    return False, raw


def validate(settings: KeyedSettings, *, unlimited: frozenset[str] = frozenset()) -> None:
    """Raise :class:`ConfigError` (one line, the first problem) unless every setting is sane.

    ``unlimited``: the settings given as ``"none"`` (skipped by the range check).
    Checks :data:`BOUNDS`, ``chunk_overlap < chunk_size``, ``retrieval_prefix`` (empty or
    ``/segment[/segment...]``, no ``.``/``..`` segment, no trailing ``/``) and, for a
    SQLite ``database_url``, that its directory exists unless ``create_database_dir``, and
    the service addresses and the citation judge's model (:func:`_check_urls`).
    """
    for name, bound in BOUNDS.items():
        if name in unlimited:
            continue
        value = settings.value(name)
        if not bound.holds(float(value)):
            hint = '；不限制请写 "none"' if name in NO_LIMIT else ""
            raise ConfigError(f"配置项 {name} 的值 {value!r} 超出范围 {bound.text()}{hint}")
    if settings.value("chunk_overlap") >= settings.value("chunk_size"):
        raise ConfigError("配置项 chunk_overlap 必须小于 chunk_size")
    prefix = settings.value("retrieval_prefix")
    if prefix and (
        not _PREFIX.fullmatch(prefix) or any(part in {".", ".."} for part in prefix.split("/"))
    ):
        raise ConfigError(
            f"配置项 retrieval_prefix 的值 {prefix!r} 无效：应为空或以 / 开头的路径，"
            "如 /kb（不能含 . 或 .. 段，不能以 / 结尾）"
        )
    folder = sqlite_folder(settings.value("database_url"))
    if folder is not None and not settings.value("create_database_dir") and not folder.is_dir():
        raise ConfigError(
            f"配置项 database_url 的目录不存在: {folder}"
            "（请先创建该目录，或设置 create_database_dir = true）"
        )
    _check_urls(settings)


URL_KEYS = ("llm_base_url", "embed_base_url", "rerank_url", "verify_judge_base_url")
"""The service addresses checked at start (:func:`url_problem`): what uses them is made
after the service says it is ready (the model's SDK client, the embedding and rerank
clients, the verifier), too late for a setting's error - a bad one would fail every answer
or search while ``/ready`` says ready."""


def url_problem(url: str) -> str | None:
    """Why ``url`` is not an http(s) address with a host (a Chinese phrase to follow the
    value in an error line), else ``None``. The one check of a configured address (the web
    providers' clients use it too, :func:`gcite.web.http.check_base_url`)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:
        return "不是有效的地址"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "无效：应以 http:// 或 https:// 开头"
    return None


def _check_urls(settings: KeyedSettings) -> None:
    """Every address of :data:`URL_KEYS` that is set is an http(s) address with a host, and
    a ``verify_judge_base_url`` comes with its ``verify_judge_model``."""
    for name in URL_KEYS:
        url = str(settings.value(name) or "").strip()
        problem = url_problem(url) if url else None
        if problem is not None:
            raise ConfigError(f"配置项 {name} 的值 {url!r} {problem}")
    judge = str(settings.value("verify_judge_base_url") or "").strip()
    if judge and not str(settings.value("verify_judge_model") or "").strip():
        raise ConfigError("已设置 verify_judge_base_url，但缺少 verify_judge_model（判定模型名称）")


def sqlite_folder(url: str) -> Path | None:
    """The directory of a SQLite file URL (``sqlite:///path``), else ``None``."""
    if not url.startswith("sqlite:///") or url.startswith("sqlite:///:memory:"):
        return None
    path = url.removeprefix("sqlite:///").split("?", 1)[0]
    return Path(path).expanduser().parent if path else None


__all__ = [
    "BOUNDS",
    "NONE",
    "NO_LIMIT",
    "URL_KEYS",
    "Bound",
    "KeyedSettings",
    "no_limit_value",
    "sqlite_folder",
    "url_problem",
    "validate",
]
