"""The outputs of ``gcite eval``: the JSON document and the self-contained HTML report.

:func:`report_document` is the JSON (``version``, ``generated_at``, ``target``,
``questions_file``, ``complete``, ``summary`` from :func:`gcite.eval.scoring.aggregate`,
``verdicts``).
:func:`render_html` turns that document into one HTML page with no external assets:
inline CSS, charts as inline SVG (headline figures, outcomes, right answers by category,
latencies), and the verdict table; every text from the run is HTML-escaped. Pure.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from gcite.eval.scoring import OUTCOMES, RANK_BINS, Verdict, aggregate

REPORT_VERSION = 1

#: Headline figures: (summary key, Chinese label, higher is better).
HEADLINES: tuple[tuple[str, str, bool], ...] = (
    ("answerable_right", "可答问题答对", True),
    ("answerable_refused", "可答却拒答", False),
    ("close_unanswerable_refused", "相近但不可答：拒答", True),
    ("off_topic_refused", "无关问题：拒答", True),
    ("gold_cited", "引用了金标来源", True),
    ("gold_passage_cited", "引用了金标片段", True),
    ("citation_precision", "引用精确率", True),
    ("verifier_flags_wrong", "核验标记了错答", True),
    ("verifier_flags_right", "核验误标了对答", False),
)
_OUTCOME_COLOURS = {
    "right": "#2e7d32",
    "refused": "#66bb6a",
    "wrong": "#c62828",
    "answered_unanswerable": "#ef6c00",
    "false_refusal": "#f9a825",
    "error": "#6d4c41",
}


def report_document(
    verdicts: Sequence[Verdict],
    *,
    target: dict[str, Any],
    questions_file: str,
    generated_at: str,
    complete: bool = True,
) -> dict[str, Any]:
    """The JSON report: run metadata, the aggregate figures and every verdict.
    ``complete``: False when the run was stopped (Ctrl-C) before its last question, the
    report holding the questions asked so far."""
    return {
        "version": REPORT_VERSION,
        "generated_at": generated_at,
        "target": target,
        "questions_file": questions_file,
        "complete": complete,
        "summary": aggregate(verdicts),
        "verdicts": [v.as_dict() for v in verdicts],
    }


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _pct(share: float | None) -> str:
    return "—" if share is None else f"{share * 100:.0f}%"


def _bars(rows: list[tuple[str, float | None, str, str]], name: str, title: str) -> str:
    """A horizontal bar chart (0-100 %): rows of (label, share, colour, note)."""
    width, label_w, bar_w, row_h = 640, 190, 330, 26
    height = 34 + row_h * len(rows)
    out = [
        f'<svg class="chart" data-chart="{_e(name)}" role="img" aria-label="{_e(title)}" '
        f'viewBox="0 0 {width} {height}" width="100%" xmlns="http://www.w3.org/2000/svg">',
        f'<text x="0" y="18" class="ct">{_e(title)}</text>',
    ]
    for i, (label, share, colour, note) in enumerate(rows):
        y = 30 + i * row_h
        w = 0.0 if share is None else max(0.0, min(1.0, share)) * bar_w
        data_share = "" if share is None else f"{share:.4f}"
        out.append(f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end">{_e(label)}</text>')
        out.append(f'<rect x="{label_w}" y="{y + 3}" width="{bar_w}" height="18" fill="#eceff1"/>')
        out.append(
            f'<rect class="bar" x="{label_w}" y="{y + 3}" width="{w:.1f}" height="18" '
            f'fill="{colour}" data-label="{_e(label)}" data-share="{data_share}"/>'
        )
        out.append(
            f'<text x="{label_w + bar_w + 8}" y="{y + 16}">{_e(_pct(share))} {_e(note)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def _share_note(entry: dict[str, Any]) -> str:
    return f"({entry['n']}/{entry['of']})" if entry.get("of") else "(无)"


def _headline_chart(summary: dict[str, Any]) -> str:
    rows = []
    for key, label, good_high in HEADLINES:
        entry = summary[key]
        colour = "#1565c0" if good_high else "#ad1457"
        rows.append((label, entry["share"], colour, _share_note(entry)))
    return _bars(rows, "headline", "主要指标")


def _outcome_chart(summary: dict[str, Any]) -> str:
    total = max(1, summary["questions"])
    rows = [
        (
            OUTCOMES[k],
            summary["outcomes"][k] / total,
            _OUTCOME_COLOURS[k],
            f"({summary['outcomes'][k]})",
        )
        for k in OUTCOMES
    ]
    return _bars(rows, "outcomes", "结果分布（占全部问题）")


def _category_chart(summary: dict[str, Any]) -> str:
    rows = [
        (name, entry["share"], "#00838f", f"({entry['right']}/{entry['n']})")
        for name, entry in sorted(summary["categories"].items())
    ]
    return _bars(rows, "categories", "按类别：答对或正确拒答")


def _latency_chart(verdicts: Sequence[dict[str, Any]]) -> str:
    """A histogram of latencies (10 bins from 0 to the slowest)."""
    values = [float(v["latency_ms"]) for v in verdicts if v.get("error") is None]
    width, height, left, bottom = 640, 180, 40, 30
    out = [
        f'<svg class="chart" data-chart="latency" role="img" aria-label="用时分布" '
        f'viewBox="0 0 {width} {height}" width="100%" xmlns="http://www.w3.org/2000/svg">',
        '<text x="0" y="18" class="ct">用时分布（毫秒）</text>',
    ]
    if values:
        top = max(values) or 1.0
        bins = [0] * 10
        for value in values:
            bins[min(9, int(value / top * 10))] += 1
        peak = max(bins)
        bar_w = (width - left - 10) / 10
        for i, count in enumerate(bins):
            h = (height - bottom - 30) * count / peak
            x = left + i * bar_w
            y = height - bottom - h
            out.append(
                f'<rect class="bar" x="{x + 2:.1f}" y="{y:.1f}" width="{bar_w - 4:.1f}" '
                f'height="{h:.1f}" fill="#5e35b1" data-count="{count}"/>'
            )
            if count:
                out.append(
                    f'<text x="{x + bar_w / 2:.1f}" y="{y - 3:.1f}" '
                    f'text-anchor="middle">{count}</text>'
                )
            out.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{height - 12}" text-anchor="middle" '
                f'class="small">{top * (i + 1) / 10:.0f}</text>'
            )
    else:
        out.append('<text x="0" y="60">没有可统计的用时</text>')
    out.append("</svg>")
    return "".join(out)


def _yes(value: bool | None) -> str:
    return "—" if value is None else ("是" if value else "否")


#: The label of a verdict's ``gold_rank`` by its ``gold_rank_by``.
_RANK_LABELS = {"passage": "金标片段", "article": "金标条文", "document": "金标文档"}


def _rank_text(rank: int | None, score: Any) -> str:
    if rank is None:
        return "未排上"
    return f"第 {rank} 名（{score:.3f}）" if isinstance(score, int | float) else f"第 {rank} 名"


def _rank_cell(v: dict[str, Any]) -> str:
    """The gold rank cell: the gold chunk's rank and score and, when that is a passage or
    an article, the gold document's too."""
    by = v.get("gold_rank_by")
    if by is None:
        return '<td class="rank">—</td>'
    lines = [f"{_RANK_LABELS[by]} {_rank_text(v['gold_rank'], v['gold_score'])}"]
    if by != "document":
        lines.append(f"金标文档 {_rank_text(v.get('gold_doc_rank'), v.get('gold_doc_score'))}")
    data = f' data-rank="{_e(v["gold_rank"])}" data-doc-rank="{_e(v.get("gold_doc_rank"))}"'
    return f'<td class="rank"{data}>{"<br>".join(_e(line) for line in lines)}</td>'


