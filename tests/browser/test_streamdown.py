"""A stock Dify client's Markdown renderer on gcite's ``numbers`` citation style, in Chromium.

Dify's chat web app (langgenius/webapp-conversation) renders every answer frame with
``streamdown`` (``<Streamdown>{content}</Streamdown>``); the npm package, React and esbuild are
pinned in tests/browser/package.json and bundled here (``streamdown/entry.mjs``). The stream
comes from the real service (uvicorn on loopback, an app key with ``citation_style =
"numbers"``), the model is the OpenAI stand-in writing ``[C:N]`` markers one character per
delta. The page reads the SSE bytes as a stock client does (``TextDecoder`` in stream mode,
``data:`` lines, ``answer`` appended per ``message`` event) and renders every frame.

The first test is the reason for the style's form: the forms a renderer could be given.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from browser.scenarios import HANG_GUARD_MS
from gcite.testing import live_service
from support.openai_standin import OpenAIStandin, Script

HERE = Path(__file__).resolve().parent
ESBUILD = HERE / "node_modules" / ".bin" / "esbuild"
QUESTION = "访客登记和监控中心备用钥匙的取用分别怎么办理？"
SUPERSCRIPT_DIGITS = "⁰¹²³⁴⁵⁶⁷⁸⁹"

KEY_DOC = """---
document_title: 监控中心值守规程
---

# 监控中心值守规程

监控中心备用钥匙存放在地下一层安保办公区的三号保险柜内，取用须两人在场并登记。
"""
VISITOR_DOC = """---
document_title: 访客登记办法
---

# 访客登记办法

访客进入大厦须在一层大堂服务台出示身份证件并登记，登记后领取临时门禁卡。
"""

# A stock client's stream reading (webapp-conversation's service/base.ts does the same: a
# streaming TextDecoder, lines split on "\n", JSON after "data: "), then one Streamdown
# render per answer frame. ``chunks``: the stream's bytes as base64 pieces.
CONSUME_JS = """
async ({chunks, render}) => {
  const decoder = new TextDecoder('utf-8');
  let buffer = '', answer = '', end = null, error = null;
  const frames = [];
  const handle = async (line) => {
    if (!line.startsWith('data: ')) return;
    const event = JSON.parse(line.slice(6));
    if (event.event === 'message') {
      answer += event.answer;
      frames.push(render ? await window.renderStreamdown(answer) : {text: answer});
    } else if (event.event === 'message_end') end = event;
    else if (event.event === 'error') error = event;
  };
  for (const piece of chunks) {
    const bytes = Uint8Array.from(atob(piece), (c) => c.charCodeAt(0));
    buffer += decoder.decode(bytes, {stream: true});
    const lines = buffer.split('\\n');
    buffer = lines.pop();
    for (const line of lines) await handle(line);
  }
  buffer += decoder.decode();
  for (const line of buffer.split('\\n')) await handle(line);
  return {answer, frames, end, error};
}
"""

# Every two-piece split of the same bytes, read as above: the distinct final answers.
SPLITS_JS = """
async (whole) => {
  const bytes = Uint8Array.from(atob(whole), (c) => c.charCodeAt(0));
  const answers = new Set();
  for (let cut = 0; cut <= bytes.length; cut++) {
    const decoder = new TextDecoder('utf-8');
    let text = '';
    for (const piece of [bytes.subarray(0, cut), bytes.subarray(cut)]) {
      text += decoder.decode(piece, {stream: true});
    }
    text += decoder.decode();
    let answer = '';
    for (const line of text.split('\\n')) {
      if (!line.startsWith('data: ')) continue;
      const event = JSON.parse(line.slice(6));
      if (event.event === 'message') answer += event.answer;
    }
    answers.add(answer);
  }
  return Array.from(answers);
}
"""


@pytest.fixture(scope="module")
def streamdown_bundle(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Streamdown + React bundled for the browser (development build: React's ``act``)."""
    if not ESBUILD.exists() or not (HERE / "node_modules" / "streamdown").is_dir():
        message = "streamdown not installed in tests/browser/node_modules: run `make browser`"
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(message + " — required in CI")
        pytest.skip(message)
    out = tmp_path_factory.mktemp("streamdown") / "streamdown.js"
    command = [str(ESBUILD), "streamdown/entry.mjs", "--bundle", "--format=iife"]
    command += ['--define:process.env.NODE_ENV="development"', f"--outfile={out}"]
    command += ["--external:mermaid"]  # loaded only for a mermaid code block: none here
    command += [
        "--log-level=error",
        *(f"--loader:.{ext}=empty" for ext in ("woff2", "woff", "ttf")),
    ]
    subprocess.run(command, cwd=HERE, check=True, timeout=600)
    return out.read_text(encoding="utf-8")


