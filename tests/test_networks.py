"""PolicyValueNet shapes and parameter count, Double Networks dispatch, BatchNorm modes,
and Maddison et al.'s options: weight symmetry, position biases, colour heads, ranks."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agz_jax.config.schema import FeaturesConfig
from agz_jax.game import symmetry
from agz_jax.game.gomoku import Rules
from agz_jax.nets import features, networks
from agz_jax.nets.networks import BoardConv, Networks, PolicyValueNet, symmetrise
from agz_jax.search.searcher import make_recurrent_fn

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


# -- Maddison et al.'s options: weight symmetry, position biases, colour heads, ranks --------

def option_net(channels=3, **options):
    """A tiny net with ``options`` and synthetic variables of one net (no init compile)."""
    net = PolicyValueNet(board_size=5, filters=4, blocks=1, value_hidden=4, **options)
    obs = jax.ShapeDtypeStruct((1, 5, 5, channels), jnp.float32)
    shapes = jax.eval_shape(functools.partial(net.init, train=False, to_play=jnp.zeros(1, int)),
                            jax.random.key(0), obs)
    return net, synthetic_variables(shapes, seed=7)


@functools.cache
def all_symmetries_apply(symmetric: bool):
    """jit: (variables, obs [B,H,W,C]) -> outputs on the 8 maps of obs, [8, B, ...]."""
    net, variables = option_net(symmetric=symmetric)

    def run(variables, obs):
        mapped = jnp.stack([symmetry.transform_planes(obs, g) for g in range(8)])
        logits, value = net.apply(variables, mapped.reshape(-1, *obs.shape[1:]))
        return logits.reshape(8, obs.shape[0], -1), value.reshape(8, -1)

    return jax.jit(run), variables


def equivariance_error(symmetric: bool) -> tuple[float, float]:
    """max |policy(g x) - g policy(x)| and max |value(g x) - value(x)| over the 8 maps."""
    run, variables = all_symmetries_apply(symmetric)
    logits, value = jax.device_get(run(variables, random_obs(11, BATCH, 5)))
    want = np.stack([np.asarray(symmetry.transform_policy(logits[0], g, 5)) for g in range(8)])
    return float(np.abs(logits - want).max()), float(np.abs(value - value[0]).max())


def test_symmetric_filters_make_the_net_exactly_equivariant():
    policy_err, value_err = equivariance_error(symmetric=True)
    assert policy_err < 1e-5 and value_err < 1e-6, (policy_err, value_err)


def test_a_net_without_weight_symmetry_is_not_equivariant():
    policy_err, value_err = equivariance_error(symmetric=False)
    assert policy_err > 1e-2 and value_err > 1e-4, (policy_err, value_err)


def test_symmetrised_kernel_is_invariant_and_a_projection():
    k = np.random.default_rng(0).normal(size=(3, 3, 2, 5)).astype(np.float32)
    s = np.asarray(symmetrise(k))
    for g in range(8):
        mapped = np.rot90(s, g % 4, axes=(0, 1))
        mapped = np.flip(mapped, axis=1) if g >= 4 else mapped
        np.testing.assert_allclose(mapped, s, atol=1e-6)
    np.testing.assert_allclose(np.asarray(symmetrise(s)), s, atol=1e-6)
    assert np.abs(s - k).max() > 0.1


def test_a_position_bias_moves_its_own_point_only():
    conv = BoardConv(filters=2, kernel_size=3, position_bias=True)
    x = jnp.asarray(random_obs(3, 2, 5))
    variables = conv.init(jax.random.key(0), x)
    assert variables["params"]["position_bias"].shape == (5, 5, 2)
    bumped = jax.tree.map(lambda v: v, variables)
    bumped["params"]["position_bias"] = variables["params"]["position_bias"].at[1, 3, 0].add(0.5)
    apply = jax.jit(conv.apply)
    diff = np.asarray(apply(bumped, x) - apply(variables, x))
    want = np.zeros_like(diff)
    want[:, 1, 3, 0] = 0.5
    np.testing.assert_allclose(diff, want, atol=1e-6)


def test_position_biases_are_in_every_conv_layer_and_reach_the_policy():
    net, variables = option_net(position_bias=True)
    biased = [jax.tree_util.keystr(p) for p, _ in
              jax.tree_util.tree_leaves_with_path(variables["params"])
              if "position_bias" in jax.tree_util.keystr(p)]
    assert len(biased) == 5, biased  # stem, 2 in the block, policy and value convs
    obs = random_obs(4, BATCH, 5)
    apply = jax.jit(net.apply)
    logits, value = apply(variables, obs)
    params = variables["params"]
    stem = params["BoardConv_0"]["position_bias"]
    bumped = {**variables, "params": {**params, "BoardConv_0": {
        **params["BoardConv_0"], "position_bias": jnp.asarray(stem).at[2, 2].add(1.0)}}}
    logits_b, value_b = apply(bumped, obs)
    assert np.abs(np.asarray(logits_b - logits)).max() > 1e-3
    # Biases tied to points break the symmetric net's equivariance (documented).
    sym, sym_vars = option_net(symmetric=True, position_bias=True)
    x = jnp.asarray(obs)
    both = jax.jit(sym.apply)(sym_vars, jnp.concatenate([x, symmetry.transform_planes(x, 1)]))
    got = np.asarray(both[0][BATCH:])
    want = np.asarray(symmetry.transform_policy(both[0][:BATCH], 1, 5))
    assert np.abs(got - want).max() > 1e-3


def test_colour_heads_pick_the_head_of_the_colour_to_move():
    net, variables = option_net(colour_heads=True)
    nets = Networks(net, num_nets=1)
    stacked = jax.tree.map(lambda v: v[None], variables)
    obs = random_obs(8, BATCH, 5)
    to_play = np.array([0, 1, 1, 0, 1, 0], np.int32)
    logits, value = jax.jit(nets.evaluate)(stacked, obs, to_play)
    apply = jax.jit(net.apply)
    black = apply(variables, obs, to_play=np.zeros(BATCH, np.int32))
    white = apply(variables, obs, to_play=np.ones(BATCH, np.int32))
    assert np.abs(np.asarray(black[0] - white[0])).min(axis=-1).max() > 1e-4  # heads differ
    for i, c in enumerate(to_play):
        pick = white if c else black
        np.testing.assert_allclose(logits[i], pick[0][i], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(value[i], pick[1][i], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="to_play"):
        jax.eval_shape(net.apply, variables, obs)
    with pytest.raises(ValueError, match="colour_heads"):
        Networks(net, num_nets=2)


def test_rank_planes_reach_the_net_and_the_leaves_of_a_search():
    """The rank set on the roots reaches every node the search's recurrent function
    expands, and changes what the net says there."""
    rules = Rules(5)
    feats = FeaturesConfig(ranks=2)
    net, variables = option_net(channels=feats.channels)
    nets = Networks(net, num_nets=1, features=feats)
    stacked = jax.tree.map(lambda v: v[None], variables)
    recurrent_fn = make_recurrent_fn(rules, nets, gamma=0.95)

    @jax.jit
    def expand(rank):
        roots = features.with_rank(jax.tree.map(lambda x: jnp.stack([x, x]), rules.init()), rank)
        out, children = recurrent_fn(stacked, jax.random.key(0), jnp.array([12, 6]), roots)
        obs = nets.observe(rules, children)
        return out, children, obs, nets.evaluate(stacked, obs, children.to_play)

    values = []
    for rank in (0, 1):
        out, children, obs, (_, value) = jax.device_get(expand(rank))
        assert children.rank.tolist() == [rank, rank]
        assert (obs[..., 3 + rank] == 1).all() and (obs[..., 4 - rank] == 0).all()
        np.testing.assert_allclose(out.value, value, rtol=1e-5, atol=1e-6)
        values.append(out.value)
    # (These synthetic weights leave the policy head's ReLUs dead; the value reads
    # the rank.)
    assert np.abs(values[0] - values[1]).max() > 1e-3


def test_init_is_compiled_once_per_networks():
    nets = Networks(SMALL, num_nets=2)
    assert nets._jitted_init is nets._jitted_init  # compiled once per Networks
    assert nets.obs_channels == 3 and nets.num_rings == 2
    assert Networks(SMALL, num_nets=1).num_rings == 1


def test_init_first_asked_inside_a_trace_still_works_outside_it():
    # The cached jitted init must close over no array of the trace that first
    # asked for it (it once leaked an eval_shape tracer: UnexpectedTracerError).
    nets = Networks(SMALL, num_nets=2)
    shapes = jax.eval_shape(nets.init, jax.random.key(0))
    inside = jax.jit(nets.init)(jax.random.key(1))
    outside = nets.init(jax.random.key(1))
    assert jax.tree.map(lambda s: s.shape, shapes) == jax.tree.map(jnp.shape, outside)
    jax.tree.map(np.testing.assert_array_equal, inside, outside)


# -- bfloat16 inference (search.dtype) ---------------------------------------------------------

BF16_BATCH = 64
BF16_TOP1 = 0.9
"""bfloat16 against float32 on the same positions: at least this fraction of
policy argmaxes agree, ..."""
BF16_TV = 0.01
"""... the policies' mean total-variation distance is below this, ..."""
BF16_DV = 0.02
"""... and no value differs by more than this. bfloat16 keeps 8 significant
bits (a relative rounding of up to 2^-9 per op). Observed: on these tiny random
nets 100%, 0.0015 and 0.004; on ``models/default``'s nets (``make bench``, 128
positions of 15x15) 100%, 0.009 and 0.012."""


