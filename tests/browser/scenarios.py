"""Scripted pieces of the browser tests: hostile documents, the frame recorder, and
the scripted model (:class:`Scenarios`) that answers from the chunks it is given."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.openai_standin import OpenAIStandin, Script

#: Phone viewport of every browser test (CSS pixels).
VIEWPORT = {"width": 390, "height": 844}
HANG_GUARD_MS = 120_000
"""How long a page action or wait may take before it fails (milliseconds): a hang guard,
never a speed limit (an answer on a loaded machine can take tens of seconds)."""

XSS_TITLE = "<img src=x onerror=alert(1)>"
XSS_DOC = f"""---
document_title: "{XSS_TITLE}"
source_file_url: "javascript:alert(1)"
---

# 安全测试文档

注入测试专用段落：这份文档的标题是一段 HTML 代码，原文链接是 javascript 地址。
页面必须把标题当作纯文本显示，并且不能把这个地址变成可点击的链接。
"""
XSS_WEB = """---
title: "<b onmouseover=alert(2)>注入测试网页</b>"
url: "javascript:alert(2)"
site_name: "注入测试站"
published_date: "2025-10-01"
---

注入测试专用网页：这个网页的地址是 javascript 伪协议，页面只能把按钮显示为禁用。
"""

#: Installed before any page script: records, after every DOM change, the visible text of
#: every answer and the number of citation superscripts, so a test can check every
#: state the user could have seen (each state a frame could paint).
RECORDER_JS = """
(() => {
  window.__frames = [];
  const snap = () => {
    const answers = Array.from(document.querySelectorAll('.answer-text'));
    window.__frames.push(answers.map(a => a.innerText));
  };
  const start = () => {
    const target = document.getElementById('messages') || document.body;
    const options = {subtree: true, childList: true, characterData: true};
    new MutationObserver(snap).observe(target, options);
  };
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
"""

#: Question whose scripted answer is Markdown (heading, bold, list, table, link, code).
MARKDOWN_QUESTION = "夜间巡更有哪些要点？"
#: Question whose scripted answer cites two passages of the same document.
TWO_PASSAGES_QUESTION = "夜间和日间巡更的线路规定分别是什么？"
#: Question whose scripted answer is hostile Markdown.
HOSTILE_QUESTION = "恶意格式测试：巡更说明"
VERIFY_QUESTION = "空调不制冷多久能来人？"
#: Answered with a patrol sentence that gives no price: the verifier's second dimension.
NOT_ANSWERED_QUESTION = "巡更用的巡检终端买个新的多少钱？"


def markdown_answer(rag: str, web: str) -> str:
    """A Markdown answer citing ``rag`` and ``web`` inside every kind of inline context."""
    return (
        f"## 夜间巡更要点[C:{rag}]\n\n"
        f"夜间巡更**每 1 小时一次**[C:{rag}]，需要注意：\n\n"
        f"- 走完 **A、B、C 三条线路[C:{rag}]**的全部 24 个点位\n"
        f"- 使用 `NFC` 标签打卡，漏打卡视为*该点位未巡查[C:{rag}][C:{web}]*\n"
        f"- ~~白天频次更高~~，夜间巡检频次高于白天[C:{web}]\n\n"
        "| 项目 | 要求 |\n"
        "|:---|---|\n"
        f"| 频次 | 每小时一次[C:{rag}] |\n"
        f"| 打卡 | **NFC 标签[C:{rag}]** |\n\n"
        f"详见[巡检流程标准[C:{web}]](https://www.wenda-forum.example/patrol)。\n\n"
        "```\npatrol --night --every 1h\n```\n\n"
        f"> 超过 3 次漏打卡须复训[C:{rag}]。"
    )


def hostile_answer(cid: str) -> str:
    """Markdown a hostile model (or a poisoned document) could write."""
    return (
        f"恶意格式[C:{cid}]：[点我](javascript:alert('md1')) [再点](JaVaScRiPt:alert('md2')) "
        "[数据](data:text/html,<script>alert('md3')</script>) <javascript:alert('md4')> "
        "[引用式][bad] [引用式2][good] <https://ok.example/safe>\n\n"
        "[bad]: javascript:alert('md5')\n"
        "[good]: https://ok.example/ref\n\n"
        "<img src=x onerror=\"window.__pwned=1;alert('md6')\"> "
        "<svg onload=\"window.__pwned=2;alert('md7')\"></svg> "
        "&lt;script&gt;alert('md8')&lt;/script&gt; &#106;avascript:alert('md9')\n\n"
        "![图](javascript:alert('md10')) ![跟踪](TRACK_URL) "
        "![svg](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9ImFsZXJ0KDEpIi8+) "
        "[x](&#x6A;avascript:alert('md11'))\n"
    )


_BLOCK = re.compile(r"\[C:(\d+)\]\n(.*?)(?=\n\n\[C:\d+\]\n|\Z)", re.S)


def parse_context(body: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """From an OpenAI request body: (the user's question, {chunk id: content})."""
    messages = body.get("messages") or []
    query = str(messages[-1].get("content", "")) if messages else ""
    text = "\n".join(str(m.get("content", "")) for m in messages[:-1])
    return query, {m.group(1): m.group(2) for m in _BLOCK.finditer(text)}


#: A phrase only the saved web page on patrols has: the "web" role of the patrol answers is
#: that page's passage or nothing (never a knowledge-base passage that merely looks alike,
#: e.g. when the web search failed), so a test of the web row fails for the right reason.
WEB_PATROL = "夜间一小时一次"


def find_chunk(chunks: dict[str, str], *phrases: str) -> str | None:
    """The id of the first chunk (lowest id) whose content contains every phrase."""
    for cid in sorted(chunks, key=int):
        if all(p in chunks[cid] for p in phrases):
            return cid
    return None


def cut(text: str, sizes: tuple[int, ...] = (1, 3, 2, 5, 1, 4)) -> list[str]:
    """Cut ``text`` into deltas of cycling sizes, so markers are split at every offset."""
    out: list[str] = []
    i = 0
    n = 0
    while i < len(text):
        size = sizes[n % len(sizes)]
        out.append(text[i : i + size])
        i += size
        n += 1
    return out


@dataclass
class Turn:
    """What the stand-in answered to one question: the answer with markers and its chunks."""

    query: str
    answer: str
    chunks: dict[str, str]
    cited: dict[str, str] = field(default_factory=dict)  # role name -> raw id


class Scenarios:
    """The scripted model: answers each known question from the chunks it was given."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.lock = threading.Lock()
        self.track_url = "http://127.0.0.1:9/track.png"  # set to a URL of the live service

    def last(self, query: str) -> Turn:
        with self.lock:
            for turn in reversed(self.turns):
                if turn.query == query:
                    return turn
        raise AssertionError(f"the model was never asked {query!r}")

    def __call__(self, body: dict[str, Any]) -> Script:
        query, chunks = parse_context(body)
        cited: dict[str, str] = {}
        answer = "根据现有资料无法确定。"
        if query == MARKDOWN_QUESTION:
            rag = find_chunk(chunks, "24 个点位") or find_chunk(chunks, "点位")
            web = find_chunk(chunks, WEB_PATROL)
            if rag and web:
                cited = {"rag": rag, "web": web}
                answer = markdown_answer(rag, web)
        elif query == TWO_PASSAGES_QUESTION:
            patrol = [cid for cid in sorted(chunks, key=int) if "巡更" in chunks[cid]][:2]
            if len(patrol) == 2:
                cited = {"first": patrol[0], "second": patrol[1]}
                answer = f"夜间巡更走全部线路[C:{patrol[0]}]，日间巡更只走指定线路[C:{patrol[1]}]。"
        elif query.startswith(HOSTILE_QUESTION):
            cid = min(chunks, key=int) if chunks else "1"
            cited = {"any": cid}
            answer = hostile_answer(cid).replace("TRACK_URL", self.track_url)
        elif query == NOT_ANSWERED_QUESTION:
            rag = find_chunk(chunks, "巡检终端")
            if rag:
                cited = {"rag": rag}
                answer = f"巡更人员用巡检终端靠近 NFC 标签打卡[C:{rag}]。"
        elif "巡更" in query:
            rag = find_chunk(chunks, "24 个点位") or find_chunk(chunks, "点位")
            web = find_chunk(chunks, WEB_PATROL)
            if rag and web:
                cited = {"rag": rag, "web": web}
                answer = (
                    f"夜间巡更每 1 小时一次，必须走完 A、B、C 三条线路的全部 24 个点位[C:{rag}]。\n"
                    f"行业里也普遍是夜间巡检频次高于白天【C：{web}】，"
                    f"并使用 NFC 标签打卡[C:{rag}][C:{rag}]。"
                    f"漏打卡视为该点位未巡查［C:{rag}，{web}］，超过 3 次须复训[C:99]。"
                )
        elif "灭火" in query:
            fire = find_chunk(chunks, "手动火灾报警按钮")
            room = find_chunk(chunks, "会议中心服务台")
            web = find_chunk(chunks, "PASS")
            if fire and web:
                cited = {"fire": fire, "web": web}
                answer = (
                    f"发现火情先按下就近的手动报警按钮并拨打 6119[C:{fire}]。"
                    f"干粉灭火器按 PASS 四步法使用[c: {web}]。"
                )
                if room:
                    cited["room"] = room
                    answer += f"会议室内同样禁止明火[C:{room}]。"
        elif "注入" in query:
            doc = find_chunk(chunks, "注入测试专用段落")
            web = find_chunk(chunks, "注入测试专用网页")
            if doc:
                cited = {"doc": doc}
                answer = f"这是一份注入测试文档[C:{doc}]。模型输出<img src=x onerror=alert(3)>。"
                if web:
                    cited["web"] = web
                    answer += f"还有一个注入测试网页[C:{web}]。"
        elif query == VERIFY_QUESTION:
            faults = find_chunk(chunks, "30 分钟内到场")
            other = next(
                (c for c in sorted(chunks, key=int) if "故障" not in chunks[c] and c != faults),
                None,
            )
            if faults and other:
                cited = {"right": faults, "wrong": other}
                answer = (
                    f"空调不制冷属于二级故障，物业须在 30 分钟内到场[C:{faults}]。"
                    f"空调不制冷时物业须在 5 分钟内到场[C:{other}]。"
                )
        elif "备用钥匙" in query:
            doc = find_chunk(chunks, "电子钥匙柜")
            if doc:
                cited = {"doc": doc}
                answer = f"备用钥匙存放在 B1 安保办公区的电子钥匙柜第 3 格[C:{doc}]。"
        with self.lock:
            self.turns.append(Turn(query=query, answer=answer, chunks=chunks, cited=cited))
        return Script(deltas=cut(answer), token_delay_s=0.004)


@dataclass
class Live:
    """The running service for the browser tests: ``url`` with the demo identities,
    ``plain_url`` the same service without ``page.json`` (the page asks for a key) and
    without the web."""

    url: str
    plain_url: str
    standin: OpenAIStandin
    scenarios: Scenarios
    data_dir: Path
