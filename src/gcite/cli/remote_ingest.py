"""``gcite ingest PATH... --url URL --key KEY``: import into a running service.

The running ``gcite serve`` holds the knowledge store, so a second process cannot write
it; this uploads each file to the service's knowledge-base management API (Dify's
Knowledge API shape, :mod:`gcite.service.knowledge_api`) with an admin key, through
:class:`gcite.knowledge.remote_admin.RemoteAdmin`. Under ``gcite serve --workers N`` the
worker that takes the call forwards it to the knowledge process. The dataset
is created when missing; a file whose name is already in the dataset replaces that
document. Manifest metadata (e.g. ``access_roles``) goes with each file as
``doc_metadata``, so a restricted document is never public in between.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gcite.errors import ConfigError, StoreError
from gcite.knowledge.admin import KnowledgeAdmin, ManageError
from gcite.knowledge.convert import SUPPORTED_SUFFIXES, Manifest
from gcite.knowledge.remote_admin import (
    UPLOAD_TIMEOUT_S,
    EndpointMissing,
    KeyRefused,
    RemoteAdmin,
)


@dataclass
class RemoteReport:
    """Counts of one upload run and the files that failed as ``(path, reason)``."""

    dataset: str
    added: int = 0
    updated: int = 0
    chunks: int = 0
    failed: list[tuple[Path, str]] = field(default_factory=list)


def _files(paths: Sequence[Path]) -> list[tuple[Path, Path]]:
    """``(file, root)`` of every supported, non-hidden file under ``paths``."""
    out: list[tuple[Path, Path]] = []
    for raw in paths:
        path = Path(raw).expanduser().resolve()
        if path.is_file():
            out.append((path, path.parent))
        elif path.is_dir():
            for file in sorted(path.rglob("*")):
                rel = file.relative_to(path)
                if any(part.startswith(".") for part in rel.parts):
                    continue
                if file.suffix.lower() in SUPPORTED_SUFFIXES and file.is_file():
                    out.append((file, path))
    return out


def ingest_remote(
    paths: Sequence[Path],
    *,
    url: str,
    key: str,
    dataset: str,
    manifest: Manifest | None = None,
) -> RemoteReport:
    """Upload the files under ``paths`` into ``dataset`` of the service at ``url`` with
    admin key ``key`` (:func:`upload` through a
    :class:`~gcite.knowledge.remote_admin.RemoteAdmin`)."""
    with RemoteAdmin(url, key, timeout_s=UPLOAD_TIMEOUT_S) as admin:
        return upload(admin, paths, dataset=dataset, manifest=manifest, where=admin.base)


def upload(
    admin: KnowledgeAdmin,
    paths: Sequence[Path],
    *,
    dataset: str,
    manifest: Manifest | None = None,
    where: str,
) -> RemoteReport:
    """Upload the files under ``paths`` into ``dataset`` (created when missing) through
    ``admin``; ``where`` names the service in messages.

    Raises :class:`ConfigError` when the service cannot be reached or refuses the key
    (one line); per-file refusals (e.g. a malformed ``access_roles``) are listed in
    ``RemoteReport.failed`` and the rest is uploaded.
    """
    report = RemoteReport(dataset=dataset)
    created = False
    try:
        known = admin.list_datasets()
        if dataset not in {d.name for d in known} | {d.id for d in known}:
            admin.create_dataset(dataset)
            created = True
        existing = {d.name for d in admin.list_documents(dataset)}
        _upload_files(admin, paths, dataset, manifest, existing, report)
    except KeyRefused as exc:
        refused = f"服务 {where} 拒绝了这个密钥（需要 admin_keys 中的管理密钥）"
        raise ConfigError(refused) from exc
    except EndpointMissing as exc:
        raise ConfigError(
            f"服务 {where} 的知识库接口缺少 {exc.endpoint}，无法导入"
            "（需要 Dify 知识库 API：数据集列表与创建、文档列表、create-by-file / update-by-file）"
        ) from exc
    except StoreError as exc:
        raise ConfigError(f"无法连接服务 {where}: {exc}") from exc
    except ManageError as exc:
        raise ConfigError(f"服务 {where} 的知识库管理接口不可用: {exc}") from exc
    finally:
        if created and not report.added:
            _drop_empty(admin, dataset)
    return report


def _upload_files(
    admin: KnowledgeAdmin,
    paths: Sequence[Path],
    dataset: str,
    manifest: Manifest | None,
    existing: set[str],
    report: RemoteReport,
) -> None:
    """Upload each file (a file the service refuses is listed in ``report.failed``; a
    missing endpoint or an unreachable service stops the run)."""
    for file, root in _files(paths):
        meta = (manifest.metadata_for(file, root) if manifest is not None else None) or {}
        try:
            done = admin.upsert_document(
                dataset,
                name=file.name,
                data=file.read_bytes(),
                metadata=meta,
                replace=file.name if file.name in existing else None,  # Dify's update path
            )
        except OSError as exc:
            report.failed.append((file, f"读取失败: {type(exc).__name__}"))
            continue
        except EndpointMissing:
            raise
        except (ManageError, StoreError) as exc:
            if isinstance(exc, KeyRefused):
                raise
            report.failed.append((file, str(exc)))
            continue
        report.chunks += done.document.segments
        if done.document.name in existing:
            report.updated += 1
        else:
            report.added += 1
            existing.add(done.document.name)


def _drop_empty(admin: KnowledgeAdmin, dataset: str) -> None:
    """Remove the dataset this run created if nothing went into it (best effort)."""
    try:
        if not admin.list_documents(dataset):
            admin.delete_dataset(dataset)
    except (ManageError, StoreError):
        pass


__all__ = ["RemoteReport", "ingest_remote", "upload"]
