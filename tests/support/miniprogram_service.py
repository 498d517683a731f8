"""The gcite chat service for the WeChat mini program tests (clients/miniprogram/test/).

Run as ``python -m support.miniprogram_service`` with ``tests/`` as the working
directory (the Node tests start it so). It builds, in a temporary directory, the
knowledge base of the bundled sample handbook plus test documents (a hostile title
and ``javascript:`` URL, a Word file, a document without a link), the offline web
folder plus a hostile page; starts the OpenAI stand-in answering scripted questions
with citation markers (:class:`MiniScenarios`), and the real service (uvicorn) on a
free loopback port. Then it prints one JSON line::

    {"url": "http://127.0.0.1:PORT", "keys": ["demo-visitor", ...]}

and, for every answer the stand-in gives, one line ``{"turn": {query, answer, cited}}``
(``cited``: role name -> raw chunk id), so a test knows which chunk each marker names.
It stops when its standard input closes (the test process ended or closed it).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from browser.scenarios import (
    WEB_PATROL,
    XSS_DOC,
    XSS_WEB,
    Scenarios,
    cut,
    find_chunk,
    parse_context,
)
from gcite.testing import live_service
from support.openai_standin import OpenAIStandin, Script

OFFICE_DOC = """---
document_title: 设备维保合同（Word 版）
source_file_url: https://files.minghu-tower.example/contracts/maintenance-2026.docx
---

# 设备维保合同

维保合同专用段落：电梯维保单位每月上门保养两次，故障报修后 30 分钟内到场。
"""

NO_URL_DOC = """---
document_title: 值班交接口述记录
---

# 值班交接

