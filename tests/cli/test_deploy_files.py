"""The shipped deployment files (``deploy/``) name only options that exist.

The nginx template itself runs in the two-machine test (tests/knowledge/test_two_machines.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from gcite.cli.serve import serve

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _exec_start(unit: Path) -> list[str]:
    lines = [
        ln for ln in unit.read_text(encoding="utf-8").splitlines() if ln.startswith("ExecStart=")
    ]
    assert len(lines) == 1, unit
    return shlex.split(lines[0].removeprefix("ExecStart="))


def test_the_gcite_unit_runs_serve_with_options_it_has() -> None:
    command = _exec_start(DEPLOY / "systemd" / "gcite.service")
    assert command[0].endswith("/gcite") and command[1] == "serve"
    known = {opt for param in serve.params for opt in param.opts}
    flags = [word for word in command[2:] if word.startswith("--")]
    assert flags and set(flags) <= known, set(flags) - known
    assert "--workers" in flags


def test_the_nginx_unit_uses_the_rendered_template_paths() -> None:
    command = _exec_start(DEPLOY / "systemd" / "gcite-nginx.service")
    template = (DEPLOY / "nginx" / "gcite.conf.template").read_text(encoding="utf-8")
    assert command[:2] == ["/usr/sbin/nginx", "-p"]
    assert set(re.findall(r"\$\{(GCITE_[A-Z_]+)\}", template)) == {
        "GCITE_PREFIX",
        "GCITE_LISTEN",
        "GCITE_UPSTREAMS",
    }
