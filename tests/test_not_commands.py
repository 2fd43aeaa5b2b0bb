"""experiments/ holds commands only: every module there runs as
``python -m experiments.X`` (a ``main`` behind a ``__main__`` guard). What
commands share lives in the library, agz_jax (tests/test_layering.py checks
that no command imports another)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HELPERS = {"__init__"}
COMMANDS = sorted(p for p in (ROOT / "experiments").glob("*.py") if p.stem not in HELPERS)


def has_main(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "main":
            return True
        if isinstance(node, ast.ImportFrom) and any(a.name == "main" and a.asname is None
                                                   for a in node.names):
            return True
    return False


def main_guard(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
               for node in tree.body)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: p.stem)
def test_every_module_of_experiments_is_a_command(path):
    tree = ast.parse(path.read_text())
    assert has_main(tree) and main_guard(tree), (
        f"experiments/{path.name} is no command (a main() run under "
        "if __name__ == '__main__'): move it into agz_jax")