@dataclass
class Stock:
    """The service for stock clients: its URL and the stand-in model."""

    url: str
    standin: OpenAIStandin


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stock]:
    """The chat service on two small documents, with a ``numbers`` key and a ``markers`` key."""
    from gcite.config import ApiKey, Settings
    from gcite.knowledge import ingest_paths
    from gcite.service import create_app

    root = tmp_path_factory.mktemp("stock")
    docs = root / "docs"
    docs.mkdir()
    (docs / "key.md").write_text(KEY_DOC, encoding="utf-8")
    (docs / "visitor.md").write_text(VISITOR_DOC, encoding="utf-8")
    standin = OpenAIStandin().start()
    settings = Settings.from_keys(
        data_dir=root / "data",
        dataset="库",
        top_k=3,
        llm_base_url=standin.base_url,
        llm_model="standin",
        llm_api_key="sk-standin",
        ping_interval_s=30.0,
        app_keys=[
            ApiKey("stock-key", (), citation_style="numbers"),
            ApiKey("gcite-key", ()),
        ],
    )
    report = ingest_paths([docs], settings=settings, dataset="库")
    assert report.added == 2 and not report.failed
    try:
        with live_service(create_app(settings)) as url:
            yield Stock(url, standin)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        standin.stop()


def citing(request: dict[str, Any], *, fail_inside_marker: bool = False) -> Script:
    """Cite the last context block first and the first one twice, plus an id that names no
    chunk, one character per delta (every marker split across deltas)."""
    prompt = "\n".join(str(m.get("content")) for m in request.get("messages", []))
    ids = sorted(
        {int(part.split("]")[0]) for part in prompt.split("[C:")[1:] if part[:1].isdigit()}
    )
    assert len(ids) >= 2, prompt  # both documents answer the question
    first, last = str(ids[0]), str(ids[-1])
    text = (
        f"钥匙在三号保险柜[C:{last}]，取用须两人[C:{first}][C:{last}]在场[C:99]并登记[C:{first}]。"
    )
    if fail_inside_marker:
        text = f"钥匙在三号保险柜[C:{last}]，取用须两人[C:{first}"
        return Script.text(text, size=1, drop_after=len(text), token_delay_s=0.002)
    # spaced deltas make more frames (how many the service joins is up to the machine)
    return Script.text(text, size=1, token_delay_s=0.002)


def fetch_stream(stock: Stock, key: str) -> list[bytes]:
    """The raw SSE bytes of one streamed answer, in the pieces the network delivered."""
    payload = {"query": QUESTION, "inputs": {}, "response_mode": "streaming", "user": "u"}
    headers = {"Authorization": f"Bearer {key}"}
    with (
        httpx.Client(timeout=60) as client,
        client.stream("POST", stock.url + "/v1/chat-messages", json=payload, headers=headers) as r,
    ):
        assert r.status_code == 200
        return list(r.iter_raw())


@pytest.fixture(scope="module")
def sd_page(browser: Any, streamdown_bundle: str) -> Iterator[Any]:
    """One page with the bundle loaded (loading it takes seconds); each render replaces the
    last one."""
    context = browser.new_context(locale="zh-CN")
    page = context.new_page()
    page.set_default_timeout(HANG_GUARD_MS)
    page.set_content("<!doctype html><meta charset='utf-8'><title>streamdown</title><body></body>")
    page.add_script_tag(content=streamdown_bundle)
    try:
        yield page
    finally:
        context.close()


def numbers_in(text: str) -> list[int]:
    """The superscript display numbers of a rendered text, in order (``¹˒²`` -> [1, 2])."""
    out: list[int] = []
    digits = ""
    for ch in text + " ":
        if ch in SUPERSCRIPT_DIGITS:
            digits += str(SUPERSCRIPT_DIGITS.index(ch))
        elif digits:
            out.append(int(digits))
            digits = ""
    return out


