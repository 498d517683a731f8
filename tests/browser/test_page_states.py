"""What a phone user met on the H5 page: verification marks after a reload, following a
long answer to its end, reasoning shown without markers, a stream cut inside ``<think``,
the model's footnote definitions, a paste longer than the limit, list markers in the
sheet, the weak-support legend, the notice under an answer that may not answer, panel rows
redrawn from chunk metadata that came again."""

from __future__ import annotations

import json
import re
from typing import Any

from browser.scenarios import MARKDOWN_QUESTION, NOT_ANSWERED_QUESTION, VERIFY_QUESTION, Live
from browser.test_page import ask
from support.openai_standin import Script


def test_reload_keeps_the_verification_marks(page: Any, live: Live) -> None:
    message = ask(page, VERIFY_QUESTION)
    turn = live.scenarios.last(VERIFY_QUESTION)
    right, wrong = turn.cited["right"], turn.cited["wrong"]
    message.locator(f"sup.g-cite.is-weak[data-raw-id='{wrong}']").first.wait_for()
    assert message.locator(".weak-legend").is_visible()

    page.reload()
    page.wait_for_selector("body[data-ready='true']")
    restored = page.locator(".msg-bot[data-restored='true']").last
    weak = restored.locator(f"sup.g-cite[data-raw-id='{wrong}']").first
    assert "is-weak" in (weak.get_attribute("class") or "")
    assert weak.get_attribute("title") == "该来源未能直接支持这句话"
    assert restored.locator(".weak-legend").is_visible()
    restored.locator(".panel-head").click()
    assert "is-weak" in (
        restored.locator(f".g-cite-item[data-raw-id='{wrong}']").get_attribute("class") or ""
    )
    restored.locator(f".g-cite-item[data-raw-id='{right}']").click()
    mark = page.locator("#sheet-text mark.sheet-support")
    mark.wait_for()
    assert "30 分钟内到场" in mark.inner_text()
    page.keyboard.press("Escape")
    restored.locator(f".g-cite-item[data-raw-id='{wrong}']").click()
    assert page.locator("#sheet-weak").is_visible()


def test_an_answer_that_does_not_answer_gets_a_notice(page: Any, live: Live) -> None:
    message = ask(page, VERIFY_QUESTION)
    assert message.locator(".answer-notice").count() == 0  # it answers: no notice
    message = ask(page, NOT_ANSWERED_QUESTION)
    assert live.scenarios.last(NOT_ANSWERED_QUESTION).cited, "the patrol chunk was retrieved"
    notice = message.locator(".answer-notice")
    notice.wait_for()
    assert notice.inner_text() == "可能未回答所问的问题：“巡更用的巡检终端买个新的多少钱？”"
    assert notice.get_attribute("role") == "note"
    # the supported citation stays supported: the two dimensions are separate
    assert message.locator("sup.g-cite.is-weak").count() == 0

    page.reload()
    page.wait_for_selector("body[data-ready='true']")
    restored = page.locator(".msg-bot[data-restored='true']").last
    assert restored.locator(".answer-notice").inner_text().startswith("可能未回答所问的问题")


def at_bottom(page: Any) -> bool:
    return bool(
        page.evaluate(
            "() => { const b = document.getElementById('messages');"
            " return b.scrollHeight - b.scrollTop - b.clientHeight < 2; }"
        )
    )


def test_an_answer_in_large_pieces_is_followed_to_its_end(page: Any, live: Live) -> None:
    paragraph = "夜间巡更每 1 小时一次，必须走完全部线路并在每个点位打卡。\n\n"
    live.standin.push(Script(deltas=[paragraph * 12, paragraph * 12], token_delay_s=0.05))
    message = ask(page, "长回答一")
    assert message.locator(".answer-actions").is_visible()
    assert at_bottom(page)
    # with its source panel too
    ask(page, MARKDOWN_QUESTION)
    assert at_bottom(page)

    # scrolled up by the user while the answer streams: the page stays where the user is
    live.standin.push(Script(deltas=["长回答二"]))  # the follow-up rewrite of the question
    live.standin.push(Script(deltas=[paragraph] * 30, token_delay_s=0.03))
    page.fill("#input", "长回答二")
    page.press("#input", "Enter")
    last = page.locator(".msg-bot").last
    page.wait_for_function(
        "() => document.querySelector('.msg-bot:last-child .answer-text').innerText.length > 60"
    )
    page.evaluate("document.getElementById('messages').scrollTop = 0")
    last.locator("xpath=self::*[@data-done='true']").wait_for()
    assert page.evaluate("document.getElementById('messages').scrollTop") < 50


