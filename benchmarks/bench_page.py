"""H5 page rendering benchmark (issue 17, item 5). Run on demand, not in the test suite::

    .venv/bin/python benchmarks/bench_page.py [--rounds 3]

The real chat service (uvicorn on 127.0.0.1, the bundled sample handbook) streams an answer the
OpenAI stand-in produces with no delay between tokens; Debian's Chromium (Playwright,
390x844) shows it on the page. For each workload, in the same page and the same run:

- **page**: send the question through the page's composer and time until the answer is
  marked done (every delta parsed, rendered as Markdown, the panel built);
- **read**: the same request, the same stream, read in the same page with ``fetch`` and a
  stream reader, nothing rendered (the baseline: what the network and the service cost).

Workloads: 1k, 4k and 8k one-character deltas of prose with citations (paragraphs of about
120 characters), and 1k, 4k and 8k four-character deltas of Markdown (headings, lists,
bold, a table, fenced code, citations in all of them). The figure that matters is the
page's extra cost per delta, ``(page - read) / deltas``: flat as the answer grows means
the work per delta does not depend on the answer's length. Medians of ``--rounds`` runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from support.openai_standin import OpenAIStandin, Script  # noqa: E402

PROSE = (
    "夜间巡更每一小时一次，必须走完三条线路的全部点位[C:1]。漏打卡视为该点位未巡查[C:2]，"
    "超过三次须参加复训[C:1][C:2]。巡更终端需在交班时充电并检查标签读数是否正常。\n\n"
)
MARKDOWN = (
    "## 巡更要点[C:1]\n\n"
    "夜间巡更**每 1 小时一次**[C:1]，注意：\n\n"
    "- 走完 **A、B、C 三条线路[C:1]**的全部点位\n"
    "- 使用 `NFC` 标签打卡，漏打卡视为*未巡查[C:1][C:2]*\n"
    "- ~~白天频次更高~~，夜间频次高于白天[C:2]\n\n"
    "| 项目 | 要求 |\n|:---|---|\n| 频次 | 每小时一次[C:1] |\n| 打卡 | **NFC 标签[C:2]** |\n\n"
    "```\npatrol --night --every 1h\n```\n\n"
)

READ_JS = """
async ([body]) => {
  const t0 = performance.now();
  const res = await fetch('/v1/chat-messages', {method: 'POST',
    headers: {'Content-Type': 'application/json', 'Authorization': 'Bearer bench'},
    body: JSON.stringify(body)});
  const reader = res.body.getReader();
  let bytes = 0;
  for (;;) { const r = await reader.read(); if (r.done) break; bytes += r.value.length; }
  return [performance.now() - t0, bytes];
}
"""

PAGE_JS = """
async ([question]) => {
  const before = document.querySelectorAll('.msg-bot').length;
  const input = document.getElementById('input');
  input.value = question;
  const t0 = performance.now();
  input.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true}));
  await new Promise((resolve) => {
    const check = () => {
      const bots = document.querySelectorAll('.msg-bot');
      if (bots.length > before && bots[before].getAttribute('data-done') === 'true') resolve();
      else setTimeout(check, 5);
    };
    check();
  });
  const t1 = performance.now();
  const bot = document.querySelectorAll('.msg-bot')[before];
  return [t1 - t0, bot.querySelectorAll('sup.g-cite').length, bot.innerText.length];
}
"""


def deltas(text: str, size: int, count: int) -> list[str]:
    whole = text * (count * size // len(text) + 2)
    return [whole[i * size : (i + 1) * size] for i in range(count)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_service(standin: OpenAIStandin, data_dir: Path) -> tuple[str, Any]:
    import uvicorn

    from gcite.cli.demo import SAMPLE_DIR
    from gcite.config import load_settings
    from gcite.knowledge import ingest_paths
    from gcite.service import create_app

    settings = load_settings(
        {
            "data_dir": str(data_dir),
            "dataset": "明湖大厦物业手册",
            "embed_backend": "use",
            "qdrant_url": "",
            "top_k": 5,
            "llm_base_url": standin.base_url,
            "llm_api_key": "sk-standin",
            "llm_model": "standin",
            "web_provider": "none",
            "allow_any_key": True,
            "ping_interval_s": 30.0,
        },
        environ={},
    )
    ingest_paths(sorted((SAMPLE_DIR / "handbook").glob("*.md")), settings=settings,
                 dataset=settings.knowledge.dataset)  # fmt: skip
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings), host="127.0.0.1", port=port, log_level="warning", lifespan="on"
        )
    )
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chromium", default=os.environ.get("GCITE_CHROMIUM", "/usr/bin/chromium"))
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    load = os.getloadavg()
    standin = OpenAIStandin().start()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        url, server = start_service(standin, Path(tmp))
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=args.chromium, args=["--no-sandbox", "--disable-gpu"]
            )
            context = browser.new_context(viewport={"width": 390, "height": 844})
            page = context.new_page()
            page.goto(url + "/")
            page.wait_for_selector("body[data-ready='true']")
            page.fill("#api-key", "bench")
            page.press("#api-key", "Tab")
            workloads = [("prose, 1-char deltas", PROSE, 1, n) for n in (1000, 4000, 8000)] + [
                ("Markdown, 4-char deltas", MARKDOWN, 4, n) for n in (1000, 4000, 8000)
            ]
            # warm-up: retrieval, the models and the page's code paths, not measured
            standin.push(Script(deltas=deltas(MARKDOWN, 4, 300), token_delay_s=0.0))
            page.evaluate(PAGE_JS, ["夜间巡更要打卡多少个点位？"])
            page.click("#new-chat")
            for name, text, size, count in workloads:
                script = deltas(text, size, count)
                page_ms: list[float] = []
                read_ms: list[float] = []
                for round_ in range(args.rounds):
                    body = {"inputs": {}, "query": "夜间巡更要打卡多少个点位？", "user": "bench",
                            "response_mode": "streaming", "conversation_id": ""}  # fmt: skip
                    # alternate which one goes first, so drift in the load hits both alike
                    for which in ("read", "page") if round_ % 2 == 0 else ("page", "read"):
                        standin.push(Script(deltas=script, token_delay_s=0.0))
                        if which == "read":
                            read_ms.append(page.evaluate(READ_JS, [body])[0])
                            continue
                        took, sups, chars = page.evaluate(PAGE_JS, ["夜间巡更要打卡多少个点位？"])
                        assert sups > 0 and chars > 0, "the answer was not rendered"
                        page_ms.append(took)
                        page.click("#new-chat")
                row = {
                    "workload": name,
                    "deltas": count,
                    "chars": sum(len(d) for d in script),
                    "read": statistics.median(read_ms),
                    "page": statistics.median(page_ms),
                }
                row["extra_per_delta_us"] = (row["page"] - row["read"]) / count * 1000
                rows.append(row)
                print(
                    f"{name:26} {count:>5} deltas {row['chars']:>6} chars  "
                    f"read {row['read']:8.0f} ms  page {row['page']:8.0f} ms  "
                    f"ratio {row['page'] / row['read']:5.2f}  "
                    f"page/delta {row['page'] / count * 1000:7.1f} µs  "
                    f"extra/delta {row['extra_per_delta_us']:7.1f} µs",
                    flush=True,
                )
            browser.close()
        server.should_exit = True
    standin.stop()
    print(
        f"\nmachine: {platform.machine()} {platform.processor() or ''} nproc={os.cpu_count()}"
        f" python {platform.python_version()}; load before {load[0]:.2f} / {load[1]:.2f} /"
        f" {load[2]:.2f}; rounds {args.rounds}"
    )


if __name__ == "__main__":
    main()
