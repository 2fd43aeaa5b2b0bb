"""Model directories: save/load round trip, lookup by name, the shipped model, errors."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from agz_jax.config.presets import get_preset
from agz_jax.match import arena
from agz_jax.nets import models
from agz_jax.training.run import make_networks


def _variables(config, seed=0):
    nets = make_networks(config.net, board_size=config.game.size, features=config.features)
    return jax.jit(nets.init)(jax.random.PRNGKey(seed))


def test_save_load_round_trip_and_names(tmp_path, monkeypatch):
    config = get_preset("smoke")
    variables = _variables(config)
    models.save(tmp_path / "tiny", config, variables)
    loaded = models.load(tmp_path / "tiny")
    assert loaded.config == config and loaded.rules.size == 7
    for a, b in zip(jax.tree.leaves(loaded.variables), jax.tree.leaves(variables), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    monkeypatch.setenv("AGZ_JAX_MODELS", str(tmp_path))
    assert models.available() == ["tiny"]
    assert models.load("tiny").path == tmp_path / "tiny"
    with pytest.raises(models.ModelError, match=r"'nope' not found.*available: tiny"):
        models.load("nope")


def test_mismatched_variables_are_refused(tmp_path):
    small = get_preset("smoke")
    models.save(tmp_path / "m", small, _variables(small))
    # the same file under a config with wider nets
    wide = small.replace(**{"net.filters": 16})
    (tmp_path / "m" / "config.json").write_text(wide.to_json())
    with pytest.raises(models.ModelError, match="variables.msgpack"):
        models.load(tmp_path / "m")
    (tmp_path / "m" / "variables.msgpack").write_bytes(b"not msgpack")
    with pytest.raises(models.ModelError, match="not readable"):
        models.load(tmp_path / "m")


def test_the_shipped_model():
    """models/default: small, the paper's board, loadable by name, and it plays."""
    path = models.models_dir() / "default"
    size = sum(p.stat().st_size for p in path.iterdir())
    assert size <= 5 * 2**20
    model = models.load("default")
    assert model.config.game.size == 15 and model.config.game.rule == "freestyle"
    rules = model.rules
    states = jax.vmap(lambda _: rules.init())(np.arange(2))
    move = arena.policy_player(rules, model.nets, model.variables)(jax.random.PRNGKey(0), states)
    assert np.all((0 <= np.asarray(move)) & (np.asarray(move) < rules.num_actions))