@pytest.mark.parametrize("options", [
    {}, pytest.param({"symmetric": True, "position_bias": True}, marks=pytest.mark.long)])
def test_bfloat16_inference_agrees_with_float32(options):
    """Double Networks in bfloat16 (``Networks.evaluate(dtype=...)``): float32
    outputs, params cast (BN statistics kept float32), and close to float32."""
    net = PolicyValueNet(board_size=5, filters=8, blocks=1, value_hidden=8, **options)
    nets = Networks(net, num_nets=2)
    variables = synthetic_variables(jax.eval_shape(nets.init, jax.random.key(0)), seed=11)
    obs = random_obs(12, BF16_BATCH, 5)
    to_play = np.arange(BF16_BATCH, dtype=np.int32) % 2
    legal = obs[..., :2].sum(-1).reshape(BF16_BATCH, -1) == 0

    @jax.jit
    def both(variables):
        out = []
        for dtype in (jnp.float32, jnp.bfloat16):
            logits, value = nets.evaluate(variables, obs, to_play, dtype=dtype)
            out.append((logits, value, jax.nn.softmax(jnp.where(legal, logits, -jnp.inf))))
        return out

    (l32, v32, p32), (l16, v16, p16) = jax.device_get(both(variables))
    assert l16.dtype == v16.dtype == np.float32
    assert np.isfinite(l16).all() and (np.abs(v16) <= 1).all()
    assert not np.array_equal(l16, l32)  # bfloat16 did run
    top1 = np.mean(np.argmax(p32, -1) == np.argmax(p16, -1))
    tv = 0.5 * np.abs(p32 - p16).sum(-1).mean()
    dv = np.abs(v32 - v16).max()
    assert top1 >= BF16_TOP1 and tv < BF16_TV and dv < BF16_DV

    cast = networks.cast_params(variables, jnp.bfloat16)
    assert {x.dtype for x in jax.tree.leaves(cast["params"])} == {jnp.dtype(jnp.bfloat16)}
    assert {x.dtype for x in jax.tree.leaves(cast["batch_stats"])} == {jnp.dtype(jnp.float32)}
    # Already-cast params give the same outputs (a search casts once, then evaluates).
    l16b, v16b = jax.device_get(jax.jit(functools.partial(nets.evaluate, dtype=jnp.bfloat16))(
        cast, obs, to_play))
    np.testing.assert_array_equal(l16b, l16)
    np.testing.assert_array_equal(v16b, v16)
