"""The question file of ``gcite eval``: JSON Lines in, :class:`EvalQuestion` out (pure).

One JSON object per line (``docs/eval.md``). Accepted fields:

- ``id`` (string or number; default ``L<line>``), ``question`` (required);
- ``turns`` (or ``history``): earlier conversation turns, oldest first - each
  ``{"query", "answer"}`` (``question`` for ``query`` accepted), or a bare string (a
  question asked first, whose answer is the system's own);
- ``answerable`` (bool); ``category`` (free text: ``colloquial``, ``close-unanswerable``,
  ``off-topic``...; default ``kind``, else ``answerable`` / ``unanswerable``);
- gold sources: ``gold_docs`` (file names), ``gold_passages`` (short exact quotes),
  and the law format ``gold`` / ``alt_gold`` (``[{"doc", "article"}]``);
- ``answer_keywords`` (or ``facts``): each item a string or a list of alternatives;
  every item must be found in the answer (spaces ignored) for it to count as right;
- ``keypoints`` (shown in the report, not scored), ``kind`` (law sets: ``unanswerable``
  means not answerable), ``roles`` (in-process runs: the caller's roles for this question).

Without ``answerable`` a question is answerable when it has gold sources or keywords and
its ``kind`` is not ``unanswerable``. Errors are :class:`~gcite.errors.ConfigError` with
the file and line number, in Chinese.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gcite.errors import ConfigError

#: At most this many questions per file (a bounded run and a bounded report).
MAX_QUESTIONS = 5000
#: At most this many characters per question (as ``gcite ask``).
MAX_QUESTION = 4000
#: At most this many bytes read from a question file.
MAX_FILE_BYTES = 20 * 1024 * 1024
#: At most this many earlier turns per question (each is asked first when unanswered).
MAX_TURNS = 20
OFF_TOPIC = "off-topic"


@dataclass(frozen=True)
class PriorTurn:
    """An earlier turn: ``query`` and the ``answer`` given to it (None: ask the system)."""

    query: str
    answer: str | None = None


@dataclass(frozen=True)
class GoldArticle:
    """A law article: ``doc`` (file name) and ``article`` (``第二十三条``)."""

    doc: str
    article: str


@dataclass(frozen=True)
class EvalQuestion:
    """One question to evaluate (see the module docstring for the fields)."""

    id: str
    question: str
    answerable: bool
    category: str = ""
    turns: tuple[PriorTurn, ...] = ()
    gold_docs: tuple[str, ...] = ()
    gold_passages: tuple[str, ...] = ()
    gold_articles: tuple[GoldArticle, ...] = ()
    keywords: tuple[tuple[str, ...], ...] = ()
    keypoints: tuple[str, ...] = ()
    roles: tuple[str, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def has_gold_sources(self) -> bool:
        """Whether cited chunks can be judged (gold documents, passages or articles)."""
        return bool(self.gold_docs or self.gold_passages or self.gold_articles)

    @property
    def off_topic(self) -> bool:
        """Whether the question is off-topic (category ``off-topic`` / ``offtopic``)."""
        return self.category.replace("_", "-").lower() in (OFF_TOPIC, "offtopic")


def _strings(value: Any, where: str, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}：{name} 必须是字符串列表")
    return tuple(v.strip() for v in value if v.strip())


def _keywords(value: Any, where: str) -> tuple[tuple[str, ...], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where}：answer_keywords 必须是列表")
    groups: list[tuple[str, ...]] = []
    for item in value:
        alternatives = _strings(item, where, "answer_keywords 的每一项")
        if not alternatives:
            raise ConfigError(f"{where}：answer_keywords 里有空的一项")
        groups.append(alternatives)
    return tuple(groups)


def _articles(value: Any, where: str, name: str) -> tuple[GoldArticle, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f'{where}：{name} 必须是 [{{"doc", "article"}}] 列表')
    out: list[GoldArticle] = []
    for item in value:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("doc"), str)
            or not isinstance(item.get("article"), str)
            or not item["doc"].strip()
            or not item["article"].strip()
        ):
            raise ConfigError(f"{where}：{name} 的每一项必须有字符串 doc 和 article")
        out.append(GoldArticle(item["doc"].strip(), item["article"].strip()))
    return tuple(out)


def _turns(value: Any, where: str) -> tuple[PriorTurn, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where}：turns 必须是列表")
    if len(value) > MAX_TURNS:
        raise ConfigError(f"{where}：turns 过多（最多 {MAX_TURNS} 轮）")
    out: list[PriorTurn] = []
    for item in value:
        query = item.get("query", item.get("question")) if isinstance(item, dict) else item
        if isinstance(query, str) and len(query.strip()) > MAX_QUESTION:
            raise ConfigError(f"{where}：turns 里的问题过长（最多 {MAX_QUESTION} 个字符）")
        if isinstance(item, str) and item.strip():
            out.append(PriorTurn(item.strip()))
            continue
        if isinstance(item, dict):
            query = item.get("query", item.get("question"))
            answer = item.get("answer")
            if (
                isinstance(query, str)
                and query.strip()
                and (answer is None or isinstance(answer, str))
            ):
                out.append(PriorTurn(query.strip(), answer))
                continue
        raise ConfigError(f'{where}：turns 的每一项必须是问题字符串或 {{"query", "answer"}}')
    return tuple(out)


def parse_question(row: Any, where: str, default_id: str) -> EvalQuestion:
    """One line's object as an :class:`EvalQuestion`. Raises :class:`ConfigError`."""
    if not isinstance(row, dict):
        raise ConfigError(f"{where}：每行必须是一个 JSON 对象")
    question = row.get("question", row.get("query"))
    if not isinstance(question, str) or not question.strip():
        raise ConfigError(f"{where}：缺少 question（非空字符串）")
    question = question.strip()
    if len(question) > MAX_QUESTION:
        raise ConfigError(f"{where}：问题过长（最多 {MAX_QUESTION} 个字符）")
    raw_id = row.get("id", default_id)
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
        raise ConfigError(f"{where}：id 必须是字符串或整数")
    kind = row.get("kind") if isinstance(row.get("kind"), str) else ""
    gold_docs = _strings(row.get("gold_docs"), where, "gold_docs")
    gold_passages = _strings(row.get("gold_passages"), where, "gold_passages")
    articles = _articles(row.get("gold"), where, "gold") + _articles(
        row.get("alt_gold"), where, "alt_gold"
    )
    keywords = _keywords(row.get("answer_keywords", row.get("facts")), where)
    answerable = row.get("answerable")
    if answerable is None:
        answerable = kind != "unanswerable" and bool(
            gold_docs or gold_passages or articles or keywords
        )
    elif not isinstance(answerable, bool):
        raise ConfigError(f"{where}：answerable 必须是 true 或 false")
    category = row.get("category")
    if category is not None and not isinstance(category, str):
        raise ConfigError(f"{where}：category 必须是字符串")
    category = (category or kind or ("answerable" if answerable else "unanswerable")).strip()
    roles = row.get("roles")
    known = {
        "id", "question", "query", "turns", "history", "answerable", "category", "kind",
        "gold_docs", "gold_passages", "gold", "alt_gold", "answer_keywords", "facts",
        "keypoints", "roles",
    }  # fmt: skip
    return EvalQuestion(
        id=str(raw_id),
        question=question,
        answerable=answerable,
        category=category,
        turns=_turns(row.get("turns", row.get("history")), where),
        gold_docs=gold_docs,
        gold_passages=gold_passages,
        gold_articles=articles,
        keywords=keywords,
        keypoints=_strings(row.get("keypoints"), where, "keypoints"),
        roles=None if roles is None else _strings(roles, where, "roles"),
        extra={k: v for k, v in row.items() if k not in known},
    )


