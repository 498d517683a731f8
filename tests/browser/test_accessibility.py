"""Accessibility of the H5 page in Chromium: axe-core (pinned in tests/browser/package.json,
installed by ``make browser``) over every state of the page, light and dark, with no
serious or critical violation; and the page operated by keyboard only (superscripts,
source panel, sheet)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser.scenarios import HANG_GUARD_MS, MARKDOWN_QUESTION, VERIFY_QUESTION, VIEWPORT, Live
from browser.test_page import ask
from support.openai_standin import Script

AXE = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"


@pytest.fixture(scope="module")
def axe_source() -> str:
    """axe-core's browser bundle; skipped (failed in CI) when it is not installed."""
    if not AXE.exists():
        message = f"axe-core not installed at {AXE}: run `make browser`"
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(message + " — required in CI")
        pytest.skip(message)
    return AXE.read_text(encoding="utf-8")


def axe_problems(page: Any, axe_source: str, state: str) -> list[str]:
    """The serious and critical axe violations of the page as it is now, one line each."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.add_script_tag(content=axe_source)
    result = page.evaluate(
        "async () => { const r = await axe.run(document, {resultTypes: ['violations']});"
        " return r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')"
        ".map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ') + ' '"
        " + (n.failureSummary || '').split('\\n').slice(1, 2).join('')).join(' | ')); }"
    )
    return [f"[{state}] {line}" for line in result]


@pytest.fixture(params=["light", "dark"])
def scheme_page(request: Any, browser: Any, live: Live) -> Iterator[Any]:
    context = browser.new_context(
        viewport=VIEWPORT,
        is_mobile=True,
        has_touch=True,
        locale="zh-CN",
        color_scheme=request.param,
        bypass_csp=True,  # axe is injected as an inline script
    )
    pg = context.new_page()
    pg.set_default_timeout(HANG_GUARD_MS)
    pg.goto(live.url + "/")
    pg.wait_for_selector("body[data-ready='true']")
    try:
        yield pg
    finally:
        context.close()


def test_axe_finds_no_serious_violation_in_any_state(
    scheme_page: Any, live: Live, axe_source: str
) -> None:
    page = scheme_page
    problems = axe_problems(page, axe_source, "empty")

    # an answer with Markdown, its panel open, both kinds of sheet
    message = ask(page, MARKDOWN_QUESTION)
    problems += axe_problems(page, axe_source, "answer")
    message.locator(".panel-head").click()
    problems += axe_problems(page, axe_source, "panel open")
    for kind in ("rag", "web"):
        message.locator(f".g-cite-item[data-source-type='{kind}']").first.click()
        page.locator("#sheet").wait_for(state="visible")
        problems += axe_problems(page, axe_source, f"{kind} sheet")
        page.keyboard.press("Escape")
        page.locator("#sheet").wait_for(state="hidden")

    # verification: a weak citation (legend, dashed superscript), the highlighted sentence
    message = ask(page, VERIFY_QUESTION)
    turn = live.scenarios.last(VERIFY_QUESTION)
    message.locator(".weak-legend").wait_for()
    problems += axe_problems(page, axe_source, "weak citation")
    message.locator(".panel-head").click()
    message.locator(f".g-cite-item[data-raw-id='{turn.cited['right']}']").click()
    page.locator("#sheet-text mark.sheet-support").wait_for()
    problems += axe_problems(page, axe_source, "highlighted support")
    page.keyboard.press("Escape")
    message.locator(f".g-cite-item[data-raw-id='{turn.cited['wrong']}']").click()
    page.locator("#sheet-weak").wait_for()
    problems += axe_problems(page, axe_source, "weak sheet")
    page.keyboard.press("Escape")

    # reasoning expanded, an error with 重试, a stopped answer, a queued question (each in a
    # new conversation: no follow-up rewrite call takes the scripted answer)
    page.click("#new-chat")
    live.standin.push(Script(deltas=["<think>先查巡更规定[C:3]</think>", "夜间巡更每小时一次。"]))
    message = ask(page, "夜间巡更多久一次？")
    message.locator("summary.reasoning-summary").click()
    assert message.locator("details.reasoning[open]").count() == 1
    problems += axe_problems(page, axe_source, "reasoning")
    page.click("#new-chat")
    live.standin.push(Script(status=500))
    ask(page, "夜间巡更要打卡多少个点位？")
    problems += axe_problems(page, axe_source, "error")
    page.click("#new-chat")
    live.standin.push(Script(deltas=["夜间巡更", *["每小时一次。"] * 100], token_delay_s=0.05))
    page.fill("#input", "夜间巡更要打卡多少个点位？")
    page.press("#input", "Enter")
    page.wait_for_function("() => document.getElementById('send').classList.contains('is-stop')")
    page.fill("#input", "排队的问题")
    page.press("#input", "Enter")
    problems += axe_problems(page, axe_source, "streaming, queued")
    page.click("#send")
    page.locator(".msg-bot").nth(0).locator("xpath=self::*[@data-done='true']").wait_for()
    page.locator(".msg-bot").nth(1).locator("xpath=self::*[@data-done='true']").wait_for()
    problems += axe_problems(page, axe_source, "stopped")
    assert problems == [], "\n".join(problems)


def test_keyboard_only_superscript_panel_and_sheet(scheme_page: Any, live: Live) -> None:
    page = scheme_page
    message = ask(page, MARKDOWN_QUESTION)
    first = message.locator("sup.g-cite").first
    raw = first.get_attribute("data-raw-id")
    assert first.get_attribute("tabindex") == "0" and first.get_attribute("role") == "button"
    assert (first.get_attribute("aria-label") or "").startswith("引用 1：")

    # Tab from the input backwards reaches the answer's focusable parts; go to the sup
    first.focus()
    page.keyboard.press("Enter")
    row = message.locator(f".g-cite-item[data-raw-id='{raw}']")
    row.wait_for(state="visible")
    assert message.locator(".panel-head").get_attribute("aria-expanded") == "true"
    assert page.evaluate("document.activeElement.getAttribute('data-raw-id')") == raw
    assert (row.get_attribute("aria-label") or "").startswith("来源 1：")

    # Enter on the row opens the sheet (a modal dialog) with focus inside it
    page.keyboard.press("Enter")
    sheet = page.locator("#sheet")
    sheet.wait_for(state="visible")
    assert sheet.get_attribute("role") == "dialog" and sheet.get_attribute("aria-modal") == "true"
    assert page.evaluate("document.activeElement.id") == "sheet-close"
    assert page.locator("#app").get_attribute("aria-hidden") == "true"
    # Tab stays inside the sheet
    for _ in range(4):
        page.keyboard.press("Tab")
        assert page.evaluate("document.getElementById('sheet').contains(document.activeElement)")
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("document.getElementById('sheet').contains(document.activeElement)")
    # Escape closes it and gives focus back to the row
    page.keyboard.press("Escape")
    sheet.wait_for(state="hidden")
    assert page.evaluate("document.activeElement.getAttribute('data-raw-id')") == raw
    assert page.locator("#app").get_attribute("aria-hidden") is None

    # the close button works from the keyboard too
    page.keyboard.press("Enter")
    sheet.wait_for(state="visible")
    page.keyboard.press("Enter")  # focus is on 关闭
    sheet.wait_for(state="hidden")

    # the panel head is a button that says whether it is open
    head = message.locator(".panel-head")
    head.focus()
    page.keyboard.press("Enter")
    assert head.get_attribute("aria-expanded") == "false"
    assert head.get_attribute("aria-controls")


MINIPROGRAM_RENDERINGS = Path(__file__).resolve().parents[2] / "test-artifacts" / "miniprogram"


def test_axe_finds_no_serious_violation_in_the_mini_program_renderings(
    browser: Any, axe_source: str
) -> None:
    """The HTML renderings the simulator tests write of every state of <g-cite-answer>
    (clients/miniprogram/test, `make test-miniprogram`), with the component's own WXSS.
    The mini program has no dark palette (app.json does not opt into WeChat's dark mode),
    so they are checked in light only."""
    files = sorted(MINIPROGRAM_RENDERINGS.glob("*.html"))
    if not files:
        pytest.skip("no mini program renderings: run `make test-miniprogram` first")
    context = browser.new_context(viewport=VIEWPORT, bypass_csp=True)
    try:
        page = context.new_page()
        page.set_default_timeout(HANG_GUARD_MS)
        problems: list[str] = []
        for file in files:
            page.goto(file.as_uri())
            problems += axe_problems(page, axe_source, file.name)
        assert problems == [], "\n".join(problems)
    finally:
        context.close()
