"""The HTML report of ``gcite eval`` in Chromium: charts drawn, verdict table, no requests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser.scenarios import HANG_GUARD_MS
from gcite.eval import EvalQuestion, Observation, judge, render_html, report_document

pytestmark = pytest.mark.browser

ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless Chromium (Debian's); skipped when missing, except in CI."""
    path = os.environ.get("GCITE_CHROMIUM", "/usr/bin/chromium")
    if not Path(path).exists():
        message = f"Chromium not found at {path}: run `make browser`"
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(message + " — required in CI")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def _report(tmp_path: Path) -> Path:
    patrol = {
        "id": "1",
        "source_type": "rag",
        "document_name": "01-patrol.md",
        "document_title": "巡更路线与打卡规范",
        "content": "全部 24 个点位",
        "score": 0.9,
    }
    night = {**patrol, "id": "2", "content": "夜间巡更每 1 小时一次", "score": 0.7}
    hostile = "<script>document.title='pwned'</script>"
    cases = [
        (EvalQuestion("a", "夜里巡逻刷几个点", True, "colloquial", gold_docs=("01-patrol.md",),
                      keywords=(("24",),)),
         Observation("全部 24 个点位。", [patrol], verification={"weak": []}, latency_ms=120)),
        (EvalQuestion("b", hostile, True, "typo", gold_docs=("01-patrol.md",),
                      gold_passages=("夜间巡更每 1 小时一次",)),
         Observation("根据现有资料无法确定", probe=[patrol, night], latency_ms=80)),
        (EvalQuestion("c", "巡检终端多少钱", False, "close-unanswerable"),
         Observation("全部 24 个点位。", [patrol], verification={"weak": [{"id": "1"}]},
                     latency_ms=300)),
        (EvalQuestion("d", "明天天气", False, "off-topic"),
         Observation("根据现有资料无法确定", latency_ms=40)),
    ]  # fmt: skip
    verdicts = [judge(q, o) for q, o in cases]
    document = report_document(
        verdicts, target={"mode": "demo"}, questions_file="q.jsonl", generated_at="2026-12-03"
    )
    path = tmp_path / "report.html"
    path.write_text(render_html(document), encoding="utf-8")
    return path


def test_report_renders_charts_and_the_verdict_table(chromium: Any, tmp_path: Path) -> None:
    path = _report(tmp_path)
    context = chromium.new_context(viewport={"width": 1200, "height": 900}, locale="zh-CN")
    page = context.new_page()
    page.set_default_timeout(HANG_GUARD_MS)
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(path.as_uri())
        assert page.title() == "gcite 评测报告"  # the hostile question did not run
        assert requests == [path.as_uri()] and not errors  # self-contained
        charts = page.locator("svg.chart")
        assert charts.count() == 4
        for name in ("headline", "outcomes", "categories", "latency"):
            chart = page.locator(f'svg[data-chart="{name}"]')
            box = chart.bounding_box()
            assert box is not None and box["width"] > 200 and box["height"] > 60, name
        # headline bars: answerable right 1/2 is drawn half as long as a full bar
        right = page.locator('svg[data-chart="headline"] rect.bar[data-label="可答问题答对"]')
        assert right.get_attribute("data-share") == "0.5000"
        width = float(right.get_attribute("width") or 0)
        full = page.locator('svg[data-chart="headline"] rect.bar[data-label="无关问题：拒答"]')
        assert width > 0 and abs(float(full.get_attribute("width") or 0) - 2 * width) < 0.5
        assert "答对" in (page.locator('svg[data-chart="outcomes"]').text_content() or "")
        rows = page.locator("#verdicts tbody tr")
        assert rows.count() == 4
        assert rows.nth(0).locator("td.outcome").inner_text() == "答对"
        assert rows.nth(1).get_attribute("data-outcome") == "false_refusal"
        assert "<script>" in rows.nth(1).inner_text()  # shown as text
        # the false refusal: the chunk holding the gold passage ranked 2nd, its document 1st
        rank = rows.nth(1).locator("td.rank")
        assert rank.inner_text().splitlines() == [
            "金标片段 第 2 名（0.700）",
            "金标文档 第 1 名（0.900）",
        ]
        # gold documents only, and nothing ranked for it (no probe, no chunk passed on)
        assert (
            rank.is_visible() and rows.nth(0).locator("td.rank").inner_text() == "金标文档 未排上"
        )
        assert page.locator("#false-refusal-ranks").inner_text() == (
            "误拒的金标片段排在：第 1 名 0，第 2–3 名 1，第 4–10 名 0，第 11 名及以后 0，未排上 0；"
            "其金标文档排在：第 1 名 1，第 2–3 名 0，第 4–10 名 0，第 11 名及以后 0，未排上 0"
        )
        assert "引用金标片段" in page.locator("#verdicts thead").inner_text()
        assert rows.nth(2).locator("td.outcome").inner_text() == "不可答却作答"
        assert "标记 1" in rows.nth(2).inner_text()
        assert page.locator("#verdicts thead th").first.inner_text() == "编号"
        assert page.locator("#verdicts").is_visible()
    finally:
        context.close()


