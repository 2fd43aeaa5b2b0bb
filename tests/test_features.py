"""Input features (``agz_jax.nets.features``), their config, and the whole pipeline
with every Maddison option on (features and network options)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agz_jax.config.presets import get_preset
from agz_jax.config.schema import Config, ConfigError, FeaturesConfig, NetConfig
from agz_jax.game import symmetry
from agz_jax.game.gomoku import BLACK, WHITE, Rules
from agz_jax.nets import checkpoint, features, models
from agz_jax.play.engine import make_state
from agz_jax.training import run

SIZE = 5
RULES = Rules(SIZE)
ALL = FeaturesConfig(history=3, colour=True, constant=True, ranks=4)
# Five stones on a 5x5 board, none in a line: 12 (black), 6, 7, 18, 0 (black).
MOVES = [12, 6, 7, 18, 0]


@functools.cache
def _fns():
    def replay(moves, rank):
        state = features.with_rank(RULES.init(), rank)
        state, _ = jax.lax.scan(lambda s, a: (RULES.step(s, a), None), state, moves)
        return state

    observe = jax.jit(features.observe, static_argnums=(0, 1))
    return jax.jit(replay), observe


def position(moves, rank=0):
    replay, _ = _fns()
    return replay(jnp.asarray(moves, jnp.int32), jnp.int32(rank))


def observe(cfg, state):
    return np.asarray(_fns()[1](cfg, RULES, state))


def plane(points):
    out = np.zeros(SIZE * SIZE, np.float32)
    out[list(points)] = 1
    return out.reshape(SIZE, SIZE)


def test_default_features_are_the_papers_three_planes():
    assert FeaturesConfig().channels == 3
    for n in range(len(MOVES) + 1):
        state = position(MOVES[:n])
        got = observe(FeaturesConfig(), state)
        np.testing.assert_array_equal(got, np.asarray(jax.jit(RULES.observe)(state)))
        # Every option keeps [X, Y, L] as the first three planes.
        np.testing.assert_array_equal(observe(ALL, state)[..., :3], got)


def test_played_at_records_each_stones_ply():
    state = position(MOVES)
    want = np.full(SIZE * SIZE, -1)
    want[MOVES] = np.arange(len(MOVES))
    np.testing.assert_array_equal(np.asarray(state.played_at), want)
    assert state.played_at.dtype == jnp.int16 and int(state.rank) == 0


@pytest.mark.parametrize("n", [4, 5])
def test_every_plane_on_a_known_game(n):
    """After n moves: turns-since one-hot by age, colour (black to move after 4,
    white after 5), constant ones, rank one-hot; channels in the documented order."""
    state = position(MOVES[:n], rank=2)
    obs = observe(ALL, state)
    assert obs.shape == (SIZE, SIZE, ALL.channels) == (SIZE, SIZE, 3 + 3 + 1 + 1 + 4)
    for age in (1, 2, 3):
        np.testing.assert_array_equal(obs[..., 2 + age], plane([MOVES[n - age]]), f"age {age}")
    np.testing.assert_array_equal(obs[..., 3], obs[..., 2])  # age 1 is L
    black_to_move = n % 2 == 0
    assert int(state.to_play) == (BLACK if black_to_move else WHITE)
    np.testing.assert_array_equal(obs[..., 6], np.full((SIZE, SIZE), float(black_to_move)))
    np.testing.assert_array_equal(obs[..., 7], np.ones((SIZE, SIZE)))
    for r in range(4):
        np.testing.assert_array_equal(obs[..., 8 + r], np.full((SIZE, SIZE), float(r == 2)))


def test_history_before_k_moves_and_out_of_range_rank():
    obs = observe(ALL, position(MOVES[:1], rank=7))
    np.testing.assert_array_equal(obs[..., 3], plane([MOVES[0]]))
    assert not obs[..., 4:6].any()  # nothing was played 2 or 3 plies ago
    assert not obs[..., 8:].any()  # rank 7 is none of the 4 ranks
    assert not observe(ALL, position([]))[..., 3:6].any()


def test_a_position_set_up_from_a_board_knows_only_the_last_moves_age():
    board = np.asarray(position(MOVES).board)
    state = make_state(RULES, board, WHITE, last_action=MOVES[-1], rank=1)
    obs = observe(ALL, state)
    np.testing.assert_array_equal(obs[..., 3], plane([MOVES[-1]]))
    assert not obs[..., 4:6].any()
    np.testing.assert_array_equal(obs[..., 9], np.ones((SIZE, SIZE)))


def test_symmetry_of_the_observation_is_the_observation_of_the_mapped_game():
    """Replay augmentation maps the whole plane stack: right for every feature."""
    perms = symmetry.permutations(SIZE)
    obs = observe(ALL, position(MOVES, rank=3))
    for g in range(symmetry.NUM_SYMMETRIES):
        # point p goes to moved[p] (see basic_rules): moved = perm[inverse(g)]
        moved = perms[symmetry.inverse(g)]
        mapped = observe(ALL, position([int(moved[a]) for a in MOVES], rank=3))
        np.testing.assert_array_equal(np.asarray(symmetry.transform_planes(obs, g)), mapped,
                                      f"symmetry {g}")


def test_with_rank_sets_every_state_of_a_batch():
    states = jax.tree.map(lambda x: jnp.stack([x, x, x]), RULES.init())
    assert np.asarray(features.with_rank(states, 2).rank).tolist() == [2, 2, 2]
    stepped = jax.jit(jax.vmap(RULES.step))(features.with_rank(states, 3), jnp.arange(3))
    assert np.asarray(stepped.rank).tolist() == [3, 3, 3]  # step carries the rank


def test_config_sections_and_errors():
    assert FeaturesConfig(history=2, colour=True, constant=True, ranks=3).channels == 10
    cfg = Config.from_dict({"net": {"double": True}})  # an old config: no features section
    assert cfg.features == FeaturesConfig() and not cfg.net.symmetric
    assert Config.from_dict(cfg.replace(**{"features.ranks": 2}).to_dict()).features.ranks == 2
    for field, value in (("history", -1), ("ranks", 1.5), ("colour", 1), ("constant", "y")):
        with pytest.raises(ConfigError, match=f"features.{field}"):
            FeaturesConfig(**{field: value})
    for field in ("position_bias", "symmetric", "colour_heads"):
        with pytest.raises(ConfigError, match=f"net.{field}"):
            NetConfig(double=False, **{field: 1})
    with pytest.raises(ConfigError, match="net.colour_heads.*double"):
        NetConfig(colour_heads=True)  # double defaults to True
    NetConfig(colour_heads=True, double=False)


def test_shipped_model_reads_the_default_features():
    model = models.load("default")
    assert model.config.features == FeaturesConfig()
    assert model.nets.obs_channels == 3 and model.nets.features == FeaturesConfig()


@pytest.mark.long
def test_every_option_on_plays_trains_checkpoints_and_reloads(tmp_path):
    """One self-play iteration of a tiny config with every feature and network
    option on, training the colour heads; the run's checkpoint and an exported
    model directory load back into the same net."""
    config = get_preset("smoke").replace(**{
        "iterations": 1, "game.size": SIZE, "net.filters": 4, "net.value_hidden": 4,
        "net.double": False, "net.position_bias": True, "net.symmetric": True,
        "net.colour_heads": True, "features.history": 2, "features.colour": True,
        "features.constant": True, "features.ranks": 2, "search.num_simulations": 4,
        "selfplay.num_games": 4, "train.batch_size": 8, "train.steps_per_iteration": 2,
        "train.min_replay": 8, "gating.enabled": False, "eval.every": 0})
    comps = run.build(config)
    assert comps.nets.obs_channels == 9 and comps.nets.num_rings == 2
    state = run.init_state(comps)
    assert state.replay.obs.shape[:2] == (2, config.replay.capacity)
    assert state.replay.obs.shape[-1] == 9
    new, metrics = run.run_iteration(comps, state)
    assert metrics["train/trained"] == 1.0 and np.isfinite(metrics["train/loss"])
    assert int(new.train.step) == 2
    changed = jax.tree.map(lambda a, b: not np.array_equal(a, b), new.best["params"],
                           state.best["params"])
    assert all(jax.tree.leaves(changed)), changed  # every layer trained, heads and biases

    run_dir = tmp_path / "run"
    checkpoint.write_config(run_dir, config)
    checkpoint.save(run_dir, 1, new, {"iteration": 1})
    model = models.load(run_dir)
    assert model.config == config
    jax.tree.map(np.testing.assert_array_equal, model.variables, jax.device_get(new.best))
    exported = models.load(models.save(tmp_path / "model", config, new.best))
    jax.tree.map(np.testing.assert_array_equal, exported.variables, jax.device_get(new.best))
