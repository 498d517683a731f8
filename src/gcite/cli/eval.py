"""``gcite eval 问题.jsonl``: evaluate answers on a question set (``docs/eval.md``).

Each question of the JSONL file (:mod:`gcite.eval.questions`) is asked - in this process
on a local knowledge base (default; ``--data-dir`` / ``--config``, or ``--demo`` for the
bundled sample data), or through a running gcite / Dify service (``--url`` / ``--key``) -
and judged (:mod:`gcite.eval.scoring`). Progress goes to stderr, the figures to stdout;
``--json`` and ``--html`` write the full report (written atomically). Exit status 0 when
the run completed (whatever the figures), 1 when the target could not be used, 2 for
usage errors.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import click

from gcite.cli.options import Service, SettingsSource, service_options, settings_options

if TYPE_CHECKING:
    from gcite.eval.questions import EvalQuestion
    from gcite.eval.runner import Asker
    from gcite.eval.scoring import Verdict


def _summary_lines(summary: dict[str, Any]) -> list[str]:
    from gcite.eval.report import HEADLINES, false_refusal_rank_text

    def fmt(entry: dict[str, Any]) -> str:
        if not entry["of"]:
            return "—（无此类问题）"
        return f"{entry['n']}/{entry['of']}（{entry['share'] * 100:.0f}%）"

    lines = [f"共 {summary['questions']} 题，答对或正确拒答 {fmt(summary['right'])}"]
    lines += [f"{label}：{fmt(summary[key])}" for key, label, _ in HEADLINES]
    stages = summary.get("false_refusal_stages") or {}
    if any(stages.values()):
        lines.append(
            f"误拒出在：相关性闸门 {stages.get('gate', 0)}，检索 {stages.get('retrieval', 0)}，"
            f"答案器 {stages.get('answerer', 0)}"
        )
    ranks = false_refusal_rank_text(summary)
    if ranks is not None:
        lines.append(
            f"误拒中金标片段排在前 3：{fmt(summary['false_refusals_gold_top3'])}，"
            f"金标文档排在前 3：{fmt(summary['false_refusals_gold_doc_top3'])}"
        )
        lines.append(ranks)
    latency = summary["latency_ms"]
    if latency["median"] is not None:
        lines.append(f"用时中位数 {latency['median']:.0f} 毫秒，P90 {latency['p90']:.0f} 毫秒")
    if summary["errors"]:
        lines.append(f"出错 {summary['errors']} 题")
    return lines


def _progress(err: TextIO, total: int) -> Any:
    from gcite.eval.scoring import OUTCOMES
    from gcite.stream.render import clean_terminal

    def show(index: int, verdict: Verdict) -> None:
        shown = " ".join(clean_terminal(verdict.id).split())  # one line, no escape sequences
        err.write(f"[{index + 1}/{total}] {shown} {OUTCOMES[verdict.outcome]}\n")
        err.flush()

    return show


def _run(questions: list[EvalQuestion], asker: Asker, quiet: bool) -> tuple[list[Verdict], bool]:
    """Ask every question: (the verdicts, whether Ctrl-C stopped the run). A run stopped
    after some questions keeps their verdicts, so its report can still be written; one
    stopped before any is aborted."""
    from gcite.eval.runner import run_questions

    verdicts: list[Verdict] = []
    show = None if quiet else _progress(sys.stderr, len(questions))

    def collect(index: int, verdict: Verdict) -> None:
        verdicts.append(verdict)
        if show is not None:
            show(index, verdict)

    try:
        asyncio.run(run_questions(questions, asker, on_verdict=collect))
    except KeyboardInterrupt:
        if not verdicts:
            raise click.Abort() from None
        return verdicts, True
    return verdicts, False


def _check_outputs(questions_file: Path, outputs: dict[str, Path | None]) -> None:
    """Refuse, before any question is asked, report paths that would fail after the run
    (no such folder, not writable) or destroy a file of the run (the question file, the
    other report). ``outputs``: option name to path."""
    import os
    import tempfile

    from gcite.cli import os_error_reason

    given = {name: path for name, path in outputs.items() if path is not None}
    seen: dict[Path, str] = {questions_file.resolve(): "问题文件"}
    for name, path in given.items():
        where = path.resolve()
        if where in seen:
            raise click.UsageError(f"{name} 与{seen[where]}是同一个文件：{path}")
        seen[where] = f" {name} "
        folder = where.parent
        try:
            fd, probe = tempfile.mkstemp(prefix=f".{where.name}.", suffix=".tmp", dir=folder)
        except OSError as exc:
            raise click.ClickException(f"无法写入 {path}: {os_error_reason(exc)}") from exc
        os.close(fd)
        Path(probe).unlink(missing_ok=True)


def _write_report(path: Path, text: str) -> None:
    from gcite.cli import os_error_reason
    from gcite.files import write_atomically

    try:
        write_atomically(path, text)
    except OSError as exc:
        raise click.ClickException(f"无法写入 {path}: {os_error_reason(exc)}") from exc


@click.command(
    "eval",
    epilog="示例：\n\n"
    "  gcite eval benchmarks/data/frozen/handbook.jsonl --demo --role 运维工程师 --role 安保主管 "
    "--html report.html\n\n"
    "  gcite eval 我的问题.jsonl --data-dir ./gcite-data --json out.json\n\n"
    "  gcite eval 我的问题.jsonl --url http://127.0.0.1:8000 --key app-xxx --html report.html",
)
@click.argument("questions_file", metavar="问题文件", type=click.Path(path_type=Path))
@service_options()
@settings_options(
    data_dir_help="本地模式的知识库数据目录（默认 $GCITE_DATA_DIR 或 ./gcite-data）",
    config_help="配置文件（TOML，默认 <数据目录>/gcite.toml）",
    exists_kinds=True,
)
@click.option("--demo", is_flag=True, help="本地模式使用内置示例数据（与 gcite demo 相同，离线）")
@click.option(
    "--role",
    "roles",
    multiple=True,
    metavar="角色",
    help="本地模式下以这些角色提问（可重复）；问题行自带 roles 时以问题行为准",
)
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="把完整结果写成 JSON 文件",
)  # fmt: skip
@click.option(
    "--html", "html_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="把报告写成 HTML 文件（图表内嵌，无外部资源）",
)  # fmt: skip
@click.option("--quiet", "-q", is_flag=True, help="不在标准错误输出逐题进度")
def eval_command(
    questions_file: Path,
    service: Service | None,
    source: SettingsSource,
    demo: bool,
    roles: tuple[str, ...],
    json_path: Path | None,
    html_path: Path | None,
    quiet: bool,
) -> None:
    """评测：逐题提问并判分，输出答对率、拒答率、引用精确率、核验标记和用时。

    问题文件为 JSONL，每行一个问题（格式见 docs/eval.md）。默认在本进程内对本地知识库
    运行完整流程；用 --url 时改为通过 Dify 流式接口连接已运行的服务，角色由 API Key 决定。
    """
    from gcite.cli.ask import chat_url
    from gcite.eval.questions import load_questions
    from gcite.eval.report import render_html, report_document
    from gcite.eval.runner import LocalAsker, RemoteAsker

    if service is not None and (roles or demo or source.data_dir is not None):
        raise click.UsageError(
            "--role / --demo / --data-dir 只用于本地模式；连接服务时不能同时使用"
        )
    questions = load_questions(questions_file)
    _check_outputs(questions_file, {"--json": json_path, "--html": html_path})
    asker: Asker
    if service is not None:
        target: dict[str, Any] = {"mode": "remote", "url": service.url}
        settings = source.load()
        asker = RemoteAsker(
            chat_url(service.url),
            service.key,
            timeout_s=settings.llm.timeout_s * 2,
            deadline_s=settings.llm.total_timeout_s * 2,
        )
    else:
        if demo:
            from gcite.cli.demo import demo_settings, prepare_demo
            from gcite.config import demo_data_dir

            settings = demo_settings(source.data_dir or demo_data_dir())
            prepare_demo(settings)
        else:
            settings = source.load()
        target = {
            "mode": "demo" if demo else "local",
            "data_dir": str(settings.data_dir),
            "roles": list(roles),
        }
        asker = LocalAsker(settings, roles)
    verdicts, interrupted = _run(questions, asker, quiet)
    document = report_document(
        verdicts,
        target=target,
        questions_file=str(questions_file),
        generated_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        complete=not interrupted,
    )
    # the figures first: a report that cannot be written (disk full) does not lose them
    click.echo("\n".join(_summary_lines(document["summary"])))
    if json_path is not None:
        _write_report(json_path, json.dumps(document, ensure_ascii=False, indent=1) + "\n")
    if html_path is not None:
        _write_report(html_path, render_html(document))
    if interrupted:
        click.echo(f"已中止：报告只含前 {len(verdicts)} 题（共 {len(questions)} 题）", err=True)
        sys.exit(1)


__all__ = ["eval_command"]