def encoded(pieces: list[bytes]) -> list[str]:
    return [base64.b64encode(p).decode("ascii") for p in pieces]


def test_the_forms_a_renderer_could_get(sd_page: Any) -> None:
    """Why ``numbers`` is superscript digits: a split marker, a bracket number followed by a
    parenthesis and an unfinished bracket become links Streamdown blocks, a footnote shows
    raw until its definition (at the answer's end) arrives; superscripts stay text, in
    paragraphs, lists and tables alike."""

    def shown(text: str) -> str:
        rendered: dict[str, str] = sd_page.evaluate("t => window.renderStreamdown(t)", text)
        return rendered["text"]

    assert "[blocked]" in shown("共 24 个点位[C")  # the markers style on a stock client
    assert "[blocked]" in shown("共 24 个点位[C:1")
    assert "[blocked]" in shown("点位[1](见附件)")  # a `[1]` style meeting a parenthesis
    assert "[blocked]" in shown("点位[1")
    assert shown("点位[^1]。下一句") == "点位[^1]。下一句"  # a footnote before its definition
    assert shown("点位¹˒²（见附件）。") == "点位¹˒²（见附件）。"
    assert shown("- 巡检¹\n- 登记²˒³") == "巡检¹\n登记²˒³"
    table = shown("| 项目 | 说明 |\n|---|---|\n| 巡检¹ | 每两小时²˒³ |")
    assert "巡检¹" in table and "每两小时²˒³" in table and "[blocked]" not in table


def test_a_numbers_stream_renders_cleanly_in_every_frame(sd_page: Any, stock: Stock) -> None:
    stock.standin.responder = citing
    pieces = fetch_stream(stock, "stock-key")
    result = sd_page.evaluate(CONSUME_JS, {"chunks": encoded(pieces), "render": True})
    frames = result["frames"]
    assert frames and result["error"] is None
    for frame in frames:
        assert "[C:" not in frame["text"] and "[blocked]" not in frame["text"], frame["text"]
        assert "Blocked URL" not in frame["html"] and "<a" not in frame["html"], frame["html"]
        # each frame shows a start of the final answer: nothing shown is taken back
        assert result["answer"].startswith(frame["text"].rstrip())
    final = frames[-1]["text"]
    assert final == "钥匙在三号保险柜¹，取用须两人²˒¹在场并登记²。"
    resources = result["end"]["metadata"]["retriever_resources"]
    assert [r["position"] for r in resources] == [1, 2]
    assert sorted(set(numbers_in(final))) == [r["position"] for r in resources]
    first_seen = list(dict.fromkeys(numbers_in(final)))
    assert first_seen == [1, 2]  # numbered by first appearance, as the positions
    chunk_ids = [r["doc_metadata"]["chunk_id"] for r in resources]
    assert chunk_ids == result["end"]["metadata"]["gcite"]["cited_ids"]

    answers = sd_page.evaluate(SPLITS_JS, base64.b64encode(b"".join(pieces)).decode("ascii"))
    assert answers == [result["answer"]]  # the same final text at every byte split


def test_a_failed_numbers_stream_leaves_no_marker_behind(sd_page: Any, stock: Stock) -> None:
    stock.standin.responder = lambda request: citing(request, fail_inside_marker=True)
    pieces = fetch_stream(stock, "stock-key")
    result = sd_page.evaluate(CONSUME_JS, {"chunks": encoded(pieces), "render": True})
    assert result["error"] is not None  # the model's stream broke off inside a marker
    for frame in result["frames"]:
        assert "[C" not in frame["text"] and "[blocked]" not in frame["text"], frame["text"]
    assert result["frames"][-1]["text"] == "钥匙在三号保险柜¹，取用须两人"


def test_a_markers_key_still_gets_the_markers(sd_page: Any, stock: Stock) -> None:
    stock.standin.responder = citing
    pieces = fetch_stream(stock, "gcite-key")
    result = sd_page.evaluate(CONSUME_JS, {"chunks": encoded(pieces), "render": False})
    assert result["answer"].count("[C:") == 5
    assert json.dumps(result["end"]["metadata"]["retriever_resources"]) != "[]"
