"""``gcite search QUERY``: role-aware hybrid search, printed or as Dify KR ``result`` JSON."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import click

from gcite.cli.options import SettingsSource, settings_options
from gcite.errors import GciteError


def _fail(message: str) -> None:
    """One clear Chinese line on stderr, exit status 1, no traceback."""
    click.echo(f"错误: {message}", err=True)
    raise SystemExit(1)


def _role_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--role`` (repeatable) and ``--no-roles`` as one ``roles`` argument: the roles to
    search as (``[]`` for a user without roles), ``None`` for no role filter."""

    @functools.wraps(fn)
    def command(*args: Any, role: tuple[str, ...], no_roles: bool, **kw: Any) -> Any:
        return fn(*args, roles=list(role) if role or no_roles else None, **kw)

    with_no_roles = click.option("--no-roles", is_flag=True, help="以“没有任何角色”的用户身份检索")(
        command
    )
    return click.option(
        "--role", "role", multiple=True, help="用户角色（可重复）；不给则不按角色过滤"
    )(with_no_roles)


@click.command("search")
@click.argument("query")
@_role_options
@click.option(
    "--filter", "filter_json", default=None, help="元数据过滤条件（Dify 格式 JSON，可嵌套）"
)
@click.option("--top-k", type=click.IntRange(1, 100), default=None, help="返回条数")
@click.option("--score-threshold", type=click.FloatRange(0, 1), default=None, help="最低分数 0–1")
@click.option("--dataset", default=None, help="只在该数据集中检索")
@click.option("--json", "as_json", is_flag=True, help="输出 Dify 知识检索 result JSON")
@settings_options()
def search(
    query: str,
    roles: list[str] | None,
    filter_json: str | None,
    top_k: int | None,
    score_threshold: float | None,
    dataset: str | None,
    as_json: bool,
    source: SettingsSource,
) -> None:
    """在知识库中检索（按角色过滤）。"""
    from gcite.knowledge.access import KnowledgeAccess

    condition: Any = None
    if filter_json is not None:
        try:
            condition = json.loads(filter_json)
        except json.JSONDecodeError as exc:
            _fail(f"--filter 不是有效的 JSON: {exc.msg}（第 {exc.pos} 个字符）")
        if not isinstance(condition, dict):
            _fail("--filter 必须是 JSON 对象")
    try:
        settings = source.load({"top_k": top_k, "score_threshold": score_threshold})
        with KnowledgeAccess(settings) as knowledge:
            items = knowledge.store().search(
                query,
                dataset=dataset,
                roles=roles,
                condition=condition,
                top_k=settings.knowledge.top_k,
                score_threshold=settings.knowledge.score_threshold,
            )
    except GciteError as exc:
        _fail(str(exc))
    if as_json:
        click.echo(json.dumps(items, ensure_ascii=False, indent=2))
        return
    if not items:
        click.echo("没有找到相关内容")
        return
    for item in items:
        meta = item["metadata"]
        title = meta["doc_metadata"].get("document_title") or item["title"]
        click.echo(
            f"[{meta['position']}] {meta['score']:.3f}  {title}  (第 {meta['segment_position']} 段)"
        )
        click.echo("    " + item["content"].replace("\n", "\n    ")[:400])


__all__ = ["search"]