def _row(v: dict[str, Any]) -> str:
    sources = "<br>".join(
        f'<span class="{"gold" if s.get("gold") else "src"}">'
        f"[{_e(s['id'])}] {_e(s['title'] or s['document'])}"
        f"{(' ' + _e('、'.join(s['articles'][:2]))) if s.get('articles') else ''}</span>"
        for s in v["sources"]
    )
    turns = "".join(f'<div class="turn">↳ {_e(t["query"])}</div>' for t in v.get("turns") or [])
    missing = ""
    if v["keywords_missing"]:
        missing = (
            '<div class="miss">缺少：'
            + _e("；".join("/".join(g) for g in v["keywords_missing"]))
            + "</div>"
        )
    verify = "—"
    if v["verifier_checked"]:
        verify = f"标记 {v['weak_citations']}" if v["verifier_flagged"] else "未标记"
    precision = "—" if v["precision"] is None else f"{v['precision']:.2f}"
    label = v.get("refusal_label")
    stage = f'<div class="stage">{_e(label)}</div>' if label else ""
    return (
        f'<tr class="o-{_e(v["outcome"])}" data-outcome="{_e(v["outcome"])}">'
        f"<td>{_e(v['id'])}</td><td>{_e(v['category'])}</td>"
        f"<td>{turns}{_e(v['question'])}</td>"
        f'<td class="outcome">{_e(v["outcome_label"])}{stage}</td>'
        f'<td class="answer">{_e(v["answer"][:300])}{missing}'
        f"{('<div class=miss>' + _e(v['error']) + '</div>') if v.get('error') else ''}</td>"
        f"<td>{sources or '—'}</td><td>{_yes(v['gold_cited'])}</td>"
        f"<td>{_yes(v.get('gold_passage_cited'))}</td><td>{precision}</td>"
        f"{_rank_cell(v)}<td>{_e(verify)}</td><td>{v['latency_ms']:.0f}</td></tr>"
    )


