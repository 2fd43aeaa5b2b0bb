"""Supervised utilities: split by game, top-n accuracy, evaluate, accuracy by move number."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agz_jax.nets.networks import Networks, PolicyValueNet
from agz_jax.training import supervised as sv

# --------------------------------------------------------------- split_by_game


@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.integers(-5, 40), min_size=1, max_size=200),
       fraction=st.floats(0.01, 0.99), seed=st.integers(0, 2**31 - 1))
def test_split_never_shares_a_game(ids, fraction, seed):
    ids = np.asarray(ids)
    train, held = sv.split_by_game(ids, fraction, jax.random.key(seed))
    assert train.dtype == bool and held.dtype == bool and train.shape == ids.shape
    assert not np.any(train & held) and np.all(train | held)
    assert not set(ids[train]) & set(ids[held])  # whole games on one side
    games = len(set(ids.tolist()))
    if games >= 2:
        assert held.any() and train.any()
        assert len(set(ids[held].tolist())) == min(max(round(fraction * games), 1), games - 1)
    else:
        assert train.all()


def test_split_fraction_and_determinism():
    ids = np.repeat(np.arange(1000), 7)
    train, held = sv.split_by_game(ids, 0.1, jax.random.key(3))
    assert len(np.unique(ids[held])) == 100 and held.sum() == 700
    again = sv.split_by_game(jnp.asarray(ids), 0.1, jax.random.key(3))
    np.testing.assert_array_equal(held, again[1])
    other = sv.split_by_game(ids, 0.1, jax.random.key(4))
    assert not np.array_equal(held, other[1])


@pytest.mark.parametrize("fraction", [0, 1, -0.5, 1.5, "half"])
def test_split_bad_fraction(fraction):
    with pytest.raises(ValueError, match="held_out_fraction"):
        sv.split_by_game(np.arange(10), fraction, jax.random.key(0))


def test_split_bad_shape():
    with pytest.raises(ValueError, match="one-dimensional"):
        sv.split_by_game(np.zeros((2, 3), int), 0.5, jax.random.key(0))


# --------------------------------------------------------------- top-n


def test_topn_known_answers():
    logits = jnp.asarray([
        [0.0, 5.0, 4.0, 3.0, 2.0, 1.0],  # target 1: rank 0
        [0.0, 5.0, 4.0, 3.0, 2.0, 1.0],  # target 0: rank 5
        [1.0, 1.0, 1.0, 1.0, 0.0, 0.0],  # target 2: ties go to lower index -> rank 2
        [9.0, 8.0, 1.0, 0.0, 0.0, 0.0],  # target 2, but 0 and 1 illegal -> rank 0
        [9.0, 8.0, 1.0, 0.0, 0.0, 0.0],  # target 0 is illegal -> never correct
    ])
    target = jnp.asarray([1, 0, 2, 2, 0])
    legal = jnp.ones((5, 6), bool).at[3, :2].set(False).at[4, 0].set(False)
    np.testing.assert_array_equal(sv.target_rank(logits, target, legal), [0, 5, 2, 0, 6])
    np.testing.assert_array_equal(sv.target_rank(logits, target)[3:], [2, 0])
    acc = sv.topn_accuracy(logits, target, ns=(1, 3, 6), legal=legal)
    assert set(acc) == {"top1", "top3", "top6"}
    np.testing.assert_allclose([acc["top1"], acc["top3"], acc["top6"]], [0.4, 0.6, 0.8])
    curve = sv.topn_curve(logits, target, max_n=6, legal=legal)
    assert curve.shape == (6,) and curve.dtype == jnp.float32
    np.testing.assert_allclose(curve, [0.4, 0.4, 0.6, 0.6, 0.6, 0.8])
    jitted = jax.jit(sv.topn_accuracy, static_argnames="ns")(logits, target, legal=legal)
    np.testing.assert_allclose(jitted["top5"], 0.6)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_rank_matches_a_stable_sort(seed):
    rng = np.random.default_rng(seed)
    logits = rng.integers(0, 4, size=(8, 12)).astype(np.float32)  # many ties
    target = rng.integers(0, 12, size=8)
    order = np.argsort(-logits, axis=1, kind="stable")
    expected = np.argmax(order == target[:, None], axis=1)
    np.testing.assert_array_equal(sv.target_rank(logits, target), expected)


# --------------------------------------------------------------- evaluate

NET = PolicyValueNet(board_size=5, filters=4, blocks=1, value_hidden=4)


def random_variables(nets, seed):
    """Random stacked variables of the right shapes, without compiling ``nets.init``
    (its per-parameter threefry calls take ~15 s of CPU to compile)."""
    shapes = jax.eval_shape(nets.init, jax.random.key(0))
    rng = np.random.default_rng(seed)

    def fill(path, leaf):
        if getattr(path[-1], "key", None) == "var":  # BatchNorm running variance
            return jnp.asarray(rng.uniform(0.5, 1.5, leaf.shape), leaf.dtype)
        return jnp.asarray(rng.normal(0.0, 0.5, leaf.shape), leaf.dtype)

    return jax.tree_util.tree_map_with_path(fill, shapes)


@pytest.mark.parametrize("num_nets", [pytest.param(1, marks=pytest.mark.long), 2])
def test_evaluate_equals_direct(num_nets):
    nets = Networks(NET, num_nets=num_nets)
    variables = random_variables(nets, 0)
    rng = np.random.default_rng(0)
    m = 23  # three chunks of 10, the last padded
    stones = rng.integers(-1, 2, size=(m, 25))
    to_play = rng.integers(0, 2, size=m).astype(np.int32)
    me = np.where(to_play == 0, 1, -1)[:, None]
    obs = np.stack([stones == me, stones == -me, np.zeros_like(stones, bool)], -1)
    obs = obs.reshape(m, 5, 5, 3).astype(np.int8)
    legal = stones == 0
    target = np.asarray([rng.choice(np.flatnonzero(row)) if row.any() else 0 for row in legal])
    z = rng.uniform(-1, 1, size=m).astype(np.float32)

    out = sv.evaluate(nets, variables, obs, to_play, target, z, legal=legal, batch_size=10,
                      return_ranks=True)
    # the direct computation: the whole set in one (jitted: eager flax compiles op by op) call
    logits, value = jax.jit(nets.evaluate)(variables, jnp.asarray(obs, jnp.float32),
                                           jnp.asarray(to_play))
    logits, value = np.asarray(logits, np.float64), np.asarray(value, np.float64)
    masked = np.where(legal, logits, -np.inf)
    rank = np.asarray([np.argmax(np.argsort(-masked[i], kind="stable") == target[i])
                       for i in range(m)])
    log_p = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    assert out["count"] == m
    np.testing.assert_array_equal(out["rank"], rank)
    for n in (1, 5, 10):
        assert out[f"top{n}"] == pytest.approx(np.mean(rank < n))
    assert out["policy_ce"] == pytest.approx(-np.mean(log_p[np.arange(m), target]), rel=1e-5)
    assert out["value_mse"] == pytest.approx(np.mean((z - value) ** 2), rel=1e-5)
    # the legal mask defaults to the empty points of the observation
    default = sv.evaluate(nets, variables, obs, to_play, target, z, batch_size=10)
    for k in ("top1", "top5", "top10", "policy_ce", "value_mse"):
        assert default[k] == pytest.approx(out[k])
    if num_nets == 2:  # each position is scored by the net of its colour to move
        swapped = sv.evaluate(nets, variables, obs, 1 - to_play, target, z, legal=legal,
                              batch_size=10)
        assert swapped["value_mse"] != pytest.approx(out["value_mse"])
    # one compilation for every chunk and every set size with the same batch_size
    size = sv._chunk_sums._cache_size()
    sv.evaluate(nets, variables, obs[:7], to_play[:7], target[:7], z[:7], batch_size=10)
    sv.evaluate(nets, variables, obs[:17], to_play[:17], target[:17], z[:17], batch_size=10)
    assert sv._chunk_sums._cache_size() == size


# --------------------------------------------------------------- per move number


def test_per_move_number_accuracy():
    correct = np.asarray([1, 0, 1, 1, 0, 0, 1], bool)
    move = np.asarray([0, 3, 4, 10, 12, 25, 40])
    out = sv.per_move_number_accuracy(correct, move, [0, 5, 20, 30])
    np.testing.assert_array_equal(out["count"], [3, 2, 1])  # move 40 is outside
    np.testing.assert_allclose(out["accuracy"], [2 / 3, 0.5, 0.0])
    out = sv.per_move_number_accuracy(correct, move, 20)
    np.testing.assert_array_equal(out["edges"], [0, 20, 40, 60])
    np.testing.assert_array_equal(out["count"], [5, 1, 1])
    out = sv.per_move_number_accuracy(correct[:2], move[:2], [0, 1, 2, 10])
    assert np.isnan(out["accuracy"][1]) and out["count"][1] == 0
    with pytest.raises(ValueError, match="increasing"):
        sv.per_move_number_accuracy(correct, move, [5, 5])
    with pytest.raises(ValueError, match="shape"):
        sv.per_move_number_accuracy(correct, move[:3], 10)
