"""experiments/ holds commands only: every module there, in its subpackages too,
runs as ``python -m experiments.X`` or ``python -m experiments.GROUP.X`` (a
``main`` behind a ``__main__`` guard), and every subpackage says what it holds.
What commands share lives in the library, agz_jax (tests/test_layering.py
checks that no command imports another)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
HELPERS = {"__init__"}
COMMANDS = sorted(p for p in EXPERIMENTS.rglob("*.py") if p.stem not in HELPERS)
GROUPS = sorted(p for p in EXPERIMENTS.rglob("*") if p.is_dir() and p.name != "__pycache__"
                and any(p.glob("*.py")))


def name(path: Path) -> str:
    return path.relative_to(EXPERIMENTS).as_posix()


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


@pytest.mark.parametrize("path", COMMANDS, ids=name)
def test_every_module_of_experiments_is_a_command(path):
    tree = ast.parse(path.read_text())
    assert has_main(tree) and main_guard(tree), (
        f"experiments/{name(path)} is no command (a main() run under "
        "if __name__ == '__main__'): move it into agz_jax")


def test_the_commands_are_found_in_their_groups():
    assert {name(p) for p in GROUPS} >= {"go", "play", "studies", "training"}, GROUPS
    assert {"selfplay.py", "bench.py", "go/bench.py", "play/arena.py"} <= {
        name(p) for p in COMMANDS}


@pytest.mark.parametrize("group", GROUPS, ids=name)
def test_every_group_is_a_package_that_says_what_it_holds(group):
    init = group / "__init__.py"
    assert init.is_file() and ast.get_docstring(ast.parse(init.read_text())), (
        f"experiments/{name(group)} needs an __init__.py whose docstring says what it holds")