def test_reasoning_shows_no_markers_and_a_cut_think_tag_shows_nothing(
    page: Any, live: Live
) -> None:
    live.standin.push(Script(deltas=["<think>先查巡更规定[C:3]和【C：4】", "</think>", "答案。"]))
    message = ask(page, "有思考过程的问题")
    details = message.locator("details.reasoning")
    details.locator("summary").click()
    shown = details.locator(".reasoning-text").inner_text()
    assert "先查巡更规定" in shown
    assert not re.search(r"[\[【［]\s*[CcＣｃ]", shown), shown
    assert message.locator(".answer-text").inner_text().strip() == "答案。"

    page.click("#new-chat")  # no follow-up rewrite call takes the scripted answer
    live.standin.push(Script(deltas=["<think"], drop_after=1))
    message = ask(page, "思考标签被截断")
    assert "<think" not in message.locator(".answer-text").inner_text()
    assert "<think" not in message.inner_text()


def test_a_footnote_definition_line_stays_visible(page: Any, live: Live) -> None:
    footnote = "[^1]: 《中华人民共和国消防法》第十六条"
    live.standin.push(Script(deltas=["依据消防法[^1]。\n\n", footnote]))
    message = ask(page, "脚注")
    text = message.locator(".answer-text").inner_text()
    assert "[^1]: 《中华人民共和国消防法》第十六条" in text


def test_a_paste_longer_than_the_limit_is_announced(page: Any) -> None:
    hint = page.locator("#input-hint")
    assert not hint.is_visible()
    page.locator("#input").focus()
    page.evaluate(
        "() => { const dt = new DataTransfer(); dt.setData('text/plain', '巡'.repeat(2500));"
        " const input = document.getElementById('input');"
        " input.dispatchEvent(new ClipboardEvent('paste', {clipboardData: dt, bubbles: true,"
        " cancelable: true})); }"
    )
    assert hint.is_visible()
    assert "2000" in hint.inner_text() and "500" in hint.inner_text()
    assert hint.get_attribute("role") == "alert"


def test_the_sheet_shows_list_items_as_bullets(page: Any, live: Live) -> None:
    message = ask(page, MARKDOWN_QUESTION)
    turn = live.scenarios.last(MARKDOWN_QUESTION)
    content = turn.chunks[turn.cited["rag"]]
    message.locator(".panel-head").click()
    message.locator(f".g-cite-item[data-raw-id='{turn.cited['rag']}']").click()
    text = page.locator("#sheet-text").inner_text()
    assert re.search(r"(?m)^\s*- ", content), "the cited chunk holds a Markdown list"
    assert "• " in text
    assert not re.search(r"(?m)^\s*[-*+] ", text), text


def _code_node(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "event": "node_finished",
        "data": {"node_type": "code", "outputs": {"chunk_metadata": chunks}},
    }


def test_later_chunk_metadata_redraws_a_drawn_panel_row(page: Any) -> None:
    """chunk_metadata may come again once the text started (the stream contract: the last
    one wins). A row already drawn from the first one - same number, same id - shows what
    the last one says (icon, title, subtitle), and its sheet opens the last one's chunk."""
    rag = {
        "id": "1",
        "source_type": "rag",
        "document_title": "巡更路线与打卡规范 v2.1",
        "display_subtitle": "明湖大厦物业手册",
        "content": "夜间巡更每 1 小时一次。",
    }
    early = {"id": "2", "document_title": "待补全的来源", "content": "夜间巡检频次高于白天。"}
    web = {
        "id": "2",
        "source_type": "web",
        "document_title": "物业巡检流程标准是怎样的？",
        "display_subtitle": "问答社区 · 2025-08-12",
        "url": "https://www.wenda-forum.example/question/2871",
        "content": "行业里常见的做法是夜间巡检频次高于白天。",
    }
    body = "".join(
        "data: " + json.dumps(e, ensure_ascii=False) + "\n\n"
        for e in [
            {"event": "workflow_started", "conversation_id": "", "data": {}},
            _code_node([rag, early]),
            {"event": "message", "answer": "夜间巡更每小时一次[C:1]，夜间巡检频次高于白天[C:2]，"},
            {"event": "message", "answer": "两条都要遵守。"},
            _code_node([rag, web]),
            {"event": "message_end", "id": "m1", "metadata": {}},
        ]
    )
    page.route(
        "**/v1/chat-messages",
        lambda route: route.fulfill(status=200, content_type="text/event-stream", body=body),
    )
    message = ask(page, "夜间巡更要打卡多少个点位？")
    message.locator(".panel-head").click()
    rows = message.locator(".g-cite-item")
    assert [r.get_attribute("data-raw-id") for r in rows.all()] == ["1", "2"]
    second = rows.nth(1)
    assert second.get_attribute("data-source-type") == "web"
    assert second.locator("svg").get_attribute("data-icon") == "globe"
    assert second.locator(".g-cite-item-title").inner_text() == web["document_title"]
    assert second.locator(".g-cite-item-subtitle").inner_text() == web["display_subtitle"]
    second.click()
    page.locator("#sheet").wait_for(state="visible")
    assert page.locator("#sheet").get_attribute("data-source-type") == "web"
    assert page.locator("#sheet-subtitle").inner_text() == web["display_subtitle"]
    assert page.locator("#sheet-foot a.sheet-open").get_attribute("href") == web["url"]
