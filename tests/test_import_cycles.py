"""No import cycle among gcite's modules.

Every import statement of ``src/gcite`` counts: module level, inside functions (a lazy
import that works around a cycle is still a cycle) and under ``if TYPE_CHECKING:`` (a
cycle of types is one of design). Importing ``a.b.c`` imports the packages ``a`` and
``a.b`` too, except the packages the importing module is itself inside (they are being
imported already).
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "gcite"


def _modules(root: Path) -> dict[str, Path]:
    modules = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules ``name`` imports (every import statement in the file)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            submodules = {f"{base}.{a.name}" for a in node.names} & modules.keys()
            targets |= submodules
            if len(submodules) < len(node.names):
                targets.add(base)
    edges: set[str] = set()
    for target in targets:
        parts = target.split(".")
        for depth in range(1, len(parts) + 1):
            module = ".".join(parts[:depth])
            own_package = depth < len(parts) and (name + ".").startswith(module + ".")
            if module in modules and module != name and not own_package:
                edges.add(module)
    return edges


def _graph(root: Path) -> dict[str, set[str]]:
    modules = _modules(root)
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def test_gcite_has_no_import_cycle() -> None:
    try:
        graphlib.TopologicalSorter(_graph(SRC)).prepare()
    except graphlib.CycleError as exc:
        pytest.fail("import cycle: " + " -> ".join(exc.args[1]))


def test_the_check_sees_lazy_and_type_only_cycles(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from pkg.sub.b import B\n")
    (package / "a.py").write_text("def f():\n    from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import f\nB = 1\n"
    )
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(_graph(package)).prepare()
    (package / "sub" / "b.py").write_text("B = 1\n")  # a child importing its package: fine
    (package / "sub" / "c.py").write_text("from pkg.sub import b\nfrom . import b as bb\n")
    graphlib.TopologicalSorter(_graph(package)).prepare()


def test_config_reaches_no_backend() -> None:
    """:mod:`gcite.config` takes the backends' names and settings from the registry's
    entries (strings and plain data), never from a backend module: a new web provider,
    LLM protocol or store backend, settings included, leaves config.py and its imports
    as they are."""
    from gcite.registry import LLM_PROTOCOLS, STORE_BACKENDS, WEB_PROVIDERS

    graph = _graph(SRC)
    reached: set[str] = set()
    todo = ["gcite.config"]
    while todo:
        for module in graph[todo.pop()] - reached:
            reached.add(module)
            todo.append(module)
    references = [
        *(p.source for p in WEB_PROVIDERS.values()),
        *LLM_PROTOCOLS.values(),
        *(b.opener for b in STORE_BACKENDS.values()),
    ]
    backends = {reference.partition(":")[0] for reference in references}
    assert "gcite.registry" in reached
    assert not reached & backends
    assert not {m for m in reached if m.startswith(("gcite.knowledge", "gcite.web."))}