#: Markup and script in every text a run puts in the report.
HOSTILE = (
    "<script>document.title='pwned'</script></script><script>document.title='pwned'</script>"
    "\"><img src=x onerror=\"document.title='pwned'\">'><svg onload=\"document.title='pwned'\">"
    "javascript:document.title='pwned' a\u2028b\u2029c</style></title><!--"
)


def test_hostile_text_in_every_field_stays_text(chromium: Any, tmp_path: Path) -> None:
    from gcite.eval.questions import PriorTurn

    chunk = {
        "id": HOSTILE,
        "source_type": "rag",
        "document_name": HOSTILE,
        "document_title": HOSTILE,
        "content": "第一条 " + HOSTILE,
        "url": "javascript:document.title='pwned'",
        "score": float("nan"),  # a service's JSON may say NaN
    }
    question = EvalQuestion(
        HOSTILE, HOSTILE, True, HOSTILE, turns=(PriorTurn(HOSTILE, HOSTILE),),
        gold_docs=(HOSTILE,), gold_passages=(HOSTILE,), keywords=((HOSTILE + "缺",),),
    )  # fmt: skip
    seen = Observation(HOSTILE, [chunk], retrieved=[chunk], latency_ms=5, error=HOSTILE)
    refused = [
        judge(EvalQuestion(f"r{i}", "明天天气", False, "off-topic"), Observation("", latency_ms=0))
        for i in range(2)
    ]  # all refused, every latency 0
    document = report_document(
        [judge(question, seen), *refused],
        target={"mode": "remote", "url": "javascript:document.title='pwned'" + HOSTILE},
        questions_file=HOSTILE,
        generated_at=HOSTILE,
    )
    path = tmp_path / "report.html"
    path.write_text(render_html(document), encoding="utf-8")
    context = chromium.new_context(viewport={"width": 1200, "height": 900}, locale="zh-CN")
    page = context.new_page()
    page.set_default_timeout(HANG_GUARD_MS)
    events: list[str] = []
    page.on("dialog", lambda d: (events.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: events.append(str(e)))
    page.on("request", lambda r: r.url == path.as_uri() or events.append(r.url))
    try:
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        assert page.title() == "gcite 评测报告" and not events
        live = page.evaluate(
            "() => [document.scripts.length, document.images.length, "
            "document.querySelectorAll('a, [onload], [onerror], svg:not(.chart)').length]"
        )
        assert live == [0, 0, 0]
        assert page.locator("svg.chart").count() == 4
        rows = page.locator("#verdicts tbody tr")
        assert rows.count() == 3 and HOSTILE[:40] in rows.nth(0).inner_text()
        assert rows.nth(0).locator("td").count() == 12  # no cell broken out of
    finally:
        context.close()
