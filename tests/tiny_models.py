"""Small random models for the front-end tests (engine, pbrain-agz, web board),
and ``heavy_jit`` for the few programs whose running dominates a test.

The variables are drawn with NumPy into the shapes of ``nets.init`` (found with
``jax.eval_shape``), so making a model compiles nothing: compiling ``init``
costs several CPU seconds per process, as much as the search itself.
"""

import contextlib
import fcntl
import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.config.presets import get_preset
from agz_jax.game import renju
from agz_jax.nets import models
from agz_jax.training import run

# XLA's optimisation level 1 for the few programs whose running, not their
# compiling, dominates a test (renju's deep readings, Go's ladder planes): the
# suite compiles at level 0 (conftest.py), which runs those 4-7 times slower.
RUNTIME_HEAVY = {"xla_backend_optimization_level": 1}


def heavy_jit(fun, **kwargs):
    """``jax.jit`` at ``RUNTIME_HEAVY``'s level."""
    return jax.jit(fun, compiler_options=RUNTIME_HEAVY, **kwargs)


@functools.cache
def _every_foul():
    return heavy_jit(lambda board: jax.vmap(
        lambda p: renju.foul(board, p, renju.REFEREE_DEPTH))(jnp.arange(board.shape[-1])))


def renju_fouls(board) -> np.ndarray:
    """int32[A]: ``renju.foul_code`` of every point of a host board (int8[A], +1
    black; 0 at occupied points) in one call, not one call a point."""
    board = np.asarray(board, np.int8)
    return np.where(board == 0, np.asarray(_every_foul()(jnp.asarray(board))), 0)


def random_model(directory: Path, size: int = 15, seed: int = 0, double: bool = True,
                 rule: str = "freestyle") -> Path:
    """A ``models.save`` directory: the smoke preset's net (8 filters, 1 block;
    Double Networks unless ``double=False``) on a ``size`` board under ``rule``,
    random weights, BN statistics at identity."""
    config = get_preset("smoke").replace(**{"game.size": size, "net.double": double,
                                            "game.rule": rule})
    nets = run.make_networks(config.net, board_size=config.game.size, features=config.features)
    shapes = jax.eval_shape(nets.init, jax.random.PRNGKey(0))
    rng = np.random.default_rng(seed)

    def fill(path, leaf):
        name = str(path[-1])
        if "var" in name or "scale" in name:
            return np.ones(leaf.shape, leaf.dtype)
        if "mean" in name or "bias" in name:
            return np.zeros(leaf.shape, leaf.dtype)
        fan_in = int(np.prod(leaf.shape[1:-1])) or 1
        return (rng.standard_normal(leaf.shape) / np.sqrt(fan_in)).astype(leaf.dtype)

    return models.save(directory, config, jax.tree_util.tree_map_with_path(fill, shapes))


def xla_cache_dir(tmp_path_factory) -> Path:
    """A persistent XLA cache for the engine subprocesses of one test session,
    shared by its xdist workers (their basetemps are siblings)."""
    path = tmp_path_factory.getbasetemp().parent / "agz_xla_cache"
    path.mkdir(exist_ok=True)
    return path


@contextlib.contextmanager
def compile_lock(cache: Path):
    """Held while an engine process compiles: under ``pytest -n 2`` the other
    worker waits, then loads the executables from the cache instead of
    compiling them a second time."""
    with open(cache / "compile.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
