"""The library's layers: every module of ``agz_jax`` belongs to one layer, and
imports only from layers below it or from its own (``docs/design.md`` draws
them). Imports inside functions count: a lazy import is still an arrow.

Layers of equal rank are side by side and may not import each other (the
players do not import the training, nor the reverse). A new module must be
given a layer here, or this test fails.
"""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# (rank, layer): modules, by dotted name under agz_jax ("go" covers go.*).
LAYERS: dict[tuple[int, str], tuple[str, ...]] = {
    (0, "base"): ("checks", "clock", "cache", "compaction", "rating"),
    (1, "game"): ("gomoku", "renju", "renju_check", "symmetry", "tactics", "vcf", "openings",
                  "records", "mentor"),
    (2, "config"): ("sections", "presets", "config"),
    (3, "nets"): ("features", "networks", "routing", "checkpoint", "models"),
    (4, "search"): ("mctx_loop", "search", "baseline"),
    (5, "match"): ("arena",),
    (6, "training"): ("replay", "selfplay", "train", "training", "run", "parallel", "supervised",
                      "distill", "cli"),
    (6, "play"): ("engine", "brain", "brain_commands", "brain_text", "piskvork",
                  "piskvork_games", "web", "players"),
    (7, "curriculum"): ("curriculum",),
    (7, "go"): ("go",),
    (8, "studies"): ("ablation", "ablation_report", "ablation_store", "ablation_matches",
                     "ablation_train", "sweep", "seeds", "movepred", "movepred_data",
                     "movepred_report", "ledger", "ladder", "ladder_report", "outside"),
}


def layer_of(module: str) -> tuple[int, str] | None:
    """The layer of ``agz_jax.X.Y``: X.Y's own entry, else X's."""
    name = module.removeprefix("agz_jax.")
    for key, names in LAYERS.items():
        if name in names or name.split(".")[0] in names:
            return key
    return None


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / "agz_jax").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(module: str, path: Path) -> set[str]:
    """The agz_jax modules ``path`` imports (``from agz_jax import x`` names x)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .x import y
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            if base == "agz_jax" or (node.level and base == package):
                found.update(f"{base}.{a.name}" for a in node.names)
            elif base.startswith("agz_jax"):
                found.add(base)
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
            if theirs is None or theirs == mine:
                continue
            if theirs[0] >= mine[0]:
                wrong.append(f"{module} ({mine[1]}) imports {target} ({theirs[1]})")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_the_reader_sees_a_wrong_arrow(tmp_path, monkeypatch):
    """The check itself: a game-layer module importing the engine is caught."""
    fake = tmp_path / "agz_jax"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "gomoku.py").write_text("def f():\n    from agz_jax import engine\n")
    (fake / "engine.py").write_text("from agz_jax.gomoku import f\n")
    monkeypatch.setattr(__import__(__name__), "SRC", tmp_path)
    mods = modules()
    assert imports("agz_jax.gomoku", mods["agz_jax.gomoku"]) == {"agz_jax.engine"}
    assert imports("agz_jax.engine", mods["agz_jax.engine"]) == {"agz_jax.gomoku"}
    try:
        test_imports_follow_the_layers()
    except AssertionError as e:
        assert "agz_jax.gomoku (game) imports agz_jax.engine (play)" in str(e)
    else:
        raise AssertionError("the wrong arrow was not caught")


EXPERIMENTS = SRC.parent / "experiments"
# The benchmark's helpers, which its command imports (and one imports the other).
BENCH = {"bench", "bench_measures", "bench_report"}


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
    """Every experiments/*.py is a command over the library: what two commands
    share lives in agz_jax, never in a command the other imports. Only the
    benchmark's helpers (bench_measures, bench_report) are imported, by bench."""
    wrong = []
    for path in sorted(EXPERIMENTS.glob("*.py")):
        for target in sorted(experiments_imported(path)):
            if not (path.stem in BENCH and target.removeprefix("experiments.") in BENCH):
                wrong.append(f"experiments/{path.name} imports {target}")
    assert not wrong, ("commands importing experiments (move what they share into "
                       "agz_jax):\n" + "\n".join(wrong))


def test_the_reader_sees_a_command_import(tmp_path):
    (tmp_path / "a.py").write_text("import sys\n\ndef f():\n    from experiments import b\n"
                                   "from experiments.c import x\nimport experiments.d\n")
    assert experiments_imported(tmp_path / "a.py") == {
        "experiments.b", "experiments.c", "experiments.d"}
