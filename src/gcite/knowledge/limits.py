"""Limits on converting one document, and the error that refuses a document.

A file is hostile until converted: its declared sizes (a sheet's dimension, a zip
member's size, a PDF's page count) are never trusted, only what is actually read is
counted, and every count has a cap. :class:`ConvertLimits` holds the caps (settings
``convert_*``, see ``docs/api.md``); :class:`ConversionError` is the one error a
converter raises: a Chinese message naming the reason (and, for a cap, the setting),
an HTTP-like ``status`` (413 a limit was exceeded, 422 the file cannot be parsed, 415
unsupported type) and ``limit`` (the setting's name or ``None``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gcite.config import from_section
from gcite.errors import GciteError

if TYPE_CHECKING:
    from gcite.config import Settings

MIB = 1024 * 1024

MAX_FILE_BYTES = 50 * MIB  # larger files are refused, not truncated


class ConversionError(GciteError):
    """A file could not be read or converted (the message names the reason).

    ``status``: 413 when a limit was exceeded (``limit`` names the setting), 422 when
    the file is corrupt or cannot be parsed, 415 for an unsupported type.
    """

    def __init__(self, message: str, *, status: int = 422, limit: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.limit = limit


def over_limit(what: str, setting: str, cap: object) -> ConversionError:
    """The 413 error for a cap: ``<what>超过上限 <cap>（配置项 <setting>）``."""
    return ConversionError(f"{what}超过上限 {cap}（配置项 {setting}）", status=413, limit=setting)


@dataclass(frozen=True)
class ConvertLimits:
    """Caps on converting one document (all positive).

    * ``max_cells``: table cells of one document (DOCX/XLSX/HTML/CSV/PDF tables), counted
      as read and as laid out (rows x used columns of one table);
    * ``max_unzipped_bytes``: decompressed bytes of one zip member (DOCX/XLSX), counted
      while streaming it;
    * ``max_zip_ratio``: decompressed / compressed bytes of one zip member larger than
      1 MiB decompressed;
    * ``max_pdf_pages``, ``max_pdf_objects``: pages and indirect objects of a PDF;
    * ``timeout_s`` (wall clock) and ``cpu_s`` (CPU seconds) for converting one document;
    * ``memory_mb``: memory the converting process may add to its idle size (MiB).
    """

    max_cells: int = 2_000_000
    max_unzipped_bytes: int = 256 * MIB
    max_zip_ratio: int = 1000
    max_pdf_pages: int = 20_000
    max_pdf_objects: int = 1_000_000
    timeout_s: float = 300.0
    cpu_s: float = 300.0
    memory_mb: int = 512

    @classmethod
    def from_settings(cls, settings: Settings) -> ConvertLimits:
        """The limits configured in ``settings`` (its ``[convert]`` section)."""
        return from_section(cls, settings.convert)


class CellBudget:
    """Counts the table cells of one document against ``ConvertLimits.max_cells``."""

    def __init__(self, limits: ConvertLimits) -> None:
        self.cap = limits.max_cells
        self.used = 0

    def take(self, cells: int) -> None:
        """Count ``cells`` more; raises the 413 :class:`ConversionError` past the cap."""
        self.used += cells
        if self.used > self.cap:
            raise over_limit("表格单元格数", "convert_max_cells", self.cap)

    def check_area(self, rows: int, columns: int) -> None:
        """A table laid out as ``rows`` x ``columns`` must fit the cap too."""
        if rows * columns > self.cap:
            raise over_limit(f"表格大小（{rows} 行 × {columns} 列）", "convert_max_cells", self.cap)


__all__ = ["MAX_FILE_BYTES", "MIB", "CellBudget", "ConversionError", "ConvertLimits", "over_limit"]
