"""Dify integration artefacts: the merge node exported as a Code-node file."""

from __future__ import annotations

from gcite.dify.codenode import render_code_node

__all__ = ["render_code_node"]