def _has_lone_surrogate(line: str, row: Any) -> bool:
    """Whether ``row`` (parsed from ``line``) holds a lone surrogate (``"\\ud800"``): text
    that cannot be written as UTF-8, so neither sent to a service nor put in a report."""
    if "\\u" not in line:  # a surrogate can only come from an escape
        return False
    try:
        json.dumps(row, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_lines(lines: Iterable[str], name: str = "问题文件") -> list[EvalQuestion]:
    """Every non-blank line of a JSONL question file. Raises :class:`ConfigError` on a
    bad line (file and line number), a repeated id, no question at all or too many."""
    out: list[EvalQuestion] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{name} 第 {number} 行"
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"{where}：不是有效的 JSON（{exc}）") from exc
        except RecursionError as exc:
            raise ConfigError(f"{where}：JSON 嵌套过深") from exc
        if _has_lone_surrogate(line, row):
            raise ConfigError(f"{where}：含有无效的 Unicode 转义（孤立的代理项 \\ud800–\\udfff）")
        item = parse_question(row, where, f"L{number}")
        if item.id in seen:
            raise ConfigError(f"{where}：id {item.id!r} 重复")
        seen.add(item.id)
        out.append(item)
        if len(out) > MAX_QUESTIONS:
            raise ConfigError(f"{name}：问题过多（最多 {MAX_QUESTIONS} 个）")
    if not out:
        raise ConfigError(f"{name}：没有问题")
    return out


def load_questions(path: Path) -> list[EvalQuestion]:
    """The questions of a JSONL file (UTF-8). Raises :class:`ConfigError` when it cannot be
    read, is over :data:`MAX_FILE_BYTES`, or has a bad line."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"无法读取问题文件 {path}：{exc.strerror or exc}") from exc
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(f"问题文件过大：{path}（最多 {MAX_FILE_BYTES // (1024 * 1024)} MB）")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"问题文件不是 UTF-8 编码：{path}") from exc
    # Only "\n" ends a line: U+2028, U+0085 and the like are valid inside a JSON string
    # (json.dumps(..., ensure_ascii=False) writes them as they are); "\r" is JSON space.
    return parse_lines(text.split("\n"), str(path))


__all__ = [
    "MAX_QUESTION",
    "MAX_QUESTIONS",
    "MAX_TURNS",
    "EvalQuestion",
    "GoldArticle",
    "PriorTurn",
    "load_questions",
    "parse_lines",
    "parse_question",
]
