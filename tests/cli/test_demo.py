"""``gcite demo``: idempotent ingestion of the bundled sample data, --once, errors."""

from __future__ import annotations

import json
import shutil
import socket
import time
from pathlib import Path

from click.testing import CliRunner

from cli.conftest import run_gcite
from gcite.cli.demo import SAMPLE_DIR, demo, demo_settings, prepare_demo
from gcite.config import demo_data_dir
from gcite.service.pages import load_page_config
from gcite.testing import busy_port, free_port


def test_sample_data_front_matter() -> None:
    import yaml

    docs = sorted((SAMPLE_DIR / "handbook").glob("*.md"))
    assert len(docs) >= 6
    metas = []
    for doc in docs:
        head = doc.read_text(encoding="utf-8").split("---\n")[1]
        metas.append(yaml.safe_load(head))
    assert all(m["document_title"] for m in metas)
    urls = [m.get("source_file_url") or "" for m in metas]
    assert any(u.startswith("https://") for u in urls)
    assert any(u.lower().endswith((".pdf", ".docx")) for u in urls)
    assert "" in urls
    roles = [m.get("access_roles") for m in metas]
    assert ["安保主管"] in roles and None in roles and [] in roles
    pages = [
        yaml.safe_load(p.read_text(encoding="utf-8").split("---\n")[1])
        for p in (SAMPLE_DIR / "web").glob("*.md")
    ]
    assert any("site_name" not in p for p in pages)
    assert any("published_date" not in p for p in pages)
    assert all(p["url"].startswith("https://") for p in pages)


def test_prepare_is_idempotent(demo_dir: Path) -> None:
    settings = demo_settings(demo_dir)
    state = prepare_demo(settings)
    assert not state.ingested
    assert load_page_config(settings)["identities"][0] == {
        "label": "访客",
        "key": "demo-visitor",
        "hint": "无角色：只能看到公开文档",
    }


def test_demo_once_answers_in_terminal(demo_dir: Path) -> None:
    result = CliRunner().invoke(demo, ["--data-dir", str(demo_dir), "--once", "干粉灭火器怎么用？"])
    assert result.exit_code == 0, result.stderr
    assert "示例数据已导入，跳过" in result.stderr
    assert "[知识库]" in result.stdout and "[网页]" in result.stdout
    assert "¹" in result.stdout
    result = CliRunner().invoke(
        demo, ["--data-dir", str(demo_dir), "--once", "大厦食堂周五的特价菜是什么？", "--json"]
    )
    assert result.exit_code == 0
    events = [json.loads(line) for line in result.stdout.splitlines()]
    answer = "".join(e.get("answer", "") for e in events if e["event"] == "message")
    assert answer == "根据现有资料无法确定"


def test_settings_are_offline_whatever_the_environment(tmp_path: Path, monkeypatch: object) -> None:
    settings = demo_settings(tmp_path, port=8123)
    assert settings.llm.base_url == "" and settings.web.provider == "offline"
    assert Path(settings.web.offline.dir) == SAMPLE_DIR / "web"
    assert settings.service.allow_any_key and settings.service.port == 8123
    assert {k.key: k.roles for k in settings.app_keys}["demo-security"] == ("安保主管",)
    assert demo_data_dir({"GCITE_DATA_DIR": "/x/y"}) == Path("/x/y")
    assert demo_data_dir({"XDG_CACHE_HOME": "/c"}) == Path("/c/gcite/demo")


def test_demo_errors_are_one_line(tmp_path: Path) -> None:
    proc = run_gcite("demo", "--role", "安保主管")
    assert proc.returncode == 2 and "--role 和 --json 只能与 --once 一起使用" in proc.stderr
    with busy_port() as port:
        proc = run_gcite("demo", "--data-dir", str(tmp_path), "--port", str(port))
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"错误: 端口 {port} 已被占用，请用 --port 换一个端口"
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = run_gcite("demo", "--data-dir", str(blocker / "sub"), "--once", "问题")
    assert proc.returncode == 1
    assert "错误: 无法写入演示数据目录" in proc.stderr and "Traceback" not in proc.stderr


def test_help() -> None:
    proc = run_gcite("demo", "--help")
    assert proc.returncode == 0
    assert "离线演示" in proc.stdout and "--once" in proc.stdout


