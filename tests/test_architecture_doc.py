"""docs/architecture.md lists every module, as the generator writes it from the docstrings."""

from __future__ import annotations

from pathlib import Path

import pytest

from gcite.testing import archdoc

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def test_every_module_has_a_docstring_and_a_line_in_the_doc() -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(archdoc.BEGIN) : text.index(archdoc.END)]
    missing = []
    for module in archdoc.modules():
        path = archdoc.PACKAGE.parent / module
        name = path.parent.name + "/" if path.name == "__init__.py" else path.name
        name = "src/gcite/" if module == "gcite/__init__.py" else name
        if f" {name} " not in section or archdoc.summary(path) not in section:
            missing.append(module)
    assert not missing, f"not in docs/architecture.md: {missing}"


def test_the_tree_is_up_to_date() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert archdoc.update(text) == text, "run: python -m gcite.testing.archdoc"
    assert archdoc.main([str(DOC), "--check"]) == 0


def test_a_new_module_fails_the_check(tmp_path: Path) -> None:
    package = tmp_path / "gcite"
    package.mkdir()
    (package / "__init__.py").write_text('"""The package."""\n', encoding="utf-8")
    (package / "a.py").write_text('"""Module a: does one thing.\n\nMore."""\n', encoding="utf-8")
    doc = f"# t\n\n{archdoc.BEGIN}\n{archdoc.END}\n\nrest\n"
    updated = archdoc.update(doc, package)
    assert "a.py" in updated and "Module a: does one thing." in updated
    assert updated.endswith("\n\nrest\n")
    assert archdoc.update(updated, package) == updated
    (package / "b.py").write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(archdoc.ArchDocError, match=r"b\.py"):
        archdoc.update(updated, package)
    (package / "b.py").write_text('"""Module b."""\n', encoding="utf-8")
    assert archdoc.update(updated, package) != updated
