"""Options several commands share: ``--data-dir`` and ``--config`` as one :class:`SettingsSource`.

``@settings_options(...)`` adds both options to a Click command and hands the command
one ``source`` argument instead of two, whose :meth:`SettingsSource.load` builds the
settings (flags > ``GCITE_*`` environment > config file, :func:`gcite.config.load_settings`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
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


__all__ = ["SettingsSource", "settings_options"]