_CSS = """
body{font-family:system-ui,-apple-system,"PingFang SC","Noto Sans CJK SC",sans-serif;
margin:16px;color:#212121;max-width:1200px}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
.meta{color:#555;font-size:.9em}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:16px}
svg.chart{font-size:12px;background:#fff;border:1px solid #e0e0e0;border-radius:6px;
padding:6px;box-sizing:border-box}
svg .ct{font-weight:bold;font-size:13px}svg .small{font-size:10px;fill:#555}
table{border-collapse:collapse;width:100%;font-size:.85em}
th,td{border:1px solid #ddd;padding:4px 6px;vertical-align:top}
th{background:#f5f5f5;position:sticky;top:0}td.answer{max-width:360px}
.gold{color:#2e7d32}.src{color:#555}.stage{color:#555;font-size:.85em}.miss{color:#c62828;font-size:.9em}.turn{color:#777;font-size:.9em}
tr.o-right td.outcome,tr.o-refused td.outcome{color:#2e7d32}
tr.o-wrong td.outcome,tr.o-answered_unanswerable td.outcome{color:#c62828}
tr.o-false_refusal td.outcome{color:#b26a00}tr.o-error td.outcome{color:#6d4c41}
"""


def false_refusal_rank_text(summary: dict[str, Any]) -> str | None:
    """One Chinese line: where retrieval ranked the gold chunk and the gold document of the
    false refusals (``false_refusal_gold_ranks``); None without such false refusals."""
    ranks = summary.get("false_refusal_gold_ranks") or {}
    chunk, document = ranks.get("chunk") or {}, ranks.get("document") or {}
    if not any(chunk.values()):
        return None
    labels = {"1": "第 1 名", "2-3": "第 2–3 名", "4-10": "第 4–10 名", "11+": "第 11 名及以后"}
    labels["none"] = "未排上"

    def counts(bins: dict[str, int]) -> str:
        return "，".join(f"{labels[k]} {bins.get(k, 0)}" for k in RANK_BINS)

    return f"误拒的金标片段排在：{counts(chunk)}；其金标文档排在：{counts(document)}"


def _false_refusal_ranks(summary: dict[str, Any]) -> str:
    text = false_refusal_rank_text(summary)
    return "" if text is None else f'<p class="meta" id="false-refusal-ranks">{_e(text)}</p>'


def render_html(document: dict[str, Any]) -> str:
    """The report page for a :func:`report_document` document (UTF-8 text, no assets)."""
    summary = document["summary"]
    verdicts = document["verdicts"]
    target = document.get("target") or {}
    latency = summary["latency_ms"]
    median = "—" if latency["median"] is None else f"{latency['median']:.0f} 毫秒"
    target_text = " ".join(
        f"{k}={'、'.join(map(str, v)) if isinstance(v, list) else v}"
        for k, v in target.items()
        if v not in (None, "", [])
    )
    head = (
        f"<p class=meta>问题文件：{_e(document.get('questions_file'))}　对象：{_e(target_text)}"
        f"　生成时间：{_e(document.get('generated_at'))}</p>"
        f"<p class=meta>共 {summary['questions']} 题；全部答对或正确拒答 "
        f"{summary['right']['n']}/{summary['questions']}（{_pct(summary['right']['share'])}）；"
        f"出错 {summary['errors']}；用时中位数 {median}。</p>"
        f"{_false_refusal_ranks(summary)}"
    )
    if document.get("complete") is False:
        head += f'<p class=meta id="incomplete">运行被中止：只含前 {summary["questions"]} 题。</p>'

    rows = "".join(_row(v) for v in verdicts)
    return (
        '<!DOCTYPE html><html lang="zh-CN"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>gcite 评测报告</title><style>{_CSS}</style></head><body>"
        f"<h1>gcite 评测报告</h1>{head}<div class=charts>"
        f"{_headline_chart(summary)}{_outcome_chart(summary)}{_category_chart(summary)}"
        f"{_latency_chart(verdicts)}</div>"
        '<h2>逐题结果</h2><table id="verdicts"><thead><tr><th>编号</th><th>类别</th><th>问题</th>'
        "<th>结果</th><th>回答</th><th>引用来源（绿色为金标）</th><th>引用金标</th>"
        "<th>引用金标片段</th><th>精确率</th><th>金标排名（分数）</th><th>核验</th>"
        "<th>用时 ms</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></body></html>\n"
    )


__all__ = [
    "HEADLINES",
    "REPORT_VERSION",
    "false_refusal_rank_text",
    "render_html",
    "report_document",
]
