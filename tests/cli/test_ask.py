"""``gcite ask``: local pipeline on the real knowledge base, --json, and --url against a
loopback Dify stand-in; user mistakes end as one line (issue 7, item 3)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.conftest import run_gcite
from cli.dify_standin import Reply, dify_answer, dify_standin
from gcite.cli.ask import ask, chat_url
from gcite.errors import ConfigError

RAW_MARKER = re.compile(r"[\[【［]\s*[CcＣｃ]\s*[:：]")
CHUNKS = [
    {
        "id": "1",
        "source_type": "rag",
        "document_title": "巡更路线与打卡规范 v2.1",
        "display_subtitle": "明湖大厦物业手册",
        "url": "https://wiki.example/patrol",
    },
    {
        "id": "2",
        "source_type": "web",
        "document_title": "物业巡检流程标准",
        "display_subtitle": "问答社区 · 2025-08-12",
        "url": "javascript:alert(1)",
    },
]


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(ask, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_local_answer_streams_superscripts_and_sources(demo_dir: Path) -> None:
    code, out, err = invoke("夜间巡更要打卡多少个点位？", "--data-dir", str(demo_dir))
    assert code == 0, err
    assert not RAW_MARKER.search(out)
    # the sentence that answers carries a superscript right after it
    assert re.search(r"24 个点位[^。¹²³⁴⁵⁶⁷⁸⁹]*[¹²³⁴⁵⁶⁷⁸⁹]", out), out
    _, _, sources = out.partition("\n来源：\n")
    assert sources, out
    assert re.match(r"1\. \[知识库\] 巡更路线与打卡规范 v2\.1 — 明湖大厦物业手册\n", sources)
    numbers = re.findall(r"^(\d+)\. \[", sources, re.M)
    assert numbers == [str(i) for i in range(1, len(numbers) + 1)]
    # under each source, the sentence of it that supports the answer (the verifier's)
    support = re.search(r"明湖大厦物业手册\n(?:   https?://\S+\n)?   依据：“([^”]+)”", sources)
    assert support, sources
    handbook = Path(__file__).resolve().parents[2] / "src/gcite/sample_data/handbook/01-patrol.md"
    assert support.group(1) in handbook.read_text("utf-8")  # verbatim from the cited chunk
    # the README question: the sentence with the count, its clauses joined by "；" kept
    # together with their citation, not the route list's sub-total ("共 12 个点位")
    assert "24 个点位" in support.group(1), support.group(1)


def test_roles_decide_what_is_retrieved(demo_dir: Path) -> None:
    question = "监控中心的备用钥匙放在哪里？"
    code, out, _ = invoke(question, "--data-dir", str(demo_dir))
    assert code == 0
    assert out.strip() == "根据现有资料无法确定"
    code, out, _ = invoke(question, "--data-dir", str(demo_dir), "--role", "安保主管")
    assert code == 0
    assert "电子钥匙柜第 3 格" in out
    assert "[知识库] 监控中心值守与应急联络（安保内部）" in out
    code, out, _ = invoke(question, "--data-dir", str(demo_dir), "--role", "运维工程师")
    assert "电子钥匙柜" not in out


def test_json_prints_every_event(demo_dir: Path) -> None:
    code, out, _ = invoke("干粉灭火器怎么用？", "--data-dir", str(demo_dir), "--json")
    assert code == 0
    events = [json.loads(line) for line in out.splitlines()]
    names = [e["event"] for e in events]
    assert names[0] == "workflow_started"
    assert {"node_finished", "message", "message_end", "workflow_finished"} <= set(names)
    code_nodes = [
        e for e in events if e["event"] == "node_finished" and e["data"]["node_type"] == "code"
    ]
    assert len(code_nodes) == 1
    metadata = code_nodes[0]["data"]["outputs"]["chunk_metadata"]
    assert {c["source_type"] for c in metadata} == {"rag"}  # no web source configured
    assert names.index("node_finished") < names.index("message")
    raw = "".join(e["answer"] for e in events if e["event"] == "message")
    assert re.search(r"\[C:\d+\]", raw), "the raw answer keeps its markers in --json"


def test_remote_answer_over_sse() -> None:
    answer = ["巡更要先登录终端[", "C:1]。行业", "做法见【C", "：2】，无效[C:9]", "结束[C:1]。"]
    with dify_standin() as server:
        server.replies.append(Reply(body=dify_answer(answer, CHUNKS), piece=5))
        code, out, err = invoke("巡更怎么做？", "--url", server.url, "--key", "app-secret")
    assert code == 0, err
    assert out.startswith("巡更要先登录终端¹。行业做法见²，无效结束¹。\n")
    assert (
        "1. [知识库] 巡更路线与打卡规范 v2.1 — 明湖大厦物业手册\n   https://wiki.example/patrol"
        in out
    )
    assert "2. [网页] 物业巡检流程标准 — 问答社区 · 2025-08-12\n" in out
    assert "javascript:" not in out
    request = server.requests[0]
    assert request["path"] == "/v1/chat-messages"
    assert request["headers"]["Authorization"] == "Bearer app-secret"
    assert request["json"]["response_mode"] == "streaming"
    assert request["json"]["query"] == "巡更怎么做？"


def test_remote_json_and_broken_stream() -> None:
    with dify_standin() as server:
        body = dify_answer(["第一句[C:1]。", "第二句"], CHUNKS, end=False)
        server.replies.append(Reply(body=body, piece=3, break_after=True))
        code, out, err = invoke("问题", "--url", server.url + "/v1")
        assert code == 1
        assert out.startswith("第一句¹。第二句\n")
        assert "回答中断" in err
        server.replies.append(Reply(body=dify_answer(["好[C:1]"], CHUNKS), piece=4))
        code, out, _ = invoke("问题", "--url", server.url, "--json")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [e["event"] for e in lines] == [
        "workflow_started",
        "ping",
        "node_finished",
        "message",
        "message_end",
    ]


def test_remote_error_event_exit_status() -> None:
    env = {"conversation_id": "c", "message_id": "m"}
    error = {
        "event": "error",
        **env,
        "status": 400,
        "code": "completion_request_error",
        "message": "Run failed: upstream down",
    }
    body = dify_answer(["部分回答[C"], CHUNKS, end=False)
    body += b"data: " + json.dumps(error).encode() + b"\n\n"
    with dify_standin() as server:
        server.replies.append(Reply(body=body))
        code, out, err = invoke("问题", "--url", server.url)
    assert code == 1
    assert "部分回答" in out
    # the client's sentence, never the provider's text
    assert "错误: 回答中断：模型服务暂时不可用，请稍后重试" in err and "upstream down" not in err


def test_remote_http_errors_are_one_line() -> None:
    body = json.dumps({"code": "unauthorized", "message": "Invalid API key", "status": 401})
    with dify_standin() as server:
        server.replies.append(
            Reply(status=401, body=body.encode(), content_type="application/json")
        )
        proc = run_gcite("ask", "问题", "--url", server.url, "--key", "wrong")
    assert proc.returncode == 1
    # the client's sentence for a refused key (gcite.stream.messages), not the server's text
    assert proc.stderr.strip() == (
        f"错误: API Key 无效或无权访问，请检查身份设置（{server.url}/v1/chat-messages）"
    )
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["ask", "   "], 1, "错误: 问题不能为空"),
        (["ask", "问题", "--url", "ftp://example.com"], 1, "错误: --url 必须是 http(s) 地址"),
        (["ask", "问题", "--url", "http://127.0.0.1:9"], 1, "错误: 无法连接服务"),
        (
            ["ask", "问题", "--url", "http://127.0.0.1:9", "--role", "安保主管"],
            2,
            "--role 只用于本地模式",
        ),
        (["ask", "-i", "问题"], 2, "错误: 对话模式（-i）不带问题参数"),
        (["ask", "--json"], 2, "错误: --json 需要给出问题"),
    ],
)
def test_user_mistakes_are_one_line(args: list[str], status: int, message: str) -> None:
    proc = run_gcite(*args)
    assert proc.returncode == status
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_knowledge_base_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}
    proc = run_gcite("ask", "问题", "--data-dir", str(tmp_path / "nothing"), env=env)
    assert proc.returncode == 1
    assert proc.stderr.startswith("错误: 知识库数据目录不存在")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_help_explains_trusted_roles() -> None:
    proc = run_gcite("ask", "--help")
    assert proc.returncode == 0
    assert "可信" in proc.stdout and "--url" in proc.stdout and "--json" in proc.stdout


def test_chat_url() -> None:
    assert chat_url("http://h:1") == "http://h:1/v1/chat-messages"
    assert chat_url("http://h:1/v1/") == "http://h:1/v1/chat-messages"
    assert chat_url("https://h/v1/chat-messages") == "https://h/v1/chat-messages"
    with pytest.raises(ConfigError):
        chat_url("javascript:alert(1)")


MARKDOWN_ANSWER = (
    "## 夜间巡更[C:1]\n\n"
    "夜间巡更**每 1 小时一次**[C:1][C:2]，注意：\n\n"
    "- 走完 *全部 24 个点位*[C:1]\n"
    "- 漏打卡视为未巡查[C:2]\n\n"
    "| 项目 | 要求 |\n|---|---|\n| 频次 | 每小时[C:1] |\n\n"
    "```\n[C:1] 代码保持原样\n```\n"
)


def _frames(answer: str, size: int) -> Any:
    body = dify_answer([answer[i : i + size] for i in range(0, len(answer), size)], CHUNKS)

    async def gen() -> Any:
        for i in range(0, len(body), 5):
            yield body[i : i + 5]

    return gen()


@pytest.mark.parametrize("size", [1, 3, 50])
def test_terminal_renders_markdown_with_superscripts_in_place(size: int) -> None:
    """rich's Markdown on a terminal: no Markdown syntax left, superscripts in place and
    separated when adjacent ("¹˒²", not "¹²"), code literal, whatever the deltas."""
    import asyncio
    import io

    from gcite.cli.ask import local_updates, print_answer

    out, err = io.StringIO(), io.StringIO()
    code = asyncio.run(
        print_answer(
            local_updates(_frames(MARKDOWN_ANSWER, size)), out, err, rich_markdown=True, width=70
        )
    )
    assert code == 0, err.getvalue()
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
    assert "\x1b[1m" in out.getvalue()  # bold and headings are styled
    assert "夜间巡更¹" in text
    assert "每 1 小时一次¹˒²，注意：" in text
    assert "• 走完 全部 24 个点位¹" in text and "• 漏打卡视为未巡查²" in text
    assert re.search(r"频次\s.*每小时¹", text)
    assert "[C:1] 代码保持原样" in text  # code is literal
    for syntax in ("**", "## ", "- 走完", "|---", "```"):
        assert syntax not in text, syntax
    assert "来源：" in text and "1. [知识库] 巡更路线与打卡规范 v2.1" in text


def test_piped_output_keeps_the_markdown_source_with_superscripts() -> None:
    import asyncio
    import io

    from gcite.cli.ask import local_updates, print_answer

    out, err = io.StringIO(), io.StringIO()
    assert asyncio.run(print_answer(local_updates(_frames(MARKDOWN_ANSWER, 1)), out, err)) == 0
    assert out.getvalue().startswith("## 夜间巡更¹\n\n夜间巡更**每 1 小时一次**¹˒²，注意：")


# -- conversations, Chinese help, the source list -----------------------------------------

CONVERSATION = re.compile(r"对话 ID：([A-Za-z0-9_-]+)")


def test_a_local_follow_up_continues_the_conversation(demo_dir: Path) -> None:
    code, out, err = invoke("夜间巡更多久一次？", "--data-dir", str(demo_dir))
    assert code == 0, err
    found = CONVERSATION.search(err)
    assert found, err
    cid = found.group(1)
    stored = json.loads((demo_dir / "conversations" / f"{cid}.json").read_text("utf-8"))
    assert [t["query"] for t in stored["turns"]] == ["夜间巡更多久一次？"]
    assert re.search(r"\[C:\d+\]", stored["turns"][0]["answer"])

    code, out, err = invoke("那白天呢？", "--conversation", cid, "--data-dir", str(demo_dir))
    assert code == 0, err
    assert CONVERSATION.search(err).group(1) == cid  # type: ignore[union-attr]
    stored = json.loads((demo_dir / "conversations" / f"{cid}.json").read_text("utf-8"))
    assert [t["query"] for t in stored["turns"]] == ["夜间巡更多久一次？", "那白天呢？"]
    # the follow-up was searched with the subject of the earlier question
    assert "日间巡更" in out or "2 小时" in out, out


def test_an_unknown_conversation_is_one_line(demo_dir: Path) -> None:
    proc = run_gcite("ask", "问题", "--conversation", "no-such-id", "--data-dir", str(demo_dir))
    assert proc.returncode == 1 and proc.stderr.strip() == "错误: 没有这个对话：no-such-id"
    proc = run_gcite("ask", "问题", "--conversation", "../x", "--data-dir", str(demo_dir))
    assert proc.returncode == 1 and "对话 ID 无效" in proc.stderr


def test_interactive_mode_keeps_the_conversation_for_you(demo_dir: Path) -> None:
    result = CliRunner().invoke(
        ask, ["--data-dir", str(demo_dir)], input="夜间巡更多久一次？\n那白天呢？\n\n"
    )
    assert result.exit_code == 0, result.stderr
    assert "对话模式" in result.stderr
    cid = CONVERSATION.search(result.stderr).group(1)  # type: ignore[union-attr]
    stored = json.loads((demo_dir / "conversations" / f"{cid}.json").read_text("utf-8"))
    assert [t["query"] for t in stored["turns"]] == ["夜间巡更多久一次？", "那白天呢？"]
    assert result.stdout.count("来源：") == 2


def test_a_remote_follow_up_sends_the_conversation_id() -> None:
    with dify_standin() as server:
        server.replies.append(Reply(body=dify_answer(["夜间每小时一次[C:1]。"], CHUNKS)))
        server.replies.append(Reply(body=dify_answer(["白天两小时一次[C:1]。"], CHUNKS)))
        code, _, err = invoke("夜间巡更多久一次？", "--url", server.url, "--key", "app-secret")
        assert code == 0, err
        cid = CONVERSATION.search(err).group(1)  # type: ignore[union-attr]
        # the printed follow-up command names the service (the key itself is not printed)
        assert f'gcite ask --conversation {cid} --url {server.url} --key … "…"' in err, err
        assert "app-secret" not in err
        code, _, err = invoke("那白天呢？", "--url", server.url, "--conversation", cid)
        assert code == 0, err
        # conversation mode through the service ends with the same command
        server.replies.append(Reply(body=dify_answer(["好[C:1]。"], CHUNKS)))
        result = CliRunner().invoke(ask, ["--url", server.url], input="问题\n\n")
        assert result.exit_code == 0, result.stderr
        assert f"（继续：gcite ask --conversation {cid} --url {server.url}）" in result.stderr
    bodies = [r["json"] for r in server.requests]
    assert bodies[0]["conversation_id"] == "" and bodies[1]["conversation_id"] == cid


def test_help_pages_are_chinese_click_strings_included() -> None:
    commands = ["", "ask", "datasets", "datasets delete", "documents", "search", "serve"]
    for command in [*commands, "demo", "ingest", "status", "export", "vectors"]:
        proc = run_gcite(*command.split(), "--help")
        assert proc.returncode == 0, proc.stderr
        text = proc.stdout
        assert text.startswith("用法：gcite"), text
        for english in ("Usage:", "Options:", "Commands:", "Show this message", "[default:"):
            assert english not in text, f"{command}: {english}"
        assert not re.search(r"\b(TEXT|INTEGER|DIRECTORY|FILE|PATH|FLOAT)\b", text), text


def test_the_terminal_source_list_tells_same_title_rows_apart() -> None:
    from gcite.stream.render import render_sources_terminal

    title = "巡更路线与打卡规范 v2.1"
    panel: list[Any] = [
        {
            "idx": k + 1,
            "raw_id": str(k + 1),
            "chunk": {
                "id": str(k + 1),
                "source_type": "rag",
                "document_title": title,
                "display_subtitle": "明湖大厦物业手册",
                "segment_position": k + 2,
                "content": f"第 {k + 2} 段的内容。",
            },
        }
        for k in range(3)
    ]
    lines = render_sources_terminal(panel).splitlines()[1:]
    assert [line.split("（")[1].split(" · ")[0] for line in lines] == [
        "第 2 段",
        "第 3 段",
        "第 4 段",
    ]
    assert len(set(lines)) == 3


def test_the_readme_terminal_commands_run_as_written_after_make_demo() -> None:
    """Every README code block that runs ``gcite`` first activates the venv ``make demo``
    creates (or calls ``.venv/bin/gcite``), and the activation puts ``gcite`` on PATH."""
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text("utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    runs_gcite = [b for b in blocks if re.search(r"^gcite ", b, re.M)]
    assert runs_gcite
    for block in runs_gcite:
        first = block.index(next(line for line in block.splitlines() if line.startswith("gcite ")))
        assert "source .venv/bin/activate" in block[:first], block
    proc = subprocess.run(
        ["bash", "-c", "source .venv/bin/activate && gcite ask --help"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("用法：gcite ask"), proc.stderr
    make = subprocess.run(
        ["make", "-n", "demo"], cwd=root, capture_output=True, text=True, check=False
    )
    assert "source .venv/bin/activate" in make.stdout


def test_an_unreachable_service_is_said_in_chinese() -> None:
    proc = run_gcite("ask", "问题", "--url", "http://127.0.0.1:9")
    assert proc.returncode == 1
    line = proc.stderr.strip()
    assert line == "错误: 无法连接服务，请检查网络后重试（http://127.0.0.1:9/v1/chat-messages）"
    assert "All connection attempts failed" not in proc.stderr


def test_remote_inputs_reach_the_request() -> None:
    """``--input`` fills the request's ``inputs`` (a chatflow's Start-node variables)."""
    with dify_standin() as server:
        server.replies.append(Reply(body=dify_answer(["好[C:1]。"], CHUNKS), piece=7))
        roles = "user_roles=物业经理,运维工程师"
        code, _, err = invoke("问题", "--url", server.url, "--input", roles, "--input", "x=")
        assert code == 0, err
        server.replies.append(Reply(body=dify_answer(["好[C:1]。"], CHUNKS), piece=7))
        code, _, err = invoke("问题", "--url", server.url, "--json", "--input", "a=b=c")
        assert code == 0, err
    assert server.requests[0]["json"]["inputs"] == {"user_roles": "物业经理,运维工程师", "x": ""}
    assert server.requests[1]["json"]["inputs"] == {"a": "b=c"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "http://127.0.0.1:9", "--input", "novalue"], "名称=值"),
        (["--url", "http://127.0.0.1:9", "--input", "a=1", "--input", "a=2"], "重复"),
        (["--input", "a=1"], "只用于 --url"),
    ],
)
def test_bad_inputs_are_refused_before_any_request(args: list[str], message: str) -> None:
    result = CliRunner().invoke(ask, ["问题", *args])
    assert result.exit_code == 2 and message in result.output, result.output
