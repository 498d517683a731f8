"""``gcite ingest PATH... --url URL --key KEY``: import into a running service.

The running ``gcite serve`` holds the knowledge store, so a second process cannot write
it; this uploads each file to the service's knowledge-base management API (Dify's
Knowledge API shape, :mod:`gcite.service.knowledge_api`) with an admin key. The dataset
is created when missing; a file whose name is already in the dataset replaces that
document. Manifest metadata (e.g. ``access_roles``) goes with each file as
``doc_metadata``, so a restricted document is never public in between.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from gcite.errors import ConfigError
from gcite.knowledge.convert import SUPPORTED_SUFFIXES, Manifest

UPLOAD_TIMEOUT_S = 600.0


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


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}"
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return f"HTTP {response.status_code}"


def ingest_remote(
    paths: Sequence[Path],
    *,
    url: str,
    key: str,
    dataset: str,
    manifest: Manifest | None = None,
) -> RemoteReport:
    """Upload the files under ``paths`` into ``dataset`` of the service at ``url``.

    Raises :class:`ConfigError` when the service cannot be reached or refuses the key
    (one line); per-file refusals (e.g. a malformed ``access_roles``) are listed in
    ``RemoteReport.failed`` and the rest is uploaded.
    """
    base = url.rstrip("/")
    headers = {"Authorization": f"Bearer {key}"}
    report = RemoteReport(dataset=dataset)
    with httpx.Client(timeout=UPLOAD_TIMEOUT_S, headers=headers) as http:
        try:
            listed = http.get(f"{base}/v1/datasets", params={"limit": 100})
        except httpx.HTTPError as exc:
            raise ConfigError(f"无法连接服务 {base}: {type(exc).__name__}") from exc
        if listed.status_code in (401, 403):
            raise ConfigError(f"服务 {base} 拒绝了这个密钥（需要 admin_keys 中的管理密钥）")
        if listed.status_code != 200:
            raise ConfigError(f"服务 {base} 的知识库管理接口不可用: {_message(listed)}")
        names = {d.get("name") for d in listed.json().get("data", [])}
        ids = {d.get("id") for d in listed.json().get("data", [])}
        if dataset not in names and dataset not in ids:
            made = http.post(f"{base}/v1/datasets", json={"name": dataset})
            if made.status_code != 200:
                raise ConfigError(f"无法创建数据集 {dataset}: {_message(made)}")
        target = f"{base}/v1/datasets/{quote(dataset, safe='')}"
        existing = _existing(http, target)
        for file, root in _files(paths):
            meta: dict[str, Any] = {}
            if manifest is not None:
                meta = manifest.metadata_for(file, root) or {}
            data = {"indexing_technique": "high_quality", "doc_metadata": meta}
            try:
                response = http.post(
                    f"{target}/document/create-by-file",
                    files={"file": (file.name, file.read_bytes())},
                    data={"data": json.dumps(data, ensure_ascii=False)},
                )
            except (OSError, httpx.HTTPError) as exc:
                report.failed.append((file, f"上传失败: {type(exc).__name__}"))
                continue
            if response.status_code != 200:
                report.failed.append((file, _message(response)))
                continue
            document = response.json().get("document", {})
            report.chunks += int(document.get("segment_count") or 0)
            if document.get("name") in existing:
                report.updated += 1
            else:
                report.added += 1
                existing.add(str(document.get("name")))
    return report


def _existing(http: httpx.Client, target: str) -> set[str]:
    names: set[str] = set()
    page = 1
    while True:
        response = http.get(f"{target}/documents", params={"page": page, "limit": 100})
        if response.status_code != 200:
            return names
        body = response.json()
        names.update(str(d.get("name")) for d in body.get("data", []))
        if not body.get("has_more"):
            return names
        page += 1


__all__ = ["RemoteReport", "ingest_remote"]
