"""The H5 page in a real Chromium against the real service (issue 7, item 2).

Mobile design document §4 (streaming buffer, idMap), §5.1 (panel), §5.3 (sheet),
§6 (superscript style, not interactive). The model is the OpenAI stand-in scripted by
``conftest.Scenarios``; everything else (retrieval, merge node, SSE, the JS client, the
page) is the real thing.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest

from browser.scenarios import HANG_GUARD_MS, VERIFY_QUESTION, VIEWPORT, XSS_TITLE, Live
from gcite.stream.parser import CitationParser
from support.openai_standin import Script

pytestmark = pytest.mark.browser

RAW_MARKER = re.compile(r"[\[【［]\s*[CcＣｃ]\s*[:：]")
GRAY = "rgb(143, 149, 158)"
BLUE = "rgb(37, 99, 235)"
RAG_BG, RAG_FG = "rgb(239, 246, 255)", "rgb(37, 99, 235)"
# The seed's green (#16a34a) darkened to #15803d: text on it and on #f0fdf4 passes WCAG AA.
WEB_BG, WEB_FG = "rgb(240, 253, 244)", "rgb(21, 128, 61)"
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def ask(page: Any, question: str) -> Any:
    """Type ``question``, send it, wait until its answer is done; returns the bot message."""
    before = page.locator(".msg-bot").count()
    page.fill("#input", question)
    page.press("#input", "Enter")
    message = page.locator(".msg-bot").nth(before)
    message.locator("xpath=self::*[@data-done='true']").wait_for()
    return message


def expected(turn_answer: str, known: list[str]) -> tuple[str, list[tuple[str, int]]]:
    """What the user should finally see of a one-paragraph answer (superscripts as their
    digits, adjacent ones separated by ",") and the superscripts."""
    parser = CitationParser(known_ids=known)
    segments = parser.feed(turn_answer) + parser.close()
    text = ""
    sups: list[tuple[str, int]] = []
    previous_cite = False
    for seg in segments:
        if "text" in seg:
            text += seg["text"]  # type: ignore[typeddict-item]
            previous_cite = False
        else:
            text += ("," if previous_cite else "") + str(seg["idx"])  # type: ignore[typeddict-item]
            sups.append((seg["cite"], seg["idx"]))  # type: ignore[typeddict-item]
            previous_cite = True
    return text, sups


def read(locator: Any) -> str:
    """What the user reads in ``locator`` (word joiners removed)."""
    return str(locator.inner_text()).replace("\u2060", "")


def squeeze(text: str) -> str:
    return re.sub(r"[\s\u2060]", "", text)


def assert_frames_clean(page: Any) -> list[list[str]]:
    """No recorded state ever showed a raw marker, and an answer's text only ever grew
    (emitted text is final: nothing retracted or re-rendered)."""
    frames: list[list[str]] = page.evaluate("window.__frames")
    assert frames, "the recorder saw no DOM change"
    for frame in frames:
        for text in frame:
            assert not RAW_MARKER.search(text), f"raw marker visible: {text!r}"
    for earlier, later in itertools.pairwise(frames):
        for before, after in zip(earlier, later, strict=False):
            assert squeeze(after).startswith(squeeze(before)), (
                f"text was retracted: {before!r} -> {after!r}"
            )
    return frames


def style(locator: Any, prop: str) -> str:
    return str(locator.evaluate(f"(e) => getComputedStyle(e).getPropertyValue('{prop}')"))


def shot(page: Any, artifacts: Path, name: str) -> None:
    page.screenshot(path=str(artifacts / name))


def test_answer_panel_and_sheets(page: Any, live: Live, artifacts: Path) -> None:
    question = "夜间巡更要打卡多少个点位？"
    suggestions = page.locator(".suggestion")
    assert suggestions.count() == 3
    assert suggestions.nth(0).inner_text() == question
    suggestions.nth(0).click()
    message = page.locator(".msg-bot").first
    message.locator("xpath=self::*[@data-done='true']").wait_for()

    turn = live.scenarios.last(question)
    assert set(turn.cited) == {"rag", "web"}, f"retrieval did not bring both sources: {turn}"
    rag, web = turn.cited["rag"], turn.cited["web"]
    final_text, sups = expected(turn.answer, list(turn.chunks))
    frames = assert_frames_clean(page)
    answer = message.locator(".answer-text")
    assert read(answer) == final_text
    assert frames[-1][0].replace("\u2060", "") == final_text
    # numbering by first appearance; duplicates reuse the number; [C:99] is dropped
    shown = [
        (s.get_attribute("data-raw-id"), int(s.get_attribute("data-idx")), s.inner_text())
        for s in answer.locator("sup.g-cite").all()
    ]
    assert [(r, i) for r, i, _ in shown] == sups
    assert [t for _, i, t in shown] == [str(i) for _, i, _ in shown]
    # a citation right after another one gets a separator ("¹,²"), others do not
    parser = CitationParser(known_ids=list(turn.chunks))
    segments = parser.feed(turn.answer) + parser.close()
    adjacent = [
        "cite" in seg and k > 0 and "cite" in segments[k - 1] for k, seg in enumerate(segments)
    ]
    adjacent = [a for a, seg in zip(adjacent, segments, strict=True) if "cite" in seg]
    separated = answer.locator("sup.g-cite").evaluate_all(
        "(els) => els.map((e) => !!(e.previousElementSibling"
        " && e.previousElementSibling.classList.contains('g-cite-sep')))"
    )
    assert separated == adjacent and any(adjacent)
    # accessible labels: "引用 1：<标题>"
    labels = answer.locator("sup.g-cite").evaluate_all(
        "(els) => els.map((e) => e.getAttribute('aria-label'))"
    )
    assert labels[0] == "引用 1：巡更路线与打卡规范 v2.1", labels
    assert sups[0] == (rag, 1) and (web, 2) in sups
    assert "99" not in {r for r, _, _ in shown}

    # superscript style (§6.1) and not interactive (§6.2)
    sup = answer.locator("sup.g-cite").first
    assert style(sup, "color") == BLUE
    assert style(sup, "font-weight") == "600"
    assert style(sup, "vertical-align") == "super"
    assert style(sup, "pointer-events") == "none"
    assert style(sup, "padding-left") == "1px" and style(sup, "padding-top") == "0px"
    ratio = sup.evaluate(
        "(e) => parseFloat(getComputedStyle(e).fontSize)"
        " / parseFloat(getComputedStyle(e.parentElement).fontSize)"
    )
    assert ratio == pytest.approx(0.75)
    shot(page, artifacts, "plain-answer.png")

    # panel (§5.1): collapsed, "引用来源（2）" + 展开; expanded rows in idMap order, once each
    panel = message.locator(".citation-panel")
    head = panel.locator(".panel-head")
    assert panel.is_visible()
    assert "引用来源（2）" in head.inner_text() and "展开" in head.inner_text()
    assert not panel.locator(".panel-list").is_visible()
    head.click()
    assert "收起" in head.inner_text()
    rows = panel.locator(".g-cite-item")
    assert [r.get_attribute("data-raw-id") for r in rows.all()] == [rag, web]
    assert [r.locator(".g-cite-item-idx").inner_text() for r in rows.all()] == ["1", "2"]
    assert rows.nth(0).locator("svg").get_attribute("data-icon") == "file"
    assert rows.nth(1).locator("svg").get_attribute("data-icon") == "globe"
    for row in rows.all():
        assert style(row.locator(".g-cite-item-icon"), "color") == GRAY
        box = row.bounding_box()
        assert box is not None and box["height"] >= 44
    assert rows.nth(0).locator(".g-cite-item-title").inner_text() == "巡更路线与打卡规范 v2.1"
    assert rows.nth(0).locator(".g-cite-item-subtitle").inner_text() == "明湖大厦物业手册"
    assert rows.nth(1).locator(".g-cite-item-subtitle").inner_text() == "问答社区 · 2025-08-12"
    shot(page, artifacts, "plain-panel.png")

    # rag sheet (§5.3): blue header, https link, no Office notice for a web page URL
    rows.nth(0).click()
    sheet = page.locator("#sheet")
    sheet.wait_for(state="visible")
    sheet_head = page.locator("#sheet-head")
    assert style(sheet_head, "background-color") == RAG_BG
    assert style(sheet_head, "color") == RAG_FG
    assert page.locator("#sheet-title").inner_text() == "巡更路线与打卡规范 v2.1"
    assert page.locator("#sheet-subtitle").inner_text() == "明湖大厦物业手册"
    assert turn.chunks[rag][:20] in page.locator("#sheet-text").inner_text()
    link = page.locator("#sheet-foot a.sheet-open")
    assert link.get_attribute("href") == "https://wiki.minghu-tower.example/handbook/patrol-v2.1"
    assert link.get_attribute("rel") == "noopener noreferrer"
    assert not page.locator("#office-notice").is_visible()
    page.wait_for_timeout(250)  # let the slide-in transition settle for the screenshot
    shot(page, artifacts, "plain-sheet-rag.png")
    page.mouse.click(195, 60)  # the mask, above the sheet
    sheet.wait_for(state="hidden")

    # web sheet: green header, always a link for an https URL; closed by dragging down
    rows.nth(1).click()
    sheet.wait_for(state="visible")
    assert style(sheet_head, "background-color") == WEB_BG
    assert style(sheet_head, "color") == WEB_FG
    assert page.locator("#sheet-subtitle").inner_text() == "问答社区 · 2025-08-12"
    web_link = page.locator("#sheet-foot a.sheet-open")
    assert web_link.get_attribute("href").startswith("https://www.wenda-forum")
    assert not page.locator("#office-notice").is_visible()
    page.wait_for_timeout(250)
    shot(page, artifacts, "plain-sheet-web.png")
    grip = page.locator("#sheet-grip").bounding_box()
    assert grip is not None
    x, y = grip["x"] + grip["width"] / 2, grip["y"] + grip["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x, y + 120, steps=4)
    page.mouse.move(x, y + 320, steps=4)
    page.mouse.up()
    sheet.wait_for(state="hidden")
    assert page.dialogs == []


def test_office_notice_and_disabled_button(page: Any, live: Live) -> None:
    question = "发现火情怎么办？干粉灭火器怎么用？会议室能用明火吗？"
    message = ask(page, question)
    turn = live.scenarios.last(question)
    assert set(turn.cited) == {"fire", "web", "room"}, f"retrieval missed a source: {turn}"
    assert_frames_clean(page)
    message.locator(".panel-head").click()
    rows = message.locator(".g-cite-item")
    order = [r.get_attribute("data-raw-id") for r in rows.all()]
    _, sups = expected(turn.answer, list(turn.chunks))
    assert order == list(dict.fromkeys(r for r, _ in sups))
    sheet = page.locator("#sheet")

    message.locator(f".g-cite-item[data-raw-id='{turn.cited['fire']}']").click()
    sheet.wait_for(state="visible")
    assert page.locator("#sheet-title").inner_text() == "消防应急预案"
    assert page.locator("#office-notice").is_visible()
    href = page.locator("#sheet-foot a.sheet-open").get_attribute("href")
    assert href is not None and href.endswith(".pdf")
    page.keyboard.press("Escape")
    sheet.wait_for(state="hidden")

    # the meeting-room guide has an empty source_file_url
    message.locator(f".g-cite-item[data-raw-id='{turn.cited['room']}']").click()
    sheet.wait_for(state="visible")
    button = page.locator("#sheet-foot .sheet-open")
    assert button.evaluate("(e) => e.tagName") == "BUTTON"
    assert button.is_disabled()
    assert page.locator("#sheet-foot a").count() == 0
    assert not page.locator("#office-notice").is_visible()
    page.keyboard.press("Escape")
    sheet.wait_for(state="hidden")

    message.locator(f".g-cite-item[data-raw-id='{turn.cited['web']}']").click()
    sheet.wait_for(state="visible")
    assert style(page.locator("#sheet-head"), "background-color") == WEB_BG
    assert page.locator("#sheet-subtitle").inner_text() == "安全生活百科 · 2025-09-01"
    assert page.locator("#sheet-foot a.sheet-open").count() == 1


def test_document_strings_are_text_and_javascript_urls_are_not_links(page: Any, live: Live) -> None:
    question = "注入测试文档说了什么？"
    message = ask(page, question)
    turn = live.scenarios.last(question)
    assert set(turn.cited) == {"doc", "web"}, f"the injection sources were not retrieved: {turn}"
    assert_frames_clean(page)
    assert "模型输出<img src=x onerror=alert(3)>。" in message.locator(".answer-text").inner_text()
    message.locator(".panel-head").click()
    row = message.locator(f".g-cite-item[data-raw-id='{turn.cited['doc']}']")
    assert row.locator(".g-cite-item-title").inner_text() == XSS_TITLE
    row.click()
    page.locator("#sheet").wait_for(state="visible")
    assert page.locator("#sheet-title").inner_text() == XSS_TITLE
    button = page.locator("#sheet-foot .sheet-open")
    assert button.evaluate("(e) => e.tagName") == "BUTTON" and button.is_disabled()
    assert page.locator("#sheet-foot .sheet-hint").inner_text() == "原文链接不是网页地址，无法打开"
    page.keyboard.press("Escape")
    # a web page whose url is javascript: — shown disabled
    message.locator(f".g-cite-item[data-raw-id='{turn.cited['web']}']").click()
    page.locator("#sheet").wait_for(state="visible")
    assert style(page.locator("#sheet-head"), "background-color") == WEB_BG
    assert "<b onmouseover" in page.locator("#sheet-title").inner_text()
    assert page.locator("#sheet-foot .sheet-open").is_disabled()
    page.wait_for_timeout(200)  # give an injected handler the chance to fire
    assert page.locator("img").count() == 0
    assert page.locator("b").count() == 0
    assert page.locator("a[href^='javascript' i]").count() == 0
    assert page.dialogs == []


def test_unanswerable_question_has_no_panel(page: Any, live: Live) -> None:
    question = "大厦食堂周五的特价菜是什么？"
    with page.expect_response("**/v1/chat-messages") as first:
        message = ask(page, question)
    assert read(message.locator(".answer-text")) == "根据现有资料无法确定。"
    assert message.locator("sup.g-cite").count() == 0
    assert not message.locator(".citation-panel").is_visible()
    # the next question continues the same conversation
    conversation = re.search(r'"conversation_id":\s*"([^"]+)"', first.value.text())
    assert conversation is not None
    with page.expect_request("**/v1/chat-messages") as second:
        ask(page, "那周四呢？")
    assert second.value.post_data_json["conversation_id"] == conversation.group(1)


def test_stop_button_cancels_the_generation(page: Any, live: Live) -> None:
    live.standin.reset()
    live.standin.push(Script(deltas=["夜间巡更", *["每小时一次。"] * 200], token_delay_s=0.05))
    page.fill("#input", "夜间巡更要打卡多少个点位？")
    page.press("#input", "Enter")
    message = page.locator(".msg-bot").last
    page.wait_for_function(
        "() => document.querySelector('.msg-bot:last-child .answer-text').innerText.length > 8"
    )
    assert page.locator("#send").get_attribute("aria-label") == "停止"
    page.click("#send")
    message.locator("xpath=self::*[@data-done='true']").wait_for()
    assert message.locator(".answer-status").inner_text().startswith("已停止生成，回答不完整")
    # a stopped answer offers to answer again
    assert message.locator(".answer-status .answer-retry").inner_text() == "重新回答"
    assert page.locator("#send").get_attribute("aria-label") == "发送"
    text = message.locator(".answer-text").inner_text()
    assert text.startswith("夜间巡更每小时一次。") and text.count("每小时一次") < 200
    assert live.standin.wait_for_disconnect(1), "the model call was not cancelled"


def test_identity_picker_chooses_the_key(page: Any, live: Live) -> None:
    question = "监控中心的备用钥匙放在哪里？"
    select = page.locator("#identity")
    labels = [o.inner_text() for o in select.locator("option").all()]
    assert labels == ["访客", "运维工程师", "安保主管"]
    with page.expect_request("**/v1/chat-messages") as request:
        message = ask(page, question)
    assert request.value.headers["authorization"] == "Bearer demo-visitor"
    assert message.locator(".answer-text").inner_text().strip() == "根据现有资料无法确定。"
    assert not message.locator(".citation-panel").is_visible()
    assert "电子钥匙柜" not in "".join(live.scenarios.last(question).chunks.values())

    select.select_option(label="安保主管")
    assert "已切换身份：安保主管" in page.locator(".divider").inner_text()
    with page.expect_request("**/v1/chat-messages") as request:
        message = ask(page, question)
    assert request.value.headers["authorization"] == "Bearer demo-security"
    assert request.value.post_data_json["conversation_id"] == ""
    assert "电子钥匙柜第 3 格" in message.locator(".answer-text").inner_text()
    message.locator(".panel-head").click()
    titles = message.locator(".g-cite-item-title").all_inner_texts()
    assert titles == ["监控中心值守与应急联络（安保内部）"]


def test_model_failure_is_reported(page: Any, live: Live) -> None:
    live.standin.push(Script(status=500))
    message = ask(page, "夜间巡更要打卡多少个点位？")
    status = message.locator(".answer-status.is-error")
    assert status.is_visible()
    assert status.inner_text().startswith("模型服务暂时不可用，请稍后重试")
    live.standin.push(Script(deltas=["夜间巡更", "每 1 小时", "一次"], drop_after=2))
    message = ask(page, "夜间巡更要打卡多少个点位？")
    text = message.locator(".answer-status.is-error").inner_text().replace("重试", "")
    assert not re.search(r"[A-Za-z]", text), text
    assert_frames_clean(page)
    # the page still works afterwards
    message = ask(page, "大厦食堂周五的特价菜是什么？")
    assert message.locator(".answer-text").inner_text().strip() == "根据现有资料无法确定。"


def test_unreachable_service_is_reported_in_chinese_and_keeps_the_question(
    page: Any, live: Live
) -> None:
    """A send that cannot reach the service: a Chinese sentence (not the browser's
    "Failed to fetch"), the question back in the input, and a 重试 button that sends it."""
    question = "大厦食堂周五的特价菜是什么？"
    page.route("**/v1/chat-messages", lambda route: route.abort("connectionrefused"))
    message = ask(page, question)
    status = message.locator(".answer-status")
    assert status.is_visible()
    assert status.inner_text().startswith("无法连接服务，请检查网络后重试"), status.inner_text()
    assert not re.search(r"[A-Za-z]", status.inner_text().replace("重试", ""))
    assert page.input_value("#input") == question
    retry = message.locator(".answer-retry")
    assert retry.inner_text() == "重试"
    # the service is reachable again: 重试 sends the question once more
    page.unroute("**/v1/chat-messages")
    retry.click()
    answer = page.locator(".msg-bot").nth(1)
    answer.locator("xpath=self::*[@data-done='true']").wait_for()
    assert answer.locator(".answer-text").inner_text().strip() == "根据现有资料无法确定。"
    assert page.input_value("#input") == ""
    assert message.locator(".answer-retry").count() == 0
    assert page.locator(".msg-user").all_inner_texts() == [question, question]


def test_api_key_mode_without_identities(browser: Any, live: Live) -> None:
    context = browser.new_context(viewport=VIEWPORT, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        page.set_default_timeout(HANG_GUARD_MS)
        page.goto(live.plain_url + "/")
        page.wait_for_selector("body[data-ready='true']")
        assert not page.locator("#identity").is_visible()
        assert page.locator(".suggestion").count() == 0
        key_input = page.locator("#api-key")
        assert key_input.is_visible()
        key_input.fill("demo-security")
        key_input.press("Tab")  # commits the key (change event)
        question = "监控中心的备用钥匙放在哪里？"
        with page.expect_request("**/v1/chat-messages") as request:
            message = ask(page, question)
        assert request.value.headers["authorization"] == "Bearer demo-security"
        assert "电子钥匙柜第 3 格" in message.locator(".answer-text").inner_text()
        page.reload()
        page.wait_for_selector("body[data-ready='true']")
        assert page.locator("#api-key").input_value() == "demo-security"
    finally:
        context.close()


def test_security_headers_leave_the_page_working(browser: Any, live: Live) -> None:
    """The page's Content-Security-Policy blocks nothing the page needs (scripts, styles,
    inline SVG icons, the load-failure notice, same-origin fetches)."""
    context = browser.new_context(viewport=VIEWPORT, is_mobile=True, has_touch=True)
    context.add_init_script(
        "window.__csp = []; document.addEventListener('securitypolicyviolation',"
        " (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"
    )
    try:
        pg = context.new_page()
        pg.set_default_timeout(HANG_GUARD_MS)
        response = pg.goto(live.url + "/")
        assert response is not None
        headers = response.headers
        assert "content-security-policy" in headers and headers["x-frame-options"] == "DENY"
        pg.wait_for_selector("body[data-ready='true']")
        pg.locator(".suggestion").nth(0).click()
        pg.locator(".msg-bot").first.locator("xpath=self::*[@data-done='true']").wait_for()
        assert pg.locator(".msg-bot .answer-text").first.inner_text()
        assert pg.locator("svg").count() > 0  # the inline icons are there
        assert pg.evaluate("window.__csp") == []
    finally:
        context.close()


def test_sheet_highlights_the_supporting_sentence_and_marks_weak_support(
    page: Any, live: Live
) -> None:
    message = ask(page, VERIFY_QUESTION)
    turn = live.scenarios.last(VERIFY_QUESTION)
    assert set(turn.cited) == {"right", "wrong"}, f"retrieval missed the fault levels: {turn}"
    right, wrong = turn.cited["right"], turn.cited["wrong"]
    # the superscript of the unsupported citation is dotted, the supported one is not
    weak = message.locator(f"sup.g-cite[data-raw-id='{wrong}']")
    weak.first.wait_for()
    assert "is-weak" in (weak.first.get_attribute("class") or "")
    assert weak.first.get_attribute("title") == "该来源未能直接支持这句话"
    strong = message.locator(f"sup.g-cite[data-raw-id='{right}']").first
    assert "is-weak" not in (strong.get_attribute("class") or "")

    message.locator(".panel-head").click()
    sheet = page.locator("#sheet")
    message.locator(f".g-cite-item[data-raw-id='{right}']").click()
    sheet.wait_for(state="visible")
    mark = page.locator("#sheet-text mark.sheet-support")
    assert mark.count() == 1
    assert "30 分钟内到场" in mark.inner_text()
    assert not page.locator("#sheet-weak").is_visible()
    # the whole chunk text is still there, as text, around the highlight
    text = page.locator("#sheet-text").inner_text()
    assert (
        turn.chunks[right].replace("\n", "") in text.replace("\n", "") or mark.inner_text() in text
    )
    # scrolled so that the highlighted sentence is inside the visible part of the sheet
    page.wait_for_function(
        "() => { const b = document.getElementById('sheet-body');"
        " const m = document.querySelector('#sheet-text mark.sheet-support');"
        " const br = b.getBoundingClientRect(), mr = m.getBoundingClientRect();"
        " return mr.top >= br.top - 1 && mr.bottom <= br.bottom + 1; }"
    )
    page.keyboard.press("Escape")
    sheet.wait_for(state="hidden")

    message.locator(f".g-cite-item[data-raw-id='{wrong}']").click()
    sheet.wait_for(state="visible")
    assert page.locator("#sheet-weak").is_visible()
    assert page.locator("#sheet-weak").inner_text() == "该来源未能直接支持这句话"
    assert page.locator("#sheet-text mark").count() == 0
    assert "is-weak" in (
        message.locator(f".g-cite-item[data-raw-id='{wrong}']").get_attribute("class") or ""
    )