def test_demo_serves_page_and_identities(demo_dir: Path, tmp_path: Path) -> None:
    """`gcite demo` on an ingested dir: prints the URL, serves the page, binds the keys."""
    import shutil
    import subprocess
    import sys

    import httpx

    # Qdrant Edge allows one process per shard, and this process keeps demo_dir open.
    data_dir = tmp_path / "demo"
    shutil.copytree(demo_dir, data_dir)

    port = free_port()
    code = "import sys; from gcite.cli import main; sys.argv[0] = 'gcite'; main()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "demo", "--data-dir", str(data_dir), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = f"http://127.0.0.1:{port}/"
        assert line.strip() == f"演示已启动: {url}"
        deadline = time.monotonic() + 120  # a hang guard
        while True:
            try:
                page = httpx.get(url, timeout=60)
                break
            except httpx.TransportError:
                proc.poll()
                assert proc.returncode is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "the demo did not answer"
                time.sleep(0.1)
        assert page.status_code == 200 and "/static/app.js" in page.text
        config = httpx.get(url + "page-config.json", timeout=60).json()
        assert [i["label"] for i in config["identities"]] == ["访客", "运维工程师", "安保主管"]
        question = "监控中心的备用钥匙放在哪里？"
        visitor = run_gcite("ask", question, "--url", url, "--key", "demo-visitor")
        assert visitor.returncode == 0, visitor.stderr
        assert visitor.stdout.strip() == "根据现有资料无法确定"
        guard = run_gcite("ask", question, "--url", url, "--key", "demo-security")
        assert "电子钥匙柜第 3 格" in guard.stdout
        anyone = run_gcite("ask", "干粉灭火器怎么用？", "--url", url, "--key", "whatever")
        assert "[网页]" in anyone.stdout and "[知识库]" in anyone.stdout, (
            anyone.stdout + anyone.stderr
        )
        # the running demo holds the shard: a local `ask` says so in one line
        busy = run_gcite("ask", question, "--data-dir", str(data_dir))
        assert busy.returncode == 1
        assert busy.stderr.startswith("错误: 知识库") and "另一个进程" in busy.stderr
        assert len(busy.stderr.strip().splitlines()) == 1
    finally:
        proc.terminate()
        proc.wait(10)


def test_port_check_ignores_connections_left_in_time_wait() -> None:
    """After Ctrl+C with a browser connected, the server's side of the connection stays in
    TIME_WAIT; the demo restarts on the same port (uvicorn binds with SO_REUSEADDR)."""
    from gcite.cli.startup import check_port

    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = server.accept()
        conn.close()  # the server closes first: its side goes to TIME_WAIT
        client.recv(1)
        client.close()
    check_port("127.0.0.1", port)  # no ConfigError


def test_the_in_use_hint_names_the_port_of_the_running_demo(tmp_path: Path) -> None:
    """A store held by a demo on port 8123: the hint says --url http://127.0.0.1:8123."""
    from gcite.cli.startup import in_use_error, record_serving_url

    settings = demo_settings(tmp_path, port=8123)
    record_serving_url(settings)
    assert "gcite ask --url http://127.0.0.1:8123 " in str(in_use_error("知识库", tmp_path))
    web = tmp_path / "web-offline"
    assert "http://127.0.0.1:8123" in str(in_use_error("离线网页索引", web))
    # nothing noted (or garbage): the default port
    (tmp_path / "serving-url").write_text("javascript:alert(1)")
    assert "gcite ask --url http://127.0.0.1:8000 " in str(in_use_error("知识库", tmp_path))


def test_prepare_reingests_a_store_of_an_older_ingest(demo_dir: Path, tmp_path: Path) -> None:
    """A stamped data dir whose catalog lacks what ingestion now keeps (the documents'
    query vocabulary) or lists another install's copy of the files is ingested again:
    the stamp alone would leave query normalisation without a vocabulary."""
    from gcite.knowledge import open_store
    from gcite.knowledge.catalog import CATALOG_NAME
    from gcite.knowledge.vocabulary import CATALOG_KEY

    data = tmp_path / "demo"
    shutil.copytree(demo_dir, data)
    settings = demo_settings(data)
    catalog_path = data / CATALOG_NAME
    catalog = json.loads(catalog_path.read_text(encoding="utf-8"))
    entries = catalog["datasets"][settings.knowledge.dataset]["documents"]
    for info in entries.values():
        del info[CATALOG_KEY]
    stale = dict(next(iter(entries.values())), path="/elsewhere/handbook/01-patrol.md")
    entries["00000000-0000-5000-8000-000000000000"] = stale
    catalog_path.write_text(json.dumps(catalog, ensure_ascii=False), encoding="utf-8")
    store = open_store(settings)
    try:
        assert "消防控制室" not in store.vocabulary().normalise("消控室在几楼")
    finally:
        store.close()

    assert prepare_demo(settings).ingested
    entries = json.loads(catalog_path.read_text(encoding="utf-8"))["datasets"][
        settings.knowledge.dataset
    ]["documents"]
    assert all(CATALOG_KEY in info for info in entries.values())
    assert {info["path"] for info in entries.values()} == {
        str(p) for p in (SAMPLE_DIR / "handbook").glob("*.md")
    }
    store = open_store(settings)
    try:
        assert "消防控制室" in store.vocabulary().normalise("消控室在几楼")
    finally:
        store.close()
    assert not prepare_demo(settings).ingested
