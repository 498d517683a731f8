"""Markdown answers on the H5 page (issue 17; citation-markers.md §7), in a real Chromium
against the real service, the model being the scripted OpenAI stand-in whose deltas cut
markers and Markdown syntax at every offset (``scenarios.cut``).

Covers: Markdown with superscripts inside (no frame shows a marker or a control sequence
the final rendering consumed); no line starting with a superscript or the punctuation
after it; the incomplete-answer state; Enter while streaming; restore after reload;
Chinese messages for server errors; accessible labels; dark mode; copy and retry;
hostile Markdown (answers and titles); the README screenshots.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from browser.scenarios import (
    HANG_GUARD_MS,
    HOSTILE_QUESTION,
    MARKDOWN_QUESTION,
    TWO_PASSAGES_QUESTION,
    VIEWPORT,
    Live,
)
from browser.test_page import DOCS_SCREENSHOTS, WEB_BG, ask, assert_frames_clean, style
from support.openai_standin import Script

pytestmark = pytest.mark.browser

#: Markdown syntax that the final rendering of MARKDOWN_QUESTION's answer consumes.
CONTROL = re.compile(r"\*\*|~~|\]\(|`|\||(^|\n)\s*(#|[-*+] |\d+\. |>)|\[C:|【C|［C")


def frames_of(page: Any) -> list[str]:
    return [text for frame in page.evaluate("window.__frames") for text in frame]


def test_markdown_answer_with_citations_inside(page: Any, live: Live, artifacts: Path) -> None:
    message = ask(page, MARKDOWN_QUESTION)
    turn = live.scenarios.last(MARKDOWN_QUESTION)
    assert set(turn.cited) == {"rag", "web"}, f"retrieval did not bring both sources: {turn}"
    assert_frames_clean(page)
    frames = frames_of(page)
    assert len(frames) > 20, "the answer was not streamed"
    for text in frames:
        assert not CONTROL.search(text), f"a frame showed Markdown syntax: {text!r}"
    answer = message.locator(".answer-text")
    # Markdown structure
    assert answer.locator("h2").count() == 1
    assert answer.locator("ul > li").count() == 3
    assert answer.locator("table th").all_inner_texts() == ["项目", "要求"]
    assert answer.locator("table tbody tr").count() == 2
    assert answer.locator("del").inner_text() == "白天频次更高"
    assert answer.locator("pre code").inner_text() == "patrol --night --every 1h"
    assert answer.locator("code").first.inner_text() == "NFC"
    assert answer.locator("blockquote").count() == 1
    # superscripts inside heading, bold, italics, table cell, link text
    for where in ("h2", "li strong", "li em", "td strong", "a", "blockquote"):
        assert answer.locator(f"{where} sup.g-cite").count() >= 1, where
    link = answer.locator("a.md-link")
    assert link.get_attribute("href") == "https://www.wenda-forum.example/patrol"
    assert link.get_attribute("rel") == "noopener noreferrer"
    # idMap numbering and accessible labels "引用 N：<标题>"
    rag, web = turn.cited["rag"], turn.cited["web"]
    sups = answer.locator("sup.g-cite")
    pairs = sups.evaluate_all(
        "(els) => els.map((e) => [e.dataset.rawId, e.dataset.idx, e.getAttribute('aria-label')])"
    )
    assert {(r, i) for r, i, _ in pairs} == {(rag, "1"), (web, "2")}
    assert pairs[0] == [rag, "1", "引用 1：巡更路线与打卡规范 v2.1"]
    assert all(label.startswith(f"引用 {i}：") and len(label) > 5 for _, i, label in pairs)
    assert answer.locator("sup.g-cite-sep").count() == 1  # "[C:rag][C:web]" reads "¹,²"
    page.wait_for_timeout(100)
    page.screenshot(path=str(artifacts / "answer.png"))

    # the panel and both sheets, for the README
    message.locator(".panel-head").click()
    rows = message.locator(".g-cite-item")
    assert [r.get_attribute("data-raw-id") for r in rows.all()] == [rag, web]
    message.locator(".citation-panel").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "panel.png"))
    rows.nth(0).click()
    page.locator("#sheet").wait_for(state="visible")
    page.wait_for_timeout(250)
    page.screenshot(path=str(artifacts / "sheet-rag.png"))
    page.keyboard.press("Escape")
    rows.nth(1).click()
    page.locator("#sheet").wait_for(state="visible")
    # the web sheet is green throughout: header and button
    assert style(page.locator("#sheet-head"), "background-color") == WEB_BG
    assert style(page.locator("#sheet-foot .sheet-open"), "background-color") == "rgb(21, 128, 61)"
    page.wait_for_timeout(250)
    page.screenshot(path=str(artifacts / "sheet-web.png"))
    assert page.dialogs == []


LINE_CHECK_JS = """
(root) => {
  const bad = [];
  const overlap = (a, b) => a.top < b.bottom - 1 && b.top < a.bottom - 1;
  for (const sup of root.querySelectorAll('sup.g-cite')) {
    const s = sup.getBoundingClientRect();
    const block = sup.closest('p, li, td, th, h1, h2, h3, blockquote') || root;
    const before = document.createRange();
    before.setStart(block, 0);
    before.setEndBefore(sup);
    const rects = Array.from(before.getClientRects()).filter((r) => r.width > 0);
    const prev = rects[rects.length - 1];
    if (!prev || !overlap(prev, s)) bad.push('starts a line: ' + sup.dataset.idx);
    const next = sup.nextSibling;
    if (next && next.nodeType === 3 && /^[。，、；：！？）,.;:!?]/.test(next.data)) {
      const after = document.createRange();
      after.setStart(next, 0);
      after.setEnd(next, 1);
      const p = after.getBoundingClientRect();
      if (!overlap(p, s)) bad.push('punctuation starts a line after ' + sup.dataset.idx);
    }
  }
  return bad;
}
"""


def test_no_line_starts_with_a_superscript_or_its_punctuation(page: Any, live: Live) -> None:
    sentence = (
        "夜间巡更每一小时一次，必须走完全部点位[C:1]。漏打卡视为未巡查[C:2]，须复训[C:1][C:2]。"
    )
    answer = "".join(sentence.replace("全部", "全部" + "甲" * k) for k in range(12))
    live.standin.push(Script.text(answer, size=3))
    message = ask(page, "夜间巡更要打卡多少个点位？")
    root = message.locator(".answer-text")
    assert root.locator("sup.g-cite").count() == 48
    problems: list[str] = []
    for width in range(300, 391, 3):
        page.set_viewport_size({"width": width, "height": 844})
        problems += [f"{width}px {p}" for p in root.evaluate(LINE_CHECK_JS)]
    assert problems == []
    page.set_viewport_size(VIEWPORT)


def sse(*events: dict[str, Any]) -> str:
    return "".join("data: " + json.dumps(e, ensure_ascii=False) + "\n\n" for e in events)


def test_incomplete_answer_is_marked_and_shows_no_marker(page: Any, live: Live) -> None:
    """A stream that ends without message_end (a proxy cut it): the answer is marked
    incomplete, the dangling "[C:" is not shown, 重试 is offered."""
    body = sse(
        {"event": "message", "conversation_id": "", "answer": "半截"},
        {"event": "message", "answer": "回答[C:"},
    )
    page.route(
        "**/v1/chat-messages",
        lambda route: route.fulfill(status=200, content_type="text/event-stream", body=body),
    )
    message = ask(page, "夜间巡更要打卡多少个点位？")
    assert message.get_attribute("data-incomplete") == "true"
    assert message.locator(".answer-text").inner_text().strip() == "半截回答"
    status = message.locator(".answer-status")
    assert status.inner_text().startswith("回答不完整")
    assert message.locator(".answer-retry").inner_text() == "重试"
    for text in frames_of(page):
        assert "[C" not in text, text
    assert message.locator(".answer-actions").count() == 0


def test_message_replace_shows_only_the_new_answer(page: Any) -> None:
    """Output moderation (Dify's message_replace): the streamed Markdown is replaced by
    the new answer, rendered once, with no leftover of the old one."""
    body = sse(
        {"event": "message", "conversation_id": "", "answer": "## 旧的"},
        {"event": "message", "answer": "回答\n\n- 第一条[C:1]\n- 第二"},
        {"event": "message_replace", "answer": "**新的**回答[C:2]。"},
        {"event": "message_end", "id": "m1", "metadata": {}},
    )
    page.route(
        "**/v1/chat-messages",
        lambda route: route.fulfill(status=200, content_type="text/event-stream", body=body),
    )
    message = ask(page, "夜间巡更要打卡多少个点位？")
    page.wait_for_timeout(100)  # a frame scheduled before the replacement must not paint
    answer = message.locator(".answer-text")
    assert answer.inner_text().replace("\u2060", "").strip() == "新的回答1。"
    assert answer.locator("strong").inner_text() == "新的"
    assert answer.locator("h2, li").count() == 0


def test_enter_while_streaming_queues_the_question(page: Any, live: Live) -> None:
    live.standin.push(Script(deltas=["夜间巡更", *["每小时一次。"] * 40], token_delay_s=0.03))
    page.fill("#input", "夜间巡更要打卡多少个点位？")
    page.press("#input", "Enter")
    first = page.locator(".msg-bot").first
    page.wait_for_function(
        "() => document.querySelector('.msg-bot .answer-text').innerText.length > 8"
    )
    page.fill("#input", "大厦食堂周五的特价菜是什么？")
    page.press("#input", "Enter")
    hint = page.locator("#queue-hint")
    assert hint.is_visible() and "大厦食堂周五的特价菜是什么？" in hint.inner_text()
    assert page.input_value("#input") == ""
    assert page.locator("#send").get_attribute("aria-label") == "停止"
    first.locator("xpath=self::*[@data-done='true']").wait_for()
    assert first.locator(".answer-text").inner_text().count("每小时一次") == 40  # not stopped
    second = page.locator(".msg-bot").nth(1)
    second.locator("xpath=self::*[@data-done='true']").wait_for()
    assert second.locator(".answer-text").inner_text().strip() == "根据现有资料无法确定。"
    assert page.locator(".msg-user").all_inner_texts() == [
        "夜间巡更要打卡多少个点位？",
        "大厦食堂周五的特价菜是什么？",
    ]
    assert not hint.is_visible()


def test_conversation_is_restored_after_reload(page: Any, live: Live) -> None:
    message = ask(page, MARKDOWN_QUESTION)
    before_text = message.locator(".answer-text").inner_text()
    before_sups = message.locator("sup.g-cite").evaluate_all(
        "(els) => els.map((e) => [e.dataset.rawId, e.dataset.idx, e.getAttribute('aria-label')])"
    )
    ask(page, "大厦食堂周五的特价菜是什么？")
    page.reload()
    page.wait_for_selector("body[data-ready='true']")
    assert page.locator(".msg-user").all_inner_texts() == [
        MARKDOWN_QUESTION,
        "大厦食堂周五的特价菜是什么？",
    ]
    restored = page.locator(".msg-bot").first
    assert restored.get_attribute("data-restored") == "true"
    assert restored.locator(".answer-text").inner_text() == before_text
    sups = restored.locator("sup.g-cite").evaluate_all(
        "(els) => els.map((e) => [e.dataset.rawId, e.dataset.idx, e.getAttribute('aria-label')])"
    )
    assert sups == before_sups
    restored.locator(".panel-head").click()
    titles = restored.locator(".g-cite-item-title").all_inner_texts()
    assert titles[0] == "巡更路线与打卡规范 v2.1" and len(titles) == 2
    restored.locator(".g-cite-item").nth(1).click()
    page.locator("#sheet").wait_for(state="visible")
    assert style(page.locator("#sheet-head"), "background-color") == WEB_BG
    page.keyboard.press("Escape")
    # the next question continues the restored conversation
    with page.expect_request("**/v1/chat-messages") as request:
        ask(page, "那周四呢？")
    assert request.value.post_data_json["conversation_id"]
    # a new conversation is not restored
    page.click("#new-chat")
    page.reload()
    page.wait_for_selector("body[data-ready='true']")
    assert page.locator(".msg").count() == 0


SERVER_ERRORS = [
    (400, {"code": "invalid_param", "message": "query is required.", "status": 400}),
    (404, {"code": "not_found", "message": "Conversation Not Exists.", "status": 404}),
    (413, {"code": "request_too_large", "message": "Request body too large.", "status": 413}),
    (500, {"code": "internal_server_error", "message": "Internal Server Error", "status": 500}),
    (502, "<html><body>Bad Gateway</body></html>"),
    (503, "Service Unavailable"),
    (200, "event-stream:" + sse({"event": "error", "code": "completion_request_error",
                                 "message": "APIConnectionError: Connection.", "status": 400})),
    (200, "event-stream:" + sse({"event": "error", "code": "weird_new_code",
                                 "message": "Something English went wrong", "status": 500})),
]  # fmt: skip


@pytest.mark.parametrize(("status", "payload"), SERVER_ERRORS)
def test_server_errors_are_chinese(page: Any, status: int, payload: Any) -> None:
    def reply(route: Any) -> None:
        if isinstance(payload, dict):
            route.fulfill(status=status, content_type="application/json", body=json.dumps(payload))
        elif payload.startswith("event-stream:"):
            route.fulfill(
                status=200, content_type="text/event-stream", body=payload[len("event-stream:") :]
            )
        else:
            route.fulfill(status=status, content_type="text/html", body=payload)

    page.route("**/v1/chat-messages", reply)
    message = ask(page, "夜间巡更要打卡多少个点位？")
    text = message.locator(".answer-status.is-error").inner_text().replace("重试", "")
    assert re.search(r"[\u4e00-\u9fff]{4}", text)
    assert not re.search(r"[A-Za-z]", text.replace("API Key", "")), text


def test_model_error_from_the_real_service_is_chinese(page: Any, live: Live) -> None:
    live.standin.push(Script(status=500))
    message = ask(page, "夜间巡更要打卡多少个点位？")
    text = message.locator(".answer-status.is-error").inner_text()
    assert text.startswith("模型服务暂时不可用，请稍后重试"), text


def test_dark_mode_follows_the_system(browser: Any, live: Live, artifacts: Path) -> None:
    context = browser.new_context(
        viewport=VIEWPORT, is_mobile=True, has_touch=True, color_scheme="dark"
    )
    try:
        page = context.new_page()
        page.set_default_timeout(HANG_GUARD_MS)
        page.goto(live.url + "/")
        page.wait_for_selector("body[data-ready='true']")
        message = ask(page, MARKDOWN_QUESTION)
        background = style(page.locator("body"), "background-color")
        bubble = style(message.locator(".bubble"), "background-color")
        text = style(message.locator(".answer-text p").first, "color")

        def luminance(css: str) -> float:
            r, g, b = (int(v) for v in re.findall(r"\d+", css)[:3])
            return 0.2126 * r + 0.7152 * g + 0.0722 * b

        assert luminance(background) < 60 and luminance(bubble) < 60
        assert luminance(text) > 180
        assert luminance(style(message.locator("sup.g-cite").first, "color")) > 120
        page.screenshot(path=str(artifacts / "answer-dark.png"))
    finally:
        context.close()


def test_copy_and_retry_a_finished_answer(browser: Any, live: Live) -> None:
    context = browser.new_context(viewport=VIEWPORT, is_mobile=True, has_touch=True)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live.url)
    try:
        page = context.new_page()
        page.set_default_timeout(HANG_GUARD_MS)
        page.goto(live.url + "/")
        page.wait_for_selector("body[data-ready='true']")
        message = ask(page, MARKDOWN_QUESTION)
        copy = message.locator(".answer-copy")
        assert copy.get_attribute("aria-label") == "复制回答和来源"
        copy.click()
        page.wait_for_function(
            "() => document.querySelector('.answer-copy').textContent === '已复制'"
        )
        copied = page.evaluate("navigator.clipboard.readText()")
        # plain text: no Markdown syntax, citations as [N], then the numbered sources
        assert copied.startswith("夜间巡更要点[1]\n\n夜间巡更每 1 小时一次[1]，"), copied
        assert "该点位未巡查[1][2]" in copied and "[C:" not in copied and "**" not in copied
        _, sources = copied.split("\n\n来源：\n")
        lines = sources.split("\n")
        assert [line.split(" ")[0] for line in lines] == ["[1]", "[2]"]
        rows = message.locator(".g-cite-item-title").all_text_contents()
        assert [line.split(" ")[1] for line in lines] == [r.split(" ")[0] for r in rows]
        with page.expect_request("**/v1/chat-messages") as request:
            message.locator(".answer-regenerate").click()
        assert request.value.post_data_json["query"] == MARKDOWN_QUESTION
        again = page.locator(".msg-bot").nth(1)
        again.locator("xpath=self::*[@data-done='true']").wait_for()
        assert again.locator("sup.g-cite").count() == message.locator("sup.g-cite").count()
    finally:
        context.close()


def test_hostile_markdown_runs_nothing_and_links_only_http(page: Any, live: Live) -> None:
    live.scenarios.track_url = live.url + "/static/track.png?leak=1"
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    message = ask(page, HOSTILE_QUESTION)
    page.wait_for_timeout(300)  # give injected handlers the chance to fire
    answer = message.locator(".answer-text")
    hrefs = answer.locator("a").evaluate_all("(els) => els.map((e) => e.getAttribute('href'))")
    assert hrefs and all(re.match(r"^https?://", h) for h in hrefs), hrefs
    assert "https://ok.example/safe" in hrefs and "https://ok.example/ref" in hrefs
    assert (
        page.locator("a[href]").evaluate_all(
            "(els) => els.filter((e) => !/^https?:/i.test(e.getAttribute('href'))).length"
        )
        == 0
    )
    assert answer.locator("img, svg, script, iframe, object, embed").count() == 0
    text = answer.inner_text()
    assert "<img src=x onerror=" in text and "<svg onload=" in text
    assert "<script>alert('md8')</script>" in text  # entities decoded to text, not markup
    assert page.evaluate("window.__pwned") is None
    assert page.dialogs == []
    assert not [u for u in requested if "track.png" in u], "an answer image was loaded"
    # the panel's hostile titles (documents) stay text too
    message.locator(".panel-head").click()
    assert page.locator(".g-cite-item-title img").count() == 0
    assert page.dialogs == []


def test_reasoning_is_collapsed_above_the_answer(page: Any, live: Live) -> None:
    supported = page.evaluate(
        "import('/static/client/index.js').then((m) => { const p = new m.CitationParser();"
        " return p.feed('<think>想</think>答').concat(p.close())"
        ".some((s) => typeof s.reasoning === 'string'); })"
    )
    if not supported:
        pytest.skip("the JavaScript parser does not emit reasoning segments yet (grammar v2)")
    live.standin.push(Script.text("<think>先查巡更规定[C:1]</think>\n夜间每小时一次。", size=3))
    message = ask(page, "夜间巡更要打卡多少个点位？")
    details = message.locator("details.reasoning")
    assert details.locator("summary").inner_text() == "思考过程"
    assert details.get_attribute("open") is None
    assert message.locator(".answer-text").inner_text().strip() == "夜间每小时一次。"


def test_look_alike_sources_say_which_passage_they_are(page: Any, live: Live) -> None:
    message = ask(page, TWO_PASSAGES_QUESTION)
    turn = live.scenarios.last(TWO_PASSAGES_QUESTION)
    assert len(turn.cited) == 2, f"retrieval did not bring two patrol passages: {turn}"
    message.locator(".panel-head").click()
    rows = message.locator(".g-cite-item")
    titles = rows.locator(".g-cite-item-title").all_inner_texts()
    subtitles = rows.locator(".g-cite-item-subtitle").all_inner_texts()
    assert len(titles) == 2
    if titles[0] != titles[1] or subtitles[0] != subtitles[1]:
        pytest.fail(f"the two passages come from different documents: {titles} {subtitles}")
    hints = rows.locator(".g-cite-item-hint")
    assert hints.count() == 2
    first, second = hints.all_inner_texts()
    assert first != second and first.strip() and second.strip()
    for hint in (first, second):
        assert hint.startswith("第 ") or hint.startswith("“"), hint
    assert all(h.is_visible() for h in hints.all())  # visible text, not a tooltip


def test_identity_hint_is_visible_text(page: Any) -> None:
    hint = page.locator("#identity-hint")
    assert hint.is_visible() and hint.inner_text() == "访客：无角色：只能看到公开文档"
    page.locator("#identity").select_option(label="安保主管")
    assert hint.inner_text() == "安保主管：可看监控中心值守规程"


def test_nothing_is_cut_at_320_pixels(browser: Any, live: Live) -> None:
    context = browser.new_context(viewport={"width": 320, "height": 640}, is_mobile=True)
    try:
        page = context.new_page()
        page.set_default_timeout(HANG_GUARD_MS)
        page.goto(live.url + "/")
        page.wait_for_selector("body[data-ready='true']")
        message = ask(page, MARKDOWN_QUESTION)
        message.locator(".panel-head").click()
        cut = page.evaluate(
            "() => Array.from(document.querySelectorAll('#title, .g-cite-item-title,"
            " .g-cite-item-subtitle, .answer-text p, .answer-text li'))"
            ".filter((e) => e.scrollWidth > e.clientWidth + 1"
            " || getComputedStyle(e).textOverflow === 'ellipsis').map((e) => e.className || e.id)"
        )
        assert cut == []
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 320  # no sideways scrolling of the page (tables scroll inside)
    finally:
        context.close()


def test_copy_screenshots_for_docs(artifacts: Path) -> None:
    """Refresh docs/screenshots from this run's artifacts when GCITE_UPDATE_SCREENSHOTS=1."""
    import os

    if os.environ.get("GCITE_UPDATE_SCREENSHOTS") != "1":
        pytest.skip("set GCITE_UPDATE_SCREENSHOTS=1 to refresh docs/screenshots")
    DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for name in ("answer.png", "panel.png", "sheet-rag.png", "sheet-web.png", "answer-dark.png"):
        source = artifacts / name
        assert source.is_file(), f"{name} was not produced by this run"
        shutil.copyfile(source, DOCS_SCREENSHOTS / name)
