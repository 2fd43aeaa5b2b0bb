"""PolicyValueNet shapes and parameter count, Double Networks dispatch, BatchNorm modes."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agz_jax.networks import Networks, PolicyValueNet

SMALL = PolicyValueNet(board_size=5, filters=4, blocks=1)
BATCH = 6


def hand_count(size, filters, blocks, channels=3, hidden=32):
    """Trainable parameters of the architecture in the networks.py docstring:
    convolutions without bias (BatchNorm follows each), BN = scale + offset per
    channel, dense layers with bias."""
    a = size * size
    conv = lambda cin, cout, k: k * k * cin * cout
    bn = lambda c: 2 * c
    dense = lambda n_in, n_out: n_in * n_out + n_out
    stem = conv(channels, filters, 3) + bn(filters)
    block = 2 * (conv(filters, filters, 3) + bn(filters))
    policy = conv(filters, 2, 1) + bn(2) + dense(2 * a, a)
    value = conv(filters, 1, 1) + bn(1) + dense(a, hidden) + dense(hidden, 1)
    return stem + blocks * block + policy + value


def random_obs(seed, n, size):
    """float32[n, size, size, 3] observation-like planes: X, Y stones and a
    one-hot last move (numpy: eager jax.random would compile for seconds)."""
    rng = np.random.default_rng(seed)
    stones = rng.integers(-1, 2, size=(n, size * size))
    last = np.zeros((n, size * size))
    last[np.arange(n), rng.integers(0, size * size, size=n)] = 1
    planes = np.stack([stones == 1, stones == -1, last > 0], axis=-1)
    return planes.reshape(n, size, size, 3).astype(np.float32)


def synthetic_variables(shapes, seed):
    """Random variables with the structure of ``shapes`` (from ``jax.eval_shape``
    of an init), at initialiser-like scales. Avoids compiling flax's init, which
    costs seconds on CPU; running statistics are random too, so they matter."""
    rng = np.random.default_rng(seed)

    def fill(path, s):
        name = jax.tree_util.keystr(path)
        if "'var'" in name:
            x = rng.uniform(0.5, 2.0, s.shape)
        elif "'mean'" in name:
            x = rng.uniform(-0.5, 0.5, s.shape)
        elif "'scale'" in name:
            x = rng.uniform(0.5, 1.5, s.shape)
        elif "'kernel'" in name:  # [(N,) ..., fan_in, fan_out]
            fan_in = math.prod(s.shape[-4 if len(s.shape) >= 4 else -2:-1])
            x = rng.normal(size=s.shape) / math.sqrt(fan_in)
        else:  # biases
            x = rng.normal(size=s.shape) * 0.1
        return np.asarray(x, s.dtype)  # numpy: slicing it needs no compile

    return jax.tree_util.tree_map_with_path(fill, shapes)


@functools.cache
def small_networks(num_nets):
    nets = Networks(SMALL, num_nets=num_nets)
    shapes = jax.eval_shape(nets.init, jax.random.key(0))
    return nets, synthetic_variables(shapes, seed=num_nets)


@functools.cache
def apply_one():
    """One jitted inference function, shared by the tests (one compile)."""
    return jax.jit(Networks(SMALL).apply_one)


@pytest.mark.parametrize(
    ("size", "filters", "blocks"),
    [(5, 4, 0), (7, 8, 1), (9, 16, 3), (15, 32, 2), (19, 64, 5)],
)
def test_output_shapes(size, filters, blocks):
    net = PolicyValueNet(board_size=size, filters=filters, blocks=blocks)
    obs = jax.ShapeDtypeStruct((3, size, size, 3), jnp.float32)
    variables = jax.eval_shape(functools.partial(net.init, train=False), jax.random.key(0), obs)
    logits, value = jax.eval_shape(net.apply, variables, obs)
    assert logits.shape == (3, size * size) and logits.dtype == jnp.float32
    assert value.shape == (3,) and value.dtype == jnp.float32
    counted = sum(math.prod(x.shape) for x in jax.tree.leaves(variables["params"]))
    assert counted == hand_count(size, filters, blocks)


def test_outputs_are_finite_and_value_in_open_interval():
    _, stacked = small_networks(1)
    variables = jax.tree.map(lambda v: v[0], stacked)
    obs = random_obs(1, BATCH, 5)
    logits, value = apply_one()(variables, obs)
    assert logits.shape == (BATCH, 25) and value.shape == (BATCH,)
    assert np.isfinite(logits).all()
    assert (np.abs(np.asarray(value)) < 1).all()
    assert np.abs(np.asarray(value)).max() > 1e-3  # not trivially zero
    # Huge inputs saturate tanh; float32 may then round to exactly +-1, never beyond.
    logits, value = apply_one()(variables, obs * np.float32(1e4))
    assert np.isfinite(logits).all() and (np.abs(np.asarray(value)) <= 1).all()


def test_paper_net_parameter_count():
    """15x15, 32 filters, 2 residual blocks (the paper's Table I-III net)."""
    expected = (
        3 * 3 * 3 * 32 + 2 * 32                    # stem conv + BN
        + 2 * 2 * (3 * 3 * 32 * 32 + 2 * 32)       # 2 blocks x 2 (conv + BN)
        + 32 * 2 + 2 * 2 + 450 * 225 + 225         # policy head
        + 32 * 1 + 2 * 1 + 225 * 32 + 32 + 32 + 1  # value head
    )
    assert expected == hand_count(15, 32, 2) == 146_890
    nets = Networks(PolicyValueNet(board_size=15, filters=32, blocks=2), num_nets=2)
    shapes = jax.eval_shape(nets.init, jax.random.key(0))
    per_net = sum(math.prod(x.shape[1:]) for x in jax.tree.leaves(shapes["params"]))
    assert per_net == expected


@pytest.mark.parametrize("num_nets", [1, 2])
def test_variables_are_stacked_per_net(num_nets):
    nets = Networks(SMALL, num_nets=num_nets)
    shapes = jax.eval_shape(nets.init, jax.random.key(0))
    single = jax.eval_shape(functools.partial(SMALL.init, train=False), jax.random.key(0),
                            jax.ShapeDtypeStruct((1, 5, 5, 3), jnp.float32))
    assert set(shapes) == {"params", "batch_stats"}
    assert jax.tree.structure(shapes) == jax.tree.structure(single)
    for stacked, one in zip(jax.tree.leaves(shapes), jax.tree.leaves(single), strict=True):
        assert stacked.shape == (num_nets, *one.shape)
    _, variables = small_networks(num_nets)
    assert nets.num_params(variables) == hand_count(5, 4, 1)


def test_double_networks_ask_the_net_of_the_colour_to_move():
    nets, variables = small_networks(2)
    obs = random_obs(3, BATCH, 5)
    to_play = np.asarray([0, 1, 0, 1, 1, 0], np.int32)
    logits, value = jax.jit(nets.evaluate)(variables, obs, to_play)
    assert logits.shape == (BATCH, 25) and value.shape == (BATCH,)
    black = apply_one()(jax.tree.map(lambda v: v[0], variables), obs)
    white = apply_one()(jax.tree.map(lambda v: v[1], variables), obs)
    # The two nets really disagree, so picking the wrong one would show.
    assert np.abs(np.asarray(black[0]) - np.asarray(white[0])).max() > 1e-2
    for b in range(BATCH):
        want = black if int(to_play[b]) == 0 else white
        np.testing.assert_allclose(logits[b], want[0][b], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(value[b], want[1][b], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(nets.net_index(to_play), to_play)


def test_single_network_plays_both_colours():
    nets, variables = small_networks(1)
    obs = random_obs(4, BATCH, 5)
    to_play = np.asarray([0, 1, 0, 1, 1, 0], np.int32)
    logits, value = jax.jit(nets.evaluate)(variables, obs, to_play)
    want_logits, want_value = apply_one()(jax.tree.map(lambda v: v[0], variables), obs)
    np.testing.assert_allclose(logits, want_logits, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value, want_value, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(nets.net_index(to_play), np.zeros(BATCH))


@functools.cache
def small_train_apply():
    return jax.jit(functools.partial(SMALL.apply, train=True, mutable=["batch_stats"]))


def two_batches():
    """Two batches that share their first position and differ elsewhere."""
    a = random_obs(5, BATCH, 5)
    b = random_obs(6, BATCH, 5)
    b[0] = a[0]
    return a, b


def test_batchnorm_training_uses_and_updates_batch_statistics():
    _, stacked = small_networks(1)
    variables = jax.tree.map(lambda v: v[0], stacked)
    a, b = two_batches()
    (logits_a, value_a), updates = small_train_apply()(variables, a)
    (logits_b, value_b), _ = small_train_apply()(variables, b)
    assert set(updates) == {"batch_stats"}
    changed = jax.tree.map(lambda new, old: not np.allclose(new, old),
                           updates["batch_stats"], variables["batch_stats"])
    assert all(jax.tree.leaves(changed)), changed
    # Position 0 is the same in both batches, but batch statistics differ.
    assert np.abs(np.asarray(logits_a[0] - logits_b[0])).max() > 1e-4
    # Params are untouched by a training forward pass.
    assert "params" not in updates


def test_batchnorm_inference_is_per_position():
    _, stacked = small_networks(1)
    variables = jax.tree.map(lambda v: v[0], stacked)
    a, b = two_batches()
    logits_a, value_a = apply_one()(variables, a)
    logits_b, value_b = apply_one()(variables, b)
    np.testing.assert_allclose(logits_a[0], logits_b[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value_a[0], value_b[0], rtol=1e-5, atol=1e-6)
    # And the rest of the batch does differ, so this is not vacuous.
    assert np.abs(np.asarray(logits_a[1:] - logits_b[1:])).max() > 1e-3