交接记录专用段落：夜班与早班在 7 点 30 分当面交接钥匙和对讲机，并在交接簿上签字。
"""

_print_lock = threading.Lock()


def emit(obj: dict[str, Any]) -> None:
    """One JSON line on stdout (thread-safe)."""
    with _print_lock:
        sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
        sys.stdout.flush()


class MiniScenarios(Scenarios):
    """The browser tests' scripted model plus the mini program's own questions."""

    def __call__(self, body: dict[str, Any]) -> Script:
        query, chunks = parse_context(body)
        script: Script | None = None
        cited: dict[str, str] = {}
        answer = ""
        if "维保合同" in query:
            office = find_chunk(chunks, "维保合同专用段落")
            plain = find_chunk(chunks, "交接记录专用段落")
            web = find_chunk(chunks, "轿厢也不会缺氧")
            parts = []
            if office:
                cited["office"] = office
                parts.append(f"电梯维保单位每月保养两次[C:{office}]。")
            if plain:
                cited["plain"] = plain
                parts.append(f"交班时当面交接钥匙并签字[C:{plain}]。")
            if web:
                cited["web"] = web
                parts.append(f"被困电梯时轿厢不会缺氧，应保持冷静[C:{web}]。")
            answer = "".join(parts) or "根据现有资料无法确定。"
            script = Script(deltas=cut(answer), token_delay_s=0.002)
        elif "中断" in query:
            rag = find_chunk(chunks, "点位")
            cited = {"rag": rag} if rag else {}
            answer = f"夜间巡更每 1 小时一次[C:{rag}]，必须走完全部点位，而且还要[C:{rag}]打卡。"
            script = Script(deltas=cut(answer), token_delay_s=0.002, drop_after=14)
        elif "表格格式" in query:
            # A Markdown answer: heading, list with emphasis, table; superscripts inside.
            rag = find_chunk(chunks, "点位")
            web = find_chunk(chunks, WEB_PATROL)
            cited = {"rag": rag, "web": web} if rag and web else {}
            answer = "根据现有资料无法确定。"
            if rag and web:
                answer = (
                    "## 巡更要点\n\n"
                    f"- **夜间**每 1 小时一次[C:{rag}]\n"
                    f"- 共 24 个点位[C:{rag}]，漏打卡要*补录*\n\n"
                    "| 班次 | 频次 |\n| --- | --- |\n"
                    f"| 夜间 | 1 小时[C:{web}] |\n"
                )
            script = Script(deltas=cut(answer), token_delay_s=0.002)
        elif "标签截断" in query:
            # The model's stream breaks right after the opening of a reasoning tag.
            answer = "<think"
            script = Script(deltas=[answer], drop_after=1)
        elif "思考" in query:
            rag = find_chunk(chunks, "点位")
            cited = {"rag": rag} if rag else {}
            answer = (
                "<think>用户问巡更点位，资料里写了 24 个点位[C:99]。</think>\n\n"
                f"共有 24 个巡更点位[C:{rag}]。"
            )
            script = Script(deltas=cut(answer), token_delay_s=0.002)
        elif "同名来源" in query:
            # Three passages of one document: three rows with the same title.
            marks = ("24 个巡更点位", "日间巡更每 2 小时", "A 线", "巡检终端", "巡更日报", "门窗")
            same = [c for c in sorted(chunks, key=int) if any(m in chunks[c] for m in marks)][:3]
            cited = {f"p{k}": cid for k, cid in enumerate(same)}
            answer = "".join(f"第 {k + 1} 条规定[C:{cid}]。" for k, cid in enumerate(same))
            script = Script(deltas=cut(answer), token_delay_s=0.002)
        elif query.startswith("逐字回答"):
            # A long answer in one-character deltas: paragraphs of 100 characters, a
            # citation in each.
            rag = find_chunk(chunks, "点位")
            n = int(query.split()[-1])
            cited = {"rag": rag} if rag else {}
            paragraphs = []
            while sum(len(p) for p in paragraphs) < n:
                paragraphs.append("巡" * 90 + (f"[C:{rag}]" if rag else "") + "。\n\n")
            answer = "".join(paragraphs)
            script = Script(deltas=list(answer))
        elif "你好" in query:
            answer = "你好！我是明湖大厦物业助手，有什么可以帮你？"
            script = Script(deltas=cut(answer), token_delay_s=0.002)
        if script is None:
            script = super().__call__(body)
            turn = self.turns[-1]
            emit({"turn": {"query": turn.query, "answer": turn.answer, "cited": turn.cited}})
            return script
        emit({"turn": {"query": query, "answer": answer, "cited": cited}})
        return script


def build(root: Path) -> tuple[Any, OpenAIStandin]:
    """Knowledge base, web folder, stand-in and the app (not yet served)."""
    from gcite.cli.demo import SAMPLE_DIR, page_config
    from gcite.config import ApiKey, load_settings
    from gcite.knowledge import ingest_paths
    from gcite.service import create_app

    kb = root / "kb"
    web = root / "web"
    shutil.copytree(SAMPLE_DIR / "handbook", kb)
    shutil.copytree(SAMPLE_DIR / "web", web)
    (kb / "99-injection.md").write_text(XSS_DOC, encoding="utf-8")
    (kb / "98-contract.md").write_text(OFFICE_DOC, encoding="utf-8")
    (kb / "97-handover.md").write_text(NO_URL_DOC, encoding="utf-8")
    (web / "injection.md").write_text(XSS_WEB, encoding="utf-8")
    standin = OpenAIStandin(responder=MiniScenarios()).start()
    data_dir = root / "data"
    data_dir.mkdir()
    (data_dir / "page.json").write_text(json.dumps(page_config(), ensure_ascii=False))
    settings = load_settings(
        {
            "data_dir": str(data_dir),
            "dataset": "明湖大厦物业手册",
            "llm_base_url": standin.base_url,
            "llm_api_key": "sk-standin",
            "llm_model": "standin",
            "web_provider": "offline",
            "web_dir": str(web),
            "web_count": 3,
            "top_k": 5,
            # The client tests script which chunks the model cites, so every chunk their
            # questions need must reach the model; relevance (calibrated on single questions,
            # docs/knowledge-base.md) is tested in tests/knowledge.
            "score_threshold": 0.0,
            # The first question loads the embedding model and indexes the web folder; on a
            # loaded machine that can outlast the default retrieval timeouts, and a source that
            # timed out would change the scripted answer. Speed is measured in benchmarks/.
            "kb_timeout_s": 60.0,
            "web_timeout_s": 60.0,
            "embed_backend": "use",
            "qdrant_url": "",
            "ping_interval_s": 30.0,
            "app_keys": [
                ApiKey("demo-visitor", ()),
                ApiKey("demo-ops", ("运维工程师",)),
                ApiKey("demo-security", ("安保主管",)),
            ],
            "allow_any_key": False,
        },
        environ={},
    )
    ingest_paths(sorted(kb.glob("*.md")), settings=settings, dataset=settings.knowledge.dataset)
    return create_app(settings), standin


def main() -> int:
    """Serve until standard input closes; 0 on a clean stop."""
    with tempfile.TemporaryDirectory(prefix="gcite-mp-") as tmp:
        app, standin = build(Path(tmp))
        try:
            with live_service(app) as url:
                emit({"url": url, "keys": ["demo-visitor", "demo-ops", "demo-security"]})
                sys.stdin.read()  # until EOF
        finally:
            standin.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
