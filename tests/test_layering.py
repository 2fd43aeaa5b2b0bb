"""The library's layers: every module of ``agz_jax`` lives in one layer's
package (``agz_jax.game.gomoku`` is in the game layer) and imports only from
layers below it or from its own (``docs/design.md`` draws them). Imports inside
functions count: a lazy import is still an arrow.

Layers of equal rank are side by side and may not import each other (the
players do not import the training, nor the reverse). A module outside the
layers' packages, or a new package not given a layer here, fails this test.
"""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# (rank, layer): the layer's package under agz_jax (a module's layer is its package).
LAYERS: dict[tuple[int, str], str] = {
    (0, "base"): "base",
    (1, "game"): "game",
    (2, "config"): "config",
    (3, "nets"): "nets",
    (4, "search"): "search",
    (5, "match"): "match",
    (6, "training"): "training",
    (6, "play"): "play",
    (7, "curriculum"): "curriculum",
    (7, "go"): "go",
    (8, "studies"): "studies",
}


def layer_of(module: str) -> tuple[int, str] | None:
    """The layer of ``agz_jax.X.Y``: the layer whose package is X."""
    parts = module.split(".")
    if parts[0] != "agz_jax" or len(parts) < 2:
        return None
    for key, package in LAYERS.items():
        if parts[1] == package:
            return key
    return None


def is_module(name: str) -> bool:
    """Whether the dotted ``name`` is a module or package under SRC."""
    path = SRC.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / "agz_jax").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(module: str, path: Path) -> set[str]:
    """The agz_jax modules ``path`` imports (``from agz_jax.p import x`` names
    agz_jax.p.x when x is a module, else agz_jax.p)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .x import y
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            if not (base == "agz_jax" or base.startswith("agz_jax.")):
                continue
            for a in node.names:  # from agz_jax.play import engine names agz_jax.play.engine
                sub = f"{base}.{a.name}"
                found.add(sub if base == "agz_jax" or is_module(sub) else base)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("agz_jax"))
    return {m for m in found if m != "agz_jax.__version__"}


def test_every_module_has_a_layer():
    loose = [m for m in modules() if m != "agz_jax" and layer_of(m) is None]
    assert not loose, f"give these modules a layer in tests/test_layering.py: {loose}"


def test_imports_follow_the_layers():
    wrong = []
    for module, path in modules().items():
        if module == "agz_jax":  # the package's public names gather from every layer
            continue
        mine = layer_of(module)
        for target in sorted(imports(module, path)):
            theirs = layer_of(target)
            if theirs is None:  # agz_jax's public names gather every layer
                wrong.append(f"{module} ({mine[1]}) imports {target} (agz_jax itself)")
                continue
            if theirs == mine:
                continue
            if theirs[0] >= mine[0]:
                wrong.append(f"{module} ({mine[1]}) imports {target} ({theirs[1]})")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_the_reader_sees_a_wrong_arrow(tmp_path, monkeypatch):
    """The check itself: a game-layer module importing the engine is caught, so
    is a module importing agz_jax's public names and a module outside the
    layers' packages."""
    fake = tmp_path / "agz_jax"
    for package in ("", "game", "play"):
        (fake / package).mkdir(exist_ok=True)
        (fake / package / "__init__.py").write_text("")
    (fake / "game" / "gomoku.py").write_text("def f():\n    from agz_jax.play import engine\n")
    (fake / "play" / "engine.py").write_text("from agz_jax.game.gomoku import f\n")
    monkeypatch.setattr(__import__(__name__), "SRC", tmp_path)
    mods = modules()
    assert imports("agz_jax.game.gomoku", mods["agz_jax.game.gomoku"]) == {"agz_jax.play.engine"}
    assert imports("agz_jax.play.engine", mods["agz_jax.play.engine"]) == {"agz_jax.game.gomoku"}
    try:
        test_imports_follow_the_layers()
    except AssertionError as e:
        assert "agz_jax.game.gomoku (game) imports agz_jax.play.engine (play)" in str(e)
    else:
        raise AssertionError("the wrong arrow was not caught")
    (fake / "play" / "engine.py").write_text("from agz_jax import State\n")
    (fake / "game" / "gomoku.py").write_text("")
    try:
        test_imports_follow_the_layers()
    except AssertionError as e:
        assert "agz_jax.play.engine (play) imports agz_jax.State (agz_jax itself)" in str(e)
    else:
        raise AssertionError("an import of agz_jax's public names was not caught")
    test_every_module_has_a_layer()
    (fake / "loose.py").write_text("")
    try:
        test_every_module_has_a_layer()
    except AssertionError as e:
        assert "agz_jax.loose" in str(e)
    else:
        raise AssertionError("the module outside the layers was not caught")


EXPERIMENTS = SRC.parent / "experiments"


def experiments_imported(path: Path) -> set[str]:
    """The ``experiments`` modules ``path`` imports (``from experiments import x``
    names x; lazy imports count)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "experiments":
                found.update(f"experiments.{a.name}" for a in node.names)
            elif node.module.startswith("experiments."):
                found.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level:  # from .x import y
            found.add("experiments." + (node.module or "?"))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names
                         if a.name == "experiments" or a.name.startswith("experiments."))
    return found


def test_no_command_imports_another():
    """Every experiments/**/*.py is a command over the library: what two commands
    share lives in agz_jax, never in a command the other imports."""
    wrong = []
    paths = sorted(EXPERIMENTS.rglob("*.py"))
    assert any(p.parent != EXPERIMENTS for p in paths), "the subpackages' commands are unseen"
    for path in paths:
        for target in sorted(experiments_imported(path)):
            wrong.append(f"{path.relative_to(EXPERIMENTS.parent).as_posix()} imports {target}")
    assert not wrong, ("commands importing experiments (move what they share into "
                       "agz_jax):\n" + "\n".join(wrong))


def test_the_reader_sees_a_command_import(tmp_path):
    (tmp_path / "a.py").write_text("import sys\n\ndef f():\n    from experiments import b\n"
                                   "from experiments.c import x\nimport experiments.d\n")
    assert experiments_imported(tmp_path / "a.py") == {
        "experiments.b", "experiments.c", "experiments.d"}


MCTX_LOOP = "agz_jax.search.mctx_loop"
"""The one package that may import mctx's private API (``mctx._src``)."""


def private_mctx_imports(path: Path) -> set[str]:
    """The ``mctx._src`` modules ``path`` imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mctx._src"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("mctx._src"))
    return found


def test_only_the_loop_touches_mctx_private_api():
    """An mctx upgrade is checked in one place: only ``search.mctx_loop``'s
    modules import ``mctx._src`` (and they do)."""
    users = {m for m, path in modules().items() if private_mctx_imports(path)}
    outside = sorted(m for m in users if m != MCTX_LOOP and not m.startswith(MCTX_LOOP + "."))
    assert not outside, f"mctx._src imported outside {MCTX_LOOP}: {outside}"
    assert users, "the loop no longer reads mctx._src: update this test and the docs"


def test_the_reader_sees_a_private_mctx_import(tmp_path):
    (tmp_path / "a.py").write_text(
        "import mctx\n\ndef f():\n    from mctx._src import search as s\n"
        "    import mctx._src.tree\n")
    assert private_mctx_imports(tmp_path / "a.py") == {"mctx._src", "mctx._src.tree"}
