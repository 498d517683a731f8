"""The browser libraries the H5 page ships (``src/gcite/service/static/vendor/``) are the
pinned npm packages, byte for byte: ``tests/vendor/package.json`` pins them and
``package-lock.json`` locks them (with integrity hashes); ``npm ci`` installs exactly that
into a temporary folder and each committed file is compared with the package's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
VENDOR = HERE.parents[1] / "src" / "gcite" / "service" / "static" / "vendor"
INDEX = VENDOR.parent / "index.html"

#: committed file -> (npm package, file inside the package)
SHIPPED = {
    "markdown-it.min.js": ("markdown-it", "dist/browser/markdown-it.umd.min.js"),
    "markdown-it.LICENSE": ("markdown-it", "LICENSE"),
}


def test_the_pin_is_exact_and_locked() -> None:
    package = json.loads((HERE / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((HERE / "package-lock.json").read_text(encoding="utf-8"))
    version = package["dependencies"]["markdown-it"]
    assert version[0].isdigit(), "pin an exact version, not a range"
    locked = lock["packages"]["node_modules/markdown-it"]
    assert locked["version"] == version and locked["integrity"].startswith("sha512-")
    assert f"markdown-it {version}" in (VENDOR / "markdown-it.VERSION").read_text()
    # the page loads the vendored file from its own origin (no CDN)
    html = INDEX.read_text(encoding="utf-8")
    assert '<script src="/static/vendor/markdown-it.min.js"></script>' in html
    assert "://" not in html.replace("http://www.w3.org", "")


def test_committed_files_equal_the_pinned_npm_package(tmp_path: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail("npm is required in CI to check the vendored files")
        pytest.skip("npm not installed")
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(HERE / name, tmp_path / name)
    done = subprocess.run(
        [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"npm ci failed: {done.stderr[-2000:]}"
    for committed, (package, inner) in SHIPPED.items():
        pinned = tmp_path / "node_modules" / package / inner
        assert pinned.is_file(), f"{package} has no {inner}"
        assert (VENDOR / committed).read_bytes() == pinned.read_bytes(), (
            f"static/vendor/{committed} differs from {package}/{inner} of the pinned version"
        )
