"""Options several commands share, each pair handed to the command as one value.

``@settings_options(...)`` adds ``--data-dir`` and ``--config`` to a Click command and
hands it one ``source`` argument, whose :meth:`SettingsSource.load` builds the settings
(flags > ``GCITE_*`` environment > config file, :func:`gcite.config.load_settings`).
``@service_options(...)`` adds ``--url`` and ``--key`` (or ``$GCITE_API_KEY``) and hands
it ``service``: a :class:`Service`, or ``None`` without ``--url``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from gcite.config import Settings, load_settings


@dataclass(frozen=True)
class SettingsSource:
    """Where a command's settings come from: ``--data-dir``, ``--config`` (``None``: not given)."""

    data_dir: Path | None = None
    config_file: Path | None = None

    def load(self, overrides: dict[str, Any] | None = None) -> Settings:
        """The settings with ``--data-dir`` and ``overrides`` (config key -> flag value,
        ``None`` for a flag not given) over the environment and the config file.
        Raises :class:`~gcite.errors.ConfigError` as :func:`gcite.config.load_settings`."""
        return load_settings(
            {"data_dir": self.data_dir, **(overrides or {})}, config_file=self.config_file
        )


def settings_options(
    *,
    data_dir_help: str = "知识库数据目录",
    config_help: str = "配置文件",
    exists_kinds: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator adding ``--data-dir`` and ``--config`` (with these help texts) to a
    Click command function, which then receives ``source: SettingsSource`` for them.
    ``exists_kinds``: ``--data-dir`` must not name a file nor ``--config`` a directory."""
    data_dir_type = click.Path(file_okay=not exists_kinds, path_type=Path)
    config_type = click.Path(dir_okay=not exists_kinds, path_type=Path)

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def command(*args: Any, data_dir: Path | None, config_file: Path | None, **kw: Any) -> Any:
            return fn(*args, source=SettingsSource(data_dir, config_file), **kw)

        with_config = click.option(
            "--config", "config_file", type=config_type, default=None, help=config_help
        )(command)
        return click.option("--data-dir", type=data_dir_type, default=None, help=data_dir_help)(
            with_config
        )

    return decorate


@dataclass(frozen=True)
class Service:
    """A running gcite or Dify service to ask instead of the local chatflow (``--url``,
    ``--key``); ``inputs`` are the request's Dify ``inputs`` (``gcite ask --input``: the
    chatflow's Start-node variables, e.g. the user's roles)."""

    url: str
    key: str = ""
    inputs: Mapping[str, str] = field(default_factory=dict)


def service_options(
    *, url_help: str = "连接正在运行的 gcite / Dify 服务，例如 http://127.0.0.1:8000"
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator adding ``--url`` and ``--key`` to a Click command function, which then
    receives ``service: Service | None`` for them (``None`` without ``--url``)."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def command(*args: Any, url: str | None, key: str, **kw: Any) -> Any:
            return fn(*args, service=None if url is None else Service(url, key), **kw)

        with_key = click.option(
            "--key",
            envvar="GCITE_API_KEY",
            default="",
            help="配合 --url 的 API Key（或 $GCITE_API_KEY）",
        )(command)
        return click.option("--url", default=None, help=url_help)(with_key)

    return decorate


__all__ = ["Service", "SettingsSource", "service_options", "settings_options"]
